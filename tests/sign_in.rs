//! Agents sign in to a service they must authorize themselves (`per_agent = true`)
//! through `airlock serve --http` itself, against a real authorization server on
//! loopback (tests/peers/python/oauth_server.py, which approves without a login page):
//!
//! - before anyone has signed in, the service's tools are unknown: `airlock_status`
//!   names the agent's sign-in link, and once its browser is back the tools are named;
//! - a client that answers URL questions (handshake-era, or 2026-07-28 through
//!   `input_required`) is asked to open the sign-in page; once its "browser" has been
//!   there and come back to the gateway's `/oauth/callback`, the very call that asked
//!   goes on, with the agent's own token;
//! - a client that does not gets an error naming the link; after opening it, its next
//!   call goes through with its own token, never another agent's; the link works once;
//! - a client that declines is refused, and nothing is stored for it.

mod support;

use std::sync::{Arc, Mutex};

use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationCapability, Implementation, ProtocolVersion, UrlElicitationCapability,
};
use rmcp::service::{RequestContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ErrorData as McpError, RoleClient, ServiceExt};
use support::{HttpGateway, Workspace, call, start_oauth_server, text_of, toml_str};

/// A client whose user opens the URLs it is shown (with a plain HTTP client that follows
/// redirects, as a browser would), or declines.
#[derive(Clone)]
struct Browsing {
    opens: bool,
    protocol: ProtocolVersion,
    /// What it was asked: (message, url, the page the URL ended on).
    asked: Arc<Mutex<Vec<(String, String, String)>>>,
}

impl Browsing {
    /// A handshake-era (2025-11-25) client, asked with `elicitation/create`.
    fn new(opens: bool) -> Self {
        Browsing {
            opens,
            protocol: ProtocolVersion::V_2025_11_25,
            asked: Arc::default(),
        }
    }

    /// A 2026-07-28 client, asked with `input_required` (and answering on its retry).
    fn stateless(opens: bool) -> Self {
        Browsing {
            protocol: ProtocolVersion::V_2026_07_28,
            ..Browsing::new(opens)
        }
    }
}

#[allow(deprecated)]
impl ClientHandler for Browsing {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation =
            Some(ElicitationCapability::new().with_url(UrlElicitationCapability::default()));
        ClientConfig::new(capabilities, Implementation::new("browsing-client", "1.0"))
            .with_protocol_version(self.protocol.clone())
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, McpError> {
        let ElicitRequestParams::UrlElicitationParams { message, url, .. } = request else {
            return Err(McpError::invalid_params("only URL questions here", None));
        };
        if !self.opens {
            self.asked
                .lock()
                .unwrap()
                .push((message, url, String::new()));
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        }
        let page = open(&url).await;
        self.asked.lock().unwrap().push((message, url, page));
        Ok(ElicitResult::new(ElicitationAction::Accept))
    }
}

/// Opens `url` as a browser would (following redirects): the final page's status and
/// text.
async fn open(url: &str) -> String {
    let response = reqwest::get(url).await.expect("the page opens");
    let status = response.status().as_u16();
    format!("{status} {}", response.text().await.unwrap_or_default())
}

/// What `session`'s call of the service's `client` tool (naming the OAuth client its
/// token was issued to) answered, or its error.
async fn whose<H: ClientHandler>(session: &RunningService<RoleClient, H>) -> String {
    match session
        .call_tool(call("mcp__secure__client", serde_json::json!({})))
        .await
    {
        Ok(result) => text_of(&result),
        Err(e) => e.to_string(),
    }
}

/// Waits (up to 20 s) until `session` lists the service's tools: they are named once a
/// browser has come back.
async fn tools_named<H: ClientHandler>(session: &RunningService<RoleClient, H>) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !session
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .any(|t| t.name == "mcp__secure__client")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the tools were never named"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// What `airlock_status` tells `session`.
async fn status_of<H: ClientHandler>(session: &RunningService<RoleClient, H>) -> String {
    let status = session
        .call_tool(call("airlock_status", serde_json::json!({})))
        .await
        .unwrap();
    text_of(&status)
}

