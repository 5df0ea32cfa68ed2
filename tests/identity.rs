//! `[serve.auth]`: `airlock serve --http` as an OAuth-protected MCP server in front of a
//! real OpenID provider on loopback (the npm `oidc-provider`, tests/peers/idp). The
//! official Python SDK client signs in by itself from the 401's resource metadata; tokens
//! the gateway must not accept are refused with the right status and error, and never
//! logged; two users' group claims decide which services each sees and calls. Upstream,
//! each user is seen as themselves: a token-exchange service gets a token exchanged for
//! the caller's, and a per-agent OAuth service each agent's own authorization.

mod support;

use rmcp::ServiceExt;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use support::{
    BearerServer, HttpGateway, Idp, Workspace, browser_script, call, demo_entry, free_port, now,
    python, python_server, sha256_hex, start_oauth_server, text_of, toml_str,
};

/// What a command printed, stdout then stderr.
fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A gateway in grants mode behind `[serve.auth]`, with two demo services, `engdocs`
/// (granted to group `eng`) and `opsdocs` (granted to group `ops`), and its provider.
fn protected_gateway(envs: &[(&str, &str)]) -> (Workspace, Idp, HttpGateway) {
    protected_gateway_with(envs, &[], |_| String::new())
}

/// [`protected_gateway`] with the config `more` writes given the provider's issuer (more
/// services), whose tokens `gateway-app` may exchange for `exchange_audiences`.
fn protected_gateway_with(
    envs: &[(&str, &str)],
    exchange_audiences: &[&str],
    more: impl Fn(&str) -> String,
) -> (Workspace, Idp, HttpGateway) {
    let addr = format!("127.0.0.1:{}", free_port());
    let audience = format!("http://{addr}/mcp");
    let idp = Idp::start(&audience, exchange_audiences);
    let ws = Workspace::new(&format!(
        "{}{}{}[serve.auth]\nissuer = {}\naudience = {}\nrequired_scopes = [\"mcp:tools\"]\ngroups = {{ eng = [\"engdocs\", \"upstream\"], ops = [\"opsdocs\", \"upstream\"] }}\n",
        demo_entry("engdocs", ""),
        demo_entry("opsdocs", ""),
        more(&idp.issuer),
        toml_str(&idp.issuer),
        toml_str(&audience),
    ));
    let gateway = HttpGateway::start_on(&ws, &addr, &["--access", "grants"], envs);
    assert_eq!(gateway.url, audience);
    (ws, idp, gateway)
}

/// A fresh `initialize` POST to the gateway with `token` (or none): status, the
/// `WWW-Authenticate` header and the body.
async fn initialize(url: &str, token: Option<&str>) -> (u16, String, String) {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("Accept", "application/json, text/event-stream")
        .json(&json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "tests", "version": "1"}},
        }));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let challenge = response
        .headers()
        .get("www-authenticate")
        .map(|h| h.to_str().unwrap().to_string())
        .unwrap_or_default();
    (status, challenge, response.text().await.unwrap())
}

