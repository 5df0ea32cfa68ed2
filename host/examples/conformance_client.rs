//! A small MCP client built on the `airlock-host` library, for the official conformance
//! suite (`@modelcontextprotocol/conformance`, client mode). The suite appends the test
//! server's URL to the command line and names the scenario in
//! `MCP_CONFORMANCE_SCENARIO`. The client connects (streamable HTTP, SSE fallback),
//! lists the tools and calls each with arguments derived from its schema.
//!
//! When the server wants authorization — the service fails to connect and a probe
//! request is answered 401, or (once authorized) a call fails and the probe is answered
//! 401/403 `insufficient_scope` — the client runs Airlock's OAuth flow
//! ([`airlock_host::oauth`]) without a person: the "browser" GETs the authorization URL
//! without following redirects and then GETs the `Location` it names (the flow's
//! loopback listener; the suite's authorization server approves at once). Tokens go to a
//! throwaway file store, and the service is reconnected with the bearer token. At most
//! three authorization rounds are run (the suite's retry-limit scenario). The scenario's
//! context (`MCP_CONFORMANCE_CONTEXT`) supplies a pre-registered client, or a client
//! Airlock then uses by itself from its config: client credentials, or (cross-app
//! access, SEP-990) an enterprise ID token and the identity provider's token endpoint.
//!
//! ```sh
//! npx @modelcontextprotocol/conformance@0.1.13 client --command target/debug/examples/conformance_client --scenario initialize
//! ```

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use airlock_host::config::{Config, OAuthClient, process_env};
use airlock_host::oauth;
use airlock_host::secrets::SecretStore;
use airlock_host::{Airlock, AirlockOptions, ServiceStatus};
use serde_json::{Map, Value, json};

/// The service's name in the generated config (and its token-store key).
const SERVICE: &str = "conformance";

/// The config variable carrying the `Authorization` header value.
const AUTHORIZATION_VAR: &str = "AIRLOCK_CONFORMANCE_AUTHORIZATION";

/// The client ID metadata document URL the suite's `auth/basic-cimd` expects (its
/// authorization server checks the id and never fetches it).
const CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";

/// A client Airlock runs by itself from its config (no browser): the `auth` table, its
/// values passed through variables so they need no TOML quoting.
struct Machine {
    /// `(field, value)` pairs of the table; `type` first.
    fields: Vec<(&'static str, String)>,
}

impl Machine {
    /// The variable carrying `field`'s value.
    fn var(field: &str) -> String {
        format!("AIRLOCK_CONFORMANCE_AUTH_{}", field.to_uppercase())
    }

    /// The `auth = { … }` line.
    fn table(&self) -> String {
        let fields: Vec<String> = self
            .fields
            .iter()
            .map(|(field, value)| match *field {
                "type" => format!("type = \"{value}\""),
                _ => format!("{field} = \"${{{}}}\"", Machine::var(field)),
            })
            .collect();
        format!("auth = {{ {} }}\n", fields.join(", "))
    }

    /// The value of variable `name`, when it is one of this table's.
    fn value(&self, name: &str) -> Option<String> {
        self.fields
            .iter()
            .find(|(field, _)| Machine::var(field) == name)
            .map(|(_, value)| value.clone())
    }
}

/// How this run authenticates, from `MCP_CONFORMANCE_CONTEXT` (JSON with the scenario's
/// `name` and, for some, a pre-registered client): client credentials when the scenario
/// is a machine-to-machine one; else the authorization-code flow with the given client,
/// or a client ID metadata document, or dynamic registration, as the server allows.
fn auth_mode(scenario: &str) -> (Option<Machine>, OAuthClient) {
    let context: Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|c| serde_json::from_str(&c).ok())
        .unwrap_or_default();
    let text = |k: &str| context.get(k).and_then(Value::as_str).map(str::to_string);
    let client_id = text("client_id");
    // Cross-app access: an enterprise ID token, exchanged for an identity assertion.
    if let (Some(endpoint), Some(id_token), Some(id), Some(secret)) = (
        text("idp_token_endpoint"),
        text("idp_id_token"),
        client_id.clone(),
        text("client_secret"),
    ) {
        let mut fields = vec![
            ("type", "identity_assertion".to_string()),
            ("idp_token_endpoint", endpoint),
            ("id_token", id_token),
            ("client_id", id),
            ("client_secret", secret),
        ];
        if let Some(idp_client) = text("idp_client_id") {
            fields.push(("idp_client_id", idp_client));
        }
        return (Some(Machine { fields }), OAuthClient::default());
    }
    if scenario.starts_with("auth/client-credentials")
        && let Some(id) = client_id.clone()
    {
        let key = match (text("private_key_pem"), text("client_secret")) {
            (Some(pem), _) => Some(("private_key", pem)),
            (None, Some(secret)) => Some(("client_secret", secret)),
            (None, None) => None,
        };
        if let Some(key) = key {
            let fields = vec![
                ("type", "client_credentials".to_string()),
                ("client_id", id),
                key,
            ];
            return (Some(Machine { fields }), OAuthClient::default());
        }
    }
    let client = OAuthClient {
        client_id,
        client_secret: text("client_secret"),
        client_metadata_url: Some(CLIENT_METADATA_URL.to_string()),
        ..OAuthClient::default()
    };
    (None, client)
}