/// The first `http://…` link in `text`.
fn link_in(text: &str) -> String {
    let start = text.find("http://").expect("a link in the error");
    text[start..].split_whitespace().next().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_sign_in_to_a_per_agent_service_through_the_gateway() {
    let server = start_oauth_server(3600, &[]);
    let ws = Workspace::new(&format!(
        "[mcp_servers.secure]\ntype = \"http\"\nurl = {}\nauth = {{ type = \"oauth\", per_agent = true }}\n",
        toml_str(&server.url)
    ));
    let token = |agent: &str| {
        let (made, out) = ws.json(&["--agent", agent, "serve", "tokens", "add"], &[]);
        assert!(out.status.success(), "{made}");
        made["token"].as_str().unwrap().to_string()
    };
    let (alice, bob, carol, dave) = (token("alice"), token("bob"), token("carol"), token("dave"));
    let erin = token("erin");
    let gateway = HttpGateway::start(&ws, &["--require-token"]);
    let transport = |token: &str| {
        StreamableHttpClientTransport::from_config(
            StreamableHttpClientTransportConfig::with_uri(gateway.url.clone())
                .auth_header(token.to_string()),
        )
    };

    // Nobody has signed in, so the service's tools are not known yet: airlock_status
    // names the link for Alice, and once her browser has come back, its tools are named
    // through her session.
    let on_alice = ().serve(transport(&alice)).await.unwrap();
    let tools = on_alice.list_all_tools().await.unwrap();
    assert!(!tools.iter().any(|t| t.name.starts_with("mcp__secure__")));
    let status = status_of(&on_alice).await;
    assert!(
        status.contains("secure: ")
            && status.contains("sign in to use it (as agent \"alice\"): open http://"),
        "{status}"
    );
    let link = link_in(&status);
    assert!(
        link.starts_with(&server.url.replace("/mcp", ""))
            && link.contains("code_challenge_method=S256")
            && link.contains("oauth%2Fcallback"),
        "{link}"
    );
    let page = open(&link).await;
    assert!(
        page.starts_with("200 ") && page.contains("signed in"),
        "{page}"
    );
    tools_named(&on_alice).await;
    let alices_client = whose(&on_alice).await;
    assert!(alices_client.starts_with("client: "), "{alices_client}");
    let status = status_of(&on_alice).await;
    assert!(!status.contains("sign in"), "{status}");

    // Bob's client answers URL questions: his first call asks him to sign in and, once
    // his browser has come back to the gateway, goes on with his own token.
    let browsing = Browsing::new(true);
    let on_bob = browsing.clone().serve(transport(&bob)).await.unwrap();
    let bobs_client = whose(&on_bob).await;
    assert!(bobs_client.starts_with("client: "), "{bobs_client}");
    assert_ne!(
        bobs_client, alices_client,
        "each agent calls with its own token"
    );
    let asked = browsing.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "{asked:?}");
    let (message, url, page) = &asked[0];
    assert!(
        message.contains("\"secure\"") && message.contains("agent \"bob\""),
        "{message}"
    );
    assert!(url.contains("code_challenge_method=S256"), "{url}");
    assert!(
        page.starts_with("200 ") && page.contains("signed in"),
        "{page}"
    );
    // Signed in, he is not asked again.
    assert_eq!(whose(&on_bob).await, bobs_client);
    assert_eq!(browsing.asked.lock().unwrap().len(), 1);

    // So does Erin's, a 2026-07-28 client: she is asked through `input_required`, and
    // her call goes on when her client sends it again with the answer.
    let browsing = Browsing::stateless(true);
    let on_erin = browsing.clone().serve(transport(&erin)).await.unwrap();
    let erins_client = whose(&on_erin).await;
    assert!(erins_client.starts_with("client: "), "{erins_client}");
    assert!(erins_client != alices_client && erins_client != bobs_client);
    let asked = browsing.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(asked[0].0.contains("agent \"erin\""), "{asked:?}");
    assert!(asked[0].2.starts_with("200 "), "{asked:?}");

    // Carol's client does not answer URL questions: her error names the link to open.
    let on_carol = ().serve(transport(&carol)).await.unwrap();
    let refused = whose(&on_carol).await;
    assert!(
        refused.contains("agent \"carol\" has not authorized it")
            && refused.contains("run `airlock --agent carol servers auth secure`; or open http://")
            && refused.contains("for agent \"carol\" only"),
        "{refused}"
    );
    let link = link_in(&refused);
    // Until she opens it, calling again names the same link (no new client per retry).
    assert_eq!(link_in(&whose(&on_carol).await), link);
    let page = open(&link).await;
    assert!(
        page.starts_with("200 ") && page.contains("signed in"),
        "{page}"
    );
    let carols_client = whose(&on_carol).await;
    assert!(carols_client.starts_with("client: "), "{carols_client}");
    assert!(carols_client != alices_client && carols_client != bobs_client);
    // The link worked once.
    let again = open(&link).await;
    assert!(
        again.starts_with("400 ") && again.contains("no authorization waits"),
        "{again}"
    );

    // Dave declines: he is refused, and still has no token.
    let declining = Browsing::new(false);
    let on_dave = declining.clone().serve(transport(&dave)).await.unwrap();
    let declined = whose(&on_dave).await;
    assert!(
        declined.contains("agent \"dave\" declined to sign in"),
        "{declined}"
    );
    assert_eq!(declining.asked.lock().unwrap().len(), 1);
    assert_eq!(whose(&on_alice).await, alices_client);

    // Each agent's tokens are its own: logging Bob out leaves Alice signed in.
    let out = ws.run(
        &["--json", "--agent", "bob", "servers", "logout", "secure"],
        &[],
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("\"forgot_tokens\":true"),
        "{out:?}"
    );
    // The gateway's log names no link, state or code.
    let log = gateway.stderr_lines().join("\n");
    assert!(!log.contains(&link) && !log.contains("state="), "{log}");
    for session in [on_alice, on_carol] {
        session.cancel().await.unwrap();
    }
    on_erin.cancel().await.unwrap();
    for session in [on_bob, on_dave] {
        session.cancel().await.unwrap();
    }
}