async fn client(url: &str, token: &str) -> RunningService<RoleClient, ()> {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.to_string()).auth_header(token),
    );
    ().serve(transport)
        .await
        .expect("the gateway accepts the client")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unauthenticated_python_sdk_client_signs_in_through_the_identity_provider() {
    let (_ws, idp, gateway) = protected_gateway(&[]);
    let (status, challenge, _) = initialize(&gateway.url, None).await;
    assert_eq!(status, 401);
    let metadata_url = gateway
        .url
        .replace("/mcp", "/.well-known/oauth-protected-resource/mcp");
    assert!(
        challenge.contains(&format!("resource_metadata=\"{metadata_url}\"")),
        "{challenge}"
    );
    let metadata: Value = reqwest::get(&metadata_url)
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(metadata["resource"], gateway.url);
    assert_eq!(metadata["authorization_servers"], json!([idp.issuer]));
    assert_eq!(metadata["scopes_supported"], json!(["mcp:tools"]));

    // The official client, given only the gateway's URL and its client credentials.
    let out = tokio::process::Command::new(python())
        .arg(python_server("idp_client.py"))
        .args([
            &gateway.url,
            &idp.issuer,
            "alice-app",
            "alice-secret",
            "mcp:tools",
            "mcp__engdocs__echo",
            r#"{"text": "signed in"}"#,
        ])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["first_status"], 401, "{report}");
    assert_eq!(report["signed_in"], true, "{report}");
    assert_eq!(report["text"], "signed in", "{report}");
    assert_eq!(report["is_error"], false, "{report}");
    let tools = report["tools"].as_array().unwrap();
    assert!(tools.contains(&json!("mcp__engdocs__echo")), "{report}");
    assert!(
        !tools
            .iter()
            .any(|t| t.as_str().unwrap().contains("opsdocs")),
        "group eng is granted engdocs only: {report}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_the_gateway_must_not_accept_are_refused_and_never_logged() {
    let (ws, idp, gateway) = protected_gateway(&[("AIRLOCK_LOG", "debug")]);
    let (made, out) = ws.json(&["--agent", "machine", "serve", "tokens", "add"], &[]);
    assert!(out.status.success(), "{made}");
    let own = made["token"].as_str().unwrap().to_string();
    let good = |changes: Value| {
        let mut claims = json!({
            "iss": idp.issuer, "aud": gateway.url, "sub": "alice-app",
            "exp": now() + 300, "iat": now(), "scope": "mcp:tools", "groups": ["eng"],
        });
        claims
            .as_object_mut()
            .unwrap()
            .extend(changes.as_object().unwrap().clone());
        claims
    };
    let refused = [
        (
            idp.mint(good(json!({"aud": "http://127.0.0.1:1/other"}))),
            401,
            "another audience",
        ),
        (idp.mint(good(json!({"exp": now() - 600}))), 401, "expired"),
        (
            idp.mint(good(json!({"nbf": now() + 600}))),
            401,
            "not valid yet",
        ),
        (
            idp.mint(good(json!({"iss": "http://127.0.0.1:1"}))),
            401,
            "another issuer",
        ),
        (
            idp.mint_with_unknown_key("rotated-away", good(json!({}))),
            401,
            "does not publish",
        ),
        (
            idp.mint_with_unknown_key("idp-key-1", good(json!({}))),
            401,
            "signature does not verify",
        ),
        (
            idp.mint(good(json!({"scope": "openid"}))),
            403,
            "insufficient_scope",
        ),
        (
            "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln".to_string(),
            401,
            "Unauthorized: the token's signature does not verify",
        ),
        // Algorithm confusion: unsigned, symmetric (with the provider's key id), and an
        // algorithm that is not the key's.
        (
            unsigned(&good(json!({}))),
            401,
            "the token is not a readable JWT",
        ),
        (
            hs256(&good(json!({}))),
            401,
            "tokens signed with HS256 are not accepted",
        ),
        (
            forged_as("ES256", &good(json!({}))),
            401,
            "the token's algorithm ES256 is not its key's",
        ),
        // A provider's user may not act as an agent of Airlock's own tokens.
        (
            idp.mint(good(json!({"sub": "default"}))),
            401,
            "the token names agent \\\"default\\\", which acts with Airlock's own tokens",
        ),
        ("not-a-token-of-anyone".to_string(), 401, "not valid"),
    ];
    for (token, status, says) in &refused {
        let (got, challenge, body) = initialize(&gateway.url, Some(token)).await;
        assert_eq!(got, *status, "{says}: {body}");
        assert!(body.contains(says), "{says}: {body}");
        assert!(challenge.contains("resource_metadata="), "{challenge}");
        let error = if *status == 403 {
            "insufficient_scope"
        } else {
            "invalid_token"
        };
        if *says != "not valid" {
            assert!(
                challenge.contains(&format!("error=\"{error}\"")),
                "{challenge}"
            );
        }
    }
    // The same claims, well formed, are accepted; so is one of Airlock's own tokens.
    let accepted = idp.mint(good(json!({})));
    let (status, _, body) = initialize(&gateway.url, Some(&accepted)).await;
    assert_eq!(status, 200, "{body}");
    let (status, _, body) = initialize(&gateway.url, Some(&own)).await;
    assert_eq!(status, 200, "{body}");

    let log = gateway.stderr_lines().join("\n");
    assert!(log.contains("refused an access token"), "{log}");
    for (token, _, _) in &refused {
        // The whole token, and its signature alone (an unsigned token has none).
        let signature = token.rsplit('.').next().unwrap();
        assert!(!log.contains(token.as_str()), "a token reached the log");
        assert!(
            signature.is_empty() || !log.contains(signature),
            "a token's signature reached the log"
        );
    }
    assert!(!log.contains(&own), "an own token reached the log");
    // An agent with one of Airlock's own tokens is refused as a provider's user too.
    let (status, _, body) = initialize(
        &gateway.url,
        Some(&idp.mint(good(json!({"sub": "machine"})))),
    )
    .await;
    assert_eq!(status, 401, "{body}");
    assert!(
        body.contains("names agent \\\"machine\\\", which acts with Airlock's own tokens"),
        "{body}"
    );
    let signature = accepted.rsplit('.').next().unwrap();
    assert!(
        !log.contains(signature),
        "an accepted token reached the log"
    );
    // Nor does any token reach the registry.
    let registry: String = std::fs::read_dir(ws.data())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            path.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("registry.db")
        })
        .map(|path| String::from_utf8_lossy(&std::fs::read(path).unwrap()).into_owned())
        .collect();
    assert!(
        registry.contains("machine"),
        "the registry's files were read"
    );
    for (token, _, _) in refused.iter().chain([&(accepted.clone(), 0, "")]) {
        let signature = token.rsplit('.').next().unwrap();
        if signature.is_empty() {
            continue;
        }
        assert!(
            !registry.contains(signature),
            "a token reached the registry"
        );
    }
}