/// Most authorization rounds per run.
const MAX_AUTH_ROUNDS: usize = 3;

/// How long the flow waits for the "browser".
const BROWSER_WAIT: Duration = Duration::from_secs(10);

/// Arguments for a tool from its input schema: a plausible value per property.
fn arguments(schema: &Value) -> Value {
    let mut args = Map::new();
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, prop) in props {
            let value = match prop.get("type").and_then(Value::as_str) {
                Some("number") | Some("integer") => json!(1),
                Some("boolean") => json!(true),
                Some("array") => json!([]),
                Some("object") => json!({}),
                _ => json!("test"),
            };
            args.insert(name.clone(), value);
        }
    }
    Value::Object(args)
}

/// The config for one server at `url`, with `Authorization: <authorization>` on every
/// request when given (passed through a variable, so the value needs no TOML quoting).
fn config(
    url: &str,
    authorization: Option<&str>,
    machine: Option<&Machine>,
) -> Result<Config, String> {
    let mut text = format!(
        "[mcp_servers.{SERVICE}]\ntype = \"http\"\nurl = \"{url}\"\nstartup_timeout_secs = 20\ntool_timeout_secs = 20\n"
    );
    if authorization.is_some() {
        text.push_str(&format!(
            "headers = {{ Authorization = \"${{{AUTHORIZATION_VAR}}}\" }}\n"
        ));
    }
    if let Some(machine) = machine {
        // Airlock's own support: it gets the token when it connects.
        text.push_str(&machine.table());
    }
    let env = |name: &str| match name {
        AUTHORIZATION_VAR => authorization.map(str::to_string),
        _ => machine
            .and_then(|m| m.value(name))
            .or_else(|| process_env(name)),
    };
    Config::from_str(Path::new("<conformance>"), &text, &env).map_err(|e| e.to_string())
}

/// What one connection round did.
struct Round {
    /// Every service connected.
    connected: bool,
    /// Connected and every call succeeded.
    ok: bool,
    /// The first failed call: its tool's server-side name and arguments.
    failed_call: Option<(String, Value)>,
}

/// Reports the services' status and calls every tool.
async fn exercise(airlock: &Airlock) -> Round {
    let mut round = Round {
        connected: true,
        ok: true,
        failed_call: None,
    };
    for report in airlock.services().status() {
        println!("{}", serde_json::to_string(&report).unwrap_or_default());
        let connected = matches!(report.status, ServiceStatus::Connected { .. });
        round.connected &= connected;
        round.ok &= connected;
    }
    for tool in airlock.catalog().tools() {
        let args = arguments(&tool.input_schema);
        match airlock.calls().call(&tool.name, args.clone(), None).await {
            Ok(out) => println!("{}: {}", tool.raw_name, out.preview),
            Err(e) => {
                println!("{}: {e}", tool.raw_name);
                round.ok = false;
                if round.failed_call.is_none() {
                    round.failed_call = Some((tool.raw_name.clone(), args));
                }
            }
        }
    }
    round
}

/// POSTs one JSON-RPC request straight to the server (with the bearer token if any) and
/// returns its `WWW-Authenticate` challenge when it answers 401 or 403 (an empty string
/// when the header is missing); `None` for any other answer.
async fn challenge(
    http: &reqwest::Client,
    url: &str,
    token: Option<&str>,
    body: &Value,
) -> Option<String> {
    let mut request = http
        .post(url)
        .header(
            reqwest::header::ACCEPT,
            "application/json, text/event-stream",
        )
        .json(body);
    if let Some(token) = token {
        let (name, value) = oauth::authorization_header(token);
        request = request.header(name, value);
    }
    let response = match request.send().await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("probe request failed: {e}");
            return None;
        }
    };
    eprintln!("probe answered {}", response.status());
    if !matches!(response.status().as_u16(), 401 | 403) {
        return None;
    }
    Some(
        response
            .headers()
            .get(reqwest::header::WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string(),
    )
}

/// The non-interactive "browser": GETs the authorization URL without following the
/// redirect, then GETs the `Location` it names (the flow's loopback listener). Errors
/// never carry either URL.
async fn visit(http: &reqwest::Client, auth_url: &str) -> Result<(), String> {
    let response = http
        .get(auth_url)
        .send()
        .await
        .map_err(|_| "the authorization request failed".to_string())?;
    let location = response
        .headers()
        .get(reqwest::header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| {
            format!(
                "the authorization endpoint answered {} without a redirect",
                response.status()
            )
        })?;
    let target = reqwest::Url::parse(auth_url)
        .and_then(|base| base.join(location))
        .map_err(|_| "the redirect is not a valid URL".to_string())?;
    http.get(target)
        .send()
        .await
        .map_err(|_| "the callback request failed".to_string())?;
    Ok(())
}