/// `airlock serve` over stdio runs on its user's machine: the sign-in comes back to a
/// one-shot loopback listener, and the agent's tools are named once it has.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_stdio_the_sign_in_comes_back_to_a_loopback_listener() {
    let server = start_oauth_server(3600, &[]);
    let ws = Workspace::new(&format!(
        "[mcp_servers.secure]\ntype = \"http\"\nurl = {}\nauth = {{ type = \"oauth\", per_agent = true }}\n",
        toml_str(&server.url)
    ));
    let mut child = support::stdio_gateway(&ws, &["serve"]);
    let (stdout, stdin) = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
    let client = ().serve((stdout, stdin)).await.unwrap();
    let status = status_of(&client).await;
    let link = link_in(&status);
    assert!(
        link.contains("redirect_uri=http%3A%2F%2F127.0.0.1%3A") && link.contains("%2Fcallback"),
        "{status}"
    );
    let page = open(&link).await;
    assert!(page.starts_with("200 "), "{page}");
    tools_named(&client).await;
    let whose = whose(&client).await;
    assert!(whose.starts_with("client: "), "{whose}");
    client.cancel().await.unwrap();
    drop(child);
}

/// Two replicas sharing a PostgreSQL registry with a `token_key`: an agent's sign-in
/// started through one may come back to the other (here every browser is sent to
/// replica B), and its tokens then serve it through either. The registry holds them
/// sealed only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_in_started_on_one_replica_may_finish_on_another() {
    let server = start_oauth_server(3600, &[]);
    let (postgres, _, _) = support::storage_services();
    let tag = support::storage_tag();
    let key = "5e".repeat(32);
    let config = format!(
        "[mcp_servers.secure]\ntype = \"http\"\nurl = {}\nauth = {{ type = \"oauth\", per_agent = true }}\n",
        toml_str(&server.url)
    );
    let registry = format!(
        "[registry]\nurl = {}\nschema = {}\ntoken_key = \"${{AIRLOCK_TEST_TOKEN_KEY}}\"\n",
        toml_str(&postgres),
        toml_str(&tag)
    );
    let envs = [("AIRLOCK_TEST_TOKEN_KEY", key.as_str())];
    let (ws_a, ws_b) = (
        Workspace::with_storage(&config, &registry),
        Workspace::with_storage(&config, &registry),
    );
    let token = |agent: &str| {
        let (made, out) = ws_a.json(&["--agent", agent, "serve", "tokens", "add"], &envs);
        assert!(out.status.success(), "{made}");
        made["token"].as_str().unwrap().to_string()
    };
    let (alice, bob) = (token("alice"), token("bob"));
    let port_b = support::free_port();
    let b_url = format!("http://127.0.0.1:{port_b}");
    let a = HttpGateway::start_with_env(&ws_a, &["--require-token", "--public-url", &b_url], &envs);
    let b = HttpGateway::start_on(
        &ws_b,
        &format!("127.0.0.1:{port_b}"),
        &["--require-token"],
        &envs,
    );
    let transport = |gateway: &HttpGateway, token: &str| {
        StreamableHttpClientTransport::from_config(
            StreamableHttpClientTransportConfig::with_uri(gateway.url.clone())
                .auth_header(token.to_string()),
        )
    };

    // Alice asks replica A; her browser comes back to replica B, which finishes the
    // flow A started; A names the tools through her session.
    let alice_on_a = ().serve(transport(&a, &alice)).await.unwrap();
    let status = status_of(&alice_on_a).await;
    let link = link_in(&status);
    assert!(
        link.contains(&format!("127.0.0.1%3A{port_b}%2Foauth%2Fcallback")),
        "{link}"
    );
    let page = open(&link).await;
    assert!(
        page.starts_with("200 ") && page.contains("signed in"),
        "{page}"
    );
    tools_named(&alice_on_a).await;
    let alices_client = whose(&alice_on_a).await;
    assert!(alices_client.starts_with("client: "), "{alices_client}");
    // Her tokens serve her through B too.
    let alice_on_b = ().serve(transport(&b, &alice)).await.unwrap();
    tools_named(&alice_on_b).await;
    assert_eq!(whose(&alice_on_b).await, alices_client);

    // Bob's call through A asks him; his browser comes back to B, and the call waiting
    // on A goes on.
    let browsing = Browsing::new(true);
    let bob_on_a = browsing.clone().serve(transport(&a, &bob)).await.unwrap();
    let bobs_client = whose(&bob_on_a).await;
    assert!(bobs_client.starts_with("client: "), "{bobs_client}");
    assert_ne!(bobs_client, alices_client);
    assert_eq!(browsing.asked.lock().unwrap().len(), 1);

    // The registry holds both agents' tokens, sealed: no token, client or URL in it.
    let schema = tag.clone();
    let rows = std::thread::spawn(move || {
        support::with_postgres(&postgres, async |db| {
            db.query(
                &format!("SELECT name, sealed FROM \"{schema}\".shared_secrets ORDER BY name"),
                &[],
            )
            .await
            .unwrap()
            .iter()
            .map(|row| (row.get::<_, String>(0), row.get::<_, String>(1)))
            .collect::<Vec<_>>()
        })
    })
    .join()
    .unwrap();
    let names: Vec<&str> = rows.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        names
            .iter()
            .filter(|n| n.starts_with("oauth:secure.agent-"))
            .count(),
        2,
        "{names:?}"
    );
    for (name, sealed) in &rows {
        assert!(
            sealed.starts_with("v1.") && !sealed.contains("client-") && !sealed.contains("http"),
            "{name}: {sealed}"
        );
    }
    for session in [alice_on_a, alice_on_b] {
        session.cancel().await.unwrap();
    }
    bob_on_a.cancel().await.unwrap();
    drop((a, b));
}