/// Opaque access tokens are asked about at the provider (RFC 7662) as the configured
/// client; its answer names the agent and groups as a JWT's claims do, and a token it
/// does not know (or revoked) is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opaque_tokens_are_checked_by_introspection() {
    let addr = format!("127.0.0.1:{}", free_port());
    let audience = format!("http://{addr}/mcp");
    let idp = Idp::start_opaque(&audience);
    let ws = Workspace::new(&format!(
        "{}{}[serve.auth]\nissuer = {}\naudience = {}\nrequired_scopes = [\"mcp:tools\"]\ngroups = {{ eng = [\"engdocs\"], ops = [\"opsdocs\"] }}\nintrospection = {{ client_id = \"gateway-app\", client_secret = \"gateway-secret\" }}\n",
        demo_entry("engdocs", ""),
        demo_entry("opsdocs", ""),
        toml_str(&idp.issuer),
        toml_str(&audience),
    ));
    let gateway = HttpGateway::start_on(&ws, &addr, &["--access", "grants"], &[]);
    let alice = idp.token("alice-app", "alice-secret", &gateway.url).await;
    assert!(!alice.contains('.'), "an opaque token: {alice}");
    let session = client(&gateway.url, &alice).await;
    let names: Vec<String> = session
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert!(
        names.contains(&"mcp__engdocs__echo".to_string()),
        "{names:?}"
    );
    assert!(!names.iter().any(|n| n.contains("opsdocs")), "{names:?}");
    let ok = session
        .call_tool(call("mcp__engdocs__echo", json!({"text": "opaque"})))
        .await
        .unwrap();
    assert_eq!(text_of(&ok), "opaque");
    session.cancel().await.unwrap();
    let (status, challenge, body) = initialize(&gateway.url, Some("not-issued-by-anyone")).await;
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("not active"), "{body}");
    assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_claims_decide_which_services_each_user_sees_and_calls() {
    let (_ws, idp, gateway) = protected_gateway(&[]);
    let alice = idp.token("alice-app", "alice-secret", &gateway.url).await;
    let bob = idp.token("bob-app", "bob-secret", &gateway.url).await;
    for (agent, token, mine, theirs) in [
        ("alice-app", &alice, "engdocs", "opsdocs"),
        ("bob-app", &bob, "opsdocs", "engdocs"),
    ] {
        let session = client(&gateway.url, token).await;
        let tools = session.list_all_tools().await.unwrap();
        let names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
        assert!(names.contains(&format!("mcp__{mine}__echo")), "{names:?}");
        assert!(!names.iter().any(|n| n.contains(theirs)), "{names:?}");
        let ok = session
            .call_tool(call(&format!("mcp__{mine}__echo"), json!({"text": mine})))
            .await
            .unwrap();
        assert_eq!(text_of(&ok), mine);
        let refused = session
            .call_tool(call(&format!("mcp__{theirs}__echo"), json!({"text": "x"})))
            .await;
        let said = match refused {
            Ok(result) => text_of(&result),
            Err(e) => e.to_string(),
        };
        assert_eq!(
            said,
            format!(
                "service_access_denied: agent \"{agent}\" has no grant for service \"{theirs}\""
            ),
            "the agent is the token's subject; its groups grant {mine} only"
        );
        session.cancel().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_exchange_upstream_sees_each_calling_user_never_their_gateway_token() {
    let upstream = BearerServer::start();
    let (ws, idp, gateway) = protected_gateway_with(&[], &[&upstream.url], |issuer| {
        format!(
            "[mcp_servers.upstream]\ntype = \"http\"\nurl = {}\nauth = {{ type = \"token_exchange\", token_endpoint = {}, client_id = \"gateway-app\", client_secret = \"gateway-secret\" }}\n",
            toml_str(&upstream.url),
            toml_str(format!("{issuer}/token")),
        )
    });
    let alice = idp.token("alice-app", "alice-secret", &gateway.url).await;
    let bob = idp.token("bob-app", "bob-secret", &gateway.url).await;
    for (agent, token) in [("alice-app", &alice), ("bob-app", &bob)] {
        let session = client(&gateway.url, token).await;
        // Its tools are listed through the first signed-in user's own session.
        let tools = session.list_all_tools().await.unwrap();
        assert!(
            tools.iter().any(|t| t.name == "mcp__upstream__whoami"),
            "{tools:?}"
        );
        for _ in 0..2 {
            let result = session
                .call_tool(call("mcp__upstream__whoami", json!({})))
                .await
                .unwrap();
            let text = text_of(&result);
            let seen: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("{text}"));
            assert_eq!(seen["sub"], agent, "the upstream sees the calling user");
            assert_eq!(seen["aud"], upstream.url.as_str(), "{seen}");
            assert_eq!(seen["act"]["sub"], "gateway-app", "{seen}");
        }
        session.cancel().await.unwrap();
    }
    let exchanges: Value = reqwest::get(format!("{}/test/exchanges", idp.issuer))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        exchanges["count"], 2,
        "one exchange per user, kept for their calls"
    );
    let carried = upstream.token_digests();
    assert_eq!(carried.len(), 4, "{carried:?}");
    for own in [&alice, &bob] {
        assert!(
            !carried.contains(&sha256_hex(own)),
            "a user's gateway token reached the upstream"
        );
    }

    // An agent that presented no identity-provider token (one of Airlock's own) gets a
    // clear error, never another user's exchanged token.
    let (made, out) = ws.json(&["--agent", "machine", "serve", "tokens", "add"], &[]);
    assert!(out.status.success(), "{made}");
    let machine = client(&gateway.url, made["token"].as_str().unwrap()).await;
    let out = ws.run(&["--agent", "machine", "grants", "add", "upstream"], &[]);
    assert!(out.status.success(), "{}", support::failed(&out));
    let refused = machine
        .call_tool(call("mcp__upstream__whoami", json!({})))
        .await;
    let said = match refused {
        Ok(result) => text_of(&result),
        Err(e) => e.to_string(),
    };
    assert!(said.contains("presented none"), "{said}");
    assert_eq!(
        upstream.token_digests().len(),
        4,
        "no call reached the upstream"
    );
}