/// Runs the OAuth flow for `url` (seeded with `challenge`) and returns the new token.
async fn authorize(
    store: &SecretStore,
    http: &reqwest::Client,
    url: &str,
    challenge: &str,
    client: &OAuthClient,
) -> Result<String, oauth::OAuthError> {
    let browser = {
        let http = http.clone();
        move |auth_url: &str| -> std::io::Result<()> {
            let http = http.clone();
            let auth_url = auth_url.to_string();
            tokio::spawn(async move {
                if let Err(e) = visit(&http, &auth_url).await {
                    eprintln!("browser: {e}");
                }
            });
            Ok(())
        }
    };
    let challenge = Some(challenge).filter(|c| !c.is_empty());
    oauth::authorize_with_challenge(
        store,
        SERVICE,
        url,
        challenge,
        client,
        &browser,
        BROWSER_WAIT,
    )
    .await?;
    oauth::access_token(store, SERVICE, url).await
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("info"))
        .with_writer(std::io::stderr)
        .init();
    let Some(url) = std::env::args().nth(1) else {
        eprintln!("usage: conformance_client URL");
        return ExitCode::from(2);
    };
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    eprintln!("scenario {scenario:?} against {url}");

    let scratch = std::env::temp_dir().join(format!("airlock-conformance-{}", std::process::id()));
    let code = run(&url, &scratch, &scenario).await;
    let _ = std::fs::remove_dir_all(&scratch);
    code
}

/// Connects, exercises the tools, and authorizes (then reconnects) when the server asks
/// for it.
async fn run(url: &str, scratch: &Path, scenario: &str) -> ExitCode {
    let (machine, client) = auth_mode(scenario);
    // Redirects are never followed: the "browser" reads `Location` itself.
    let http = match reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(10))
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("http client: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut store: Option<SecretStore> = None;
    let mut token: Option<String> = None;
    let mut rounds = 0;
    for attempt in 1.. {
        let authorization = token.as_deref().map(|t| oauth::authorization_header(t).1);
        let config = match config(url, authorization.as_deref(), machine.as_ref()) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::FAILURE;
            }
        };
        // A fresh data directory per attempt: nothing cached from an unauthorized one.
        let data = scratch.join(format!("data-{attempt}"));
        let airlock = match Airlock::start(config, AirlockOptions::new(&data)).await {
            Ok(a) => a,
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::FAILURE;
            }
        };
        let round = exercise(&airlock).await;
        airlock.close().await;
        if round.ok {
            return ExitCode::SUCCESS;
        }
        if machine.is_some() {
            // Client credentials and assertions are Airlock's own business: no browser
            // round to try.
            return ExitCode::FAILURE;
        }

        // Would authorization help? Probe with the request that failed: the tool list
        // when the service did not come up; once authorized, the failed call (never
        // replayed against a server that has not asked for authorization).
        // Probes: the handshake, then the tool list (a server may let the handshake
        // through and guard only the requests after it).
        let probes: Vec<Value> = if !round.connected {
            vec![
                json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "airlock-conformance-probe", "version": "0"}
                }}),
                json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}),
            ]
        } else {
            match (&round.failed_call, &token) {
                (Some((name, args)), Some(_)) => vec![json!({
                    "jsonrpc": "2.0", "id": 1, "method": "tools/call",
                    "params": {"name": name, "arguments": args}
                })],
                _ => Vec::new(),
            }
        };
        if probes.is_empty() {
            return ExitCode::FAILURE;
        }
        if rounds >= MAX_AUTH_ROUNDS {
            eprintln!("giving up after {rounds} authorization rounds");
            return ExitCode::FAILURE;
        }
        let mut asked = None;
        for probe in &probes {
            asked = challenge(&http, url, token.as_deref(), probe).await;
            if asked.is_some() {
                break;
            }
        }
        let Some(challenge) = asked else {
            eprintln!("the server did not ask for authorization; giving up");
            return ExitCode::FAILURE;
        };
        rounds += 1;
        eprintln!("the server asks for authorization (round {rounds})");
        if store.is_none() {
            match SecretStore::open_file(&scratch.join("secrets")) {
                Ok(s) => store = Some(s),
                Err(e) => {
                    eprintln!("{e}");
                    return ExitCode::FAILURE;
                }
            }
        }
        let Some(store) = store.as_ref() else {
            return ExitCode::FAILURE;
        };
        match authorize(store, &http, url, &challenge, &client).await {
            Ok(t) => token = Some(t),
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::FAILURE
}