/// A service each agent authorizes itself (`per_agent = true`), through the HTTP
/// gateway: an agent's calls carry its own tokens (the server names the client each
/// token was issued to: every agent's flow registers a client of its own), an agent
/// that has not authorized gets an error naming the command to run, never another
/// agent's token, and its refusal does not make the service fail for the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_agent_service_is_called_with_each_agents_own_tokens_never_anothers() {
    let server = start_oauth_server(3600, &[]);
    let ws = Workspace::new(&format!(
        "[mcp_servers.secure]\ntype = \"http\"\nurl = {}\nauth = {{ type = \"oauth\", per_agent = true }}\n",
        toml_str(&server.url)
    ));
    let browser = browser_script(ws.dir.path());
    let authorize = |agent: &str| {
        let out = ws.run(
            &[
                "--agent", agent, "servers", "auth", "secure", "--wait", "60",
            ],
            &[("AIRLOCK_BROWSER", &browser)],
        );
        assert!(out.status.success(), "{}", text(&out));
        assert!(
            text(&out).contains(&format!("for agent \"{agent}\"")),
            "{}",
            text(&out)
        );
    };
    let token = |agent: &str| {
        let (made, out) = ws.json(&["--agent", agent, "serve", "tokens", "add"], &[]);
        assert!(out.status.success(), "{made}");
        made["token"].as_str().unwrap().to_string()
    };
    authorize("alice");
    let (alice, bob) = (token("alice"), token("bob"));
    let gateway = HttpGateway::start(&ws, &["--require-token"]);
    let connect = |token: String| {
        let url = gateway.url.clone();
        async move {
            let transport = StreamableHttpClientTransport::from_config(
                StreamableHttpClientTransportConfig::with_uri(url).auth_header(token),
            );
            ().serve(transport)
                .await
                .expect("the gateway accepts the client")
        }
    };
    let whose = async |session: &rmcp::service::RunningService<rmcp::RoleClient, ()>| match session
        .call_tool(call("mcp__secure__client", serde_json::json!({})))
        .await
    {
        Ok(result) => text_of(&result),
        Err(e) => e.to_string(),
    };

    // Bob lists first: he cannot open the service, so it waits for an agent who can.
    let on_bob = connect(bob.clone()).await;
    let tools = on_bob.list_all_tools().await.unwrap();
    assert!(
        !tools.iter().any(|t| t.name.starts_with("mcp__secure__")),
        "{tools:?}"
    );
    // Alice's listing names its tools through her own session.
    let on_alice = connect(alice.clone()).await;
    let tools = on_alice.list_all_tools().await.unwrap();
    assert!(
        tools.iter().any(|t| t.name == "mcp__secure__client"),
        "{tools:?}"
    );
    let alices_client = whose(&on_alice).await;
    assert!(alices_client.starts_with("client: "), "{alices_client}");

    let refused = whose(&on_bob).await;
    assert!(
        refused.contains("agent \"bob\" has not authorized it")
            && refused.contains("run `airlock --agent bob servers auth secure`"),
        "{refused}"
    );
    // Bob's refusals (more than the breaker's five failures in a row) do not fail the
    // service for Alice: her next session is opened anew, past the breaker.
    for _ in 0..6 {
        assert!(whose(&on_bob).await.contains("has not authorized it"));
    }
    on_alice.cancel().await.unwrap();
    let on_alice = connect(alice.clone()).await;
    assert_eq!(whose(&on_alice).await, alices_client);

    authorize("bob");
    let bobs_client = whose(&on_bob).await;
    assert!(bobs_client.starts_with("client: "), "{bobs_client}");
    assert_ne!(
        bobs_client, alices_client,
        "each agent calls with its own tokens"
    );
    assert_eq!(whose(&on_alice).await, alices_client);

    // Logging out forgets only the agent's own tokens.
    let out = ws.run(
        &["--json", "--agent", "bob", "servers", "logout", "secure"],
        &[],
    );
    assert!(
        text(&out).contains("\"forgot_tokens\":true"),
        "{}",
        text(&out)
    );
    let out = ws.run(
        &["--json", "--agent", "alice", "servers", "logout", "secure"],
        &[],
    );
    assert!(
        text(&out).contains("\"forgot_tokens\":true"),
        "{}",
        text(&out)
    );
    on_alice.cancel().await.unwrap();
    on_bob.cancel().await.unwrap();
}

/// `claims` as a JWT with `header` and signature `signature` (base64url parts).
fn compact(header: &Value, claims: &Value, signature: &str) -> String {
    use base64::Engine;
    let encode = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    format!("{}.{}.{signature}", encode(header), encode(claims))
}

/// `claims` unsigned (`alg: none`).
fn unsigned(claims: &Value) -> String {
    compact(&json!({"alg": "none", "kid": "idp-key-1"}), claims, "")
}

/// `claims` signed with HMAC under the provider's key id (the classic confusion).
fn hs256(claims: &Value) -> String {
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
    header.kid = Some("idp-key-1".into());
    jsonwebtoken::encode(
        &header,
        claims,
        &jsonwebtoken::EncodingKey::from_secret(b"guess"),
    )
    .unwrap()
}

/// `claims` claiming algorithm `alg` under the provider's (RSA) key id.
fn forged_as(alg: &str, claims: &Value) -> String {
    compact(
        &json!({"alg": alg, "kid": "idp-key-1"}),
        claims,
        "c2lnbmF0dXJl",
    )
}
