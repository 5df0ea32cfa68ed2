//! Chaos: the registry's PostgreSQL goes away under Airlock (a real PostgreSQL and S3
//! server, started by the test command, reached through a relay the test cuts and
//! stalls). The library: every statement is bounded, the failure is typed, confirmed
//! tokens and grants outlive the outage and revoked ones do not, and the registry comes
//! back by itself. The gateway: a client's session outlives the outage, its calls keep
//! working on what was confirmed, a token never seen before is refused with 503 and
//! `registry_unavailable`, and the first calls after recovery work on the same session.

mod support;

use std::time::{Duration, Instant};

use airlock_host::config::{RegistryBounds, RegistryLocation};
use airlock_host::registry::{Registry, RegistryError, TokenRecord};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use support::{
    HttpGateway, Outage, Workspace, python_fixture_entry, remote_storage_tables, storage_services,
    storage_tag,
};

/// The test PostgreSQL's `host:port`, as written in its URL.
fn postgres_authority() -> String {
    let (postgres, _, _) = storage_services();
    postgres
        .rsplit('@')
        .next()
        .and_then(|rest| rest.split('/').next())
        .expect("the test PostgreSQL URL has user@host:port/db")
        .to_string()
}

/// A relay in front of the test PostgreSQL.
fn relay() -> Outage {
    Outage::start(postgres_authority().parse().unwrap())
}

/// `text` with the test PostgreSQL's address replaced by the relay's.
fn behind(outage: &Outage, text: &str) -> String {
    text.replace(
        &postgres_authority(),
        &format!("127.0.0.1:{}", outage.port()),
    )
}

/// Whether `e` is the typed outage error, naming the database.
fn is_outage(e: &RegistryError) -> bool {
    e.is_unavailable() && e.to_string().contains("cannot be reached")
}

#[test]
fn the_registry_bounds_an_outage_recalls_what_it_confirmed_and_comes_back() {
    let outage = relay();
    let (url, _, _) = storage_services();
    let dir = tempfile::tempdir().unwrap();
    let timeout = Duration::from_secs(1);
    let registry = Registry::open_at(
        dir.path(),
        &RegistryLocation::Postgres {
            url: behind(&outage, &url),
            schema: storage_tag(),
            bounds: RegistryBounds {
                timeout,
                outage_grace: Duration::from_secs(60),
            },
        },
    )
    .unwrap();
    let token = TokenRecord {
        id: "tok1".into(),
        agent: "alice".into(),
        fingerprint: "sha256:alice".into(),
        secret_ref: "ref".into(),
        created_at: 0,
    };
    registry.insert_token(&token).unwrap();
    registry.grant("alice", "github").unwrap();
    registry.grant("alice", "jira").unwrap();
    assert!(registry.is_granted("alice", "github").unwrap());
    assert!(registry.is_granted("alice", "jira").unwrap());
    assert_eq!(
        registry
            .token_by_fingerprint("sha256:alice")
            .unwrap()
            .unwrap()
            .agent,
        "alice"
    );
    registry.revoke("alice", "jira").unwrap();

    for (what, stall) in [("cut", false), ("stalled", true)] {
        if stall {
            outage.stall();
        } else {
            outage.cut();
        }
        // What the database confirmed still answers, at once or within one timeout.
        let started = Instant::now();
        assert!(registry.is_granted("alice", "github").unwrap(), "{what}");
        assert_eq!(
            registry
                .token_by_fingerprint("sha256:alice")
                .unwrap()
                .unwrap()
                .id,
            "tok1",
            "{what}"
        );
        assert!(
            started.elapsed() < timeout * 3,
            "{what}: {:?}",
            started.elapsed()
        );
        // What it refused, or never said, is a typed error, bounded.
        for refused in [
            registry.is_granted("alice", "jira").unwrap_err(),
            registry.is_granted("bob", "github").unwrap_err(),
            registry.token_by_fingerprint("sha256:bob").unwrap_err(),
            registry.all_grants().unwrap_err(),
        ] {
            assert!(is_outage(&refused), "{what}: {refused}");
            assert!(!refused.to_string().contains("password"), "{refused}");
        }
        assert!(
            started.elapsed() < timeout * 6,
            "{what}: {:?}",
            started.elapsed()
        );
        assert!(registry.reachable().is_err(), "{what}");

        outage.restore();
        // Back by itself, once the pause after the last failure (at most 2 s) is over.
        let back = Instant::now() + Duration::from_secs(10);
        while registry.reachable().is_err() && Instant::now() < back {
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(!registry.is_granted("bob", "github").unwrap(), "{what}");
        assert!(!registry.is_granted("alice", "jira").unwrap(), "{what}");
        assert!(registry.is_granted("alice", "github").unwrap(), "{what}");
    }

    // Revoked while the database answered: never recalled in the next outage.
    registry.revoke("alice", "github").unwrap();
    registry.delete_token("tok1").unwrap();
    outage.cut();
    assert!(is_outage(
        &registry.is_granted("alice", "github").unwrap_err()
    ));
    assert!(is_outage(
        &registry.token_by_fingerprint("sha256:alice").unwrap_err()
    ));
    outage.restore();
}

async fn client(gateway: &HttpGateway, token: &str) -> RunningService<RoleClient, ()> {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(gateway.url.clone()).auth_header(token),
    );
    ().serve(transport)
        .await
        .expect("the gateway accepts the client")
}

fn call(name: &str, args: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(name.to_string()).with_arguments(args.as_object().unwrap().clone())
}

fn text_of(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("")
}

/// `call`'s answer, or a panic after 20 s: a client that lost its session waits forever.
async fn bounded<T>(call: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), call)
        .await
        .expect("the gateway answered the call within 20 s")
}

/// An `initialize` POST with `token`: the status, the `Retry-After` header and the body.
async fn initialize(gateway: &HttpGateway, token: &str) -> (u16, Option<String>, String) {
    let response = reqwest::Client::new()
        .post(&gateway.url)
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .json(&json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "chaos", "version": "1"}}
        }))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let retry = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    (status, retry, response.text().await.unwrap_or_default())
}

fn token_of(ws: &Workspace, agent: &str) -> (String, String) {
    let (made, out) = ws.json(&["--agent", agent, "serve", "tokens", "add"], &[]);
    assert!(out.status.success(), "{made}");
    (
        made["id"].as_str().unwrap().to_string(),
        made["token"].as_str().unwrap().to_string(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_outage_costs_only_the_calls_that_need_it() {
    let outage = relay();
    let tables = behind(&outage, &remote_storage_tables(&storage_tag()))
        .replace("[registry]\n", "[registry]\ntimeout_secs = 1\n");
    let ws = Workspace::with_storage(&python_fixture_entry("fx", ""), &tables);
    let (_, alice_token) = token_of(&ws, "alice");
    // Bob and Dave hold tokens the gateway has not seen when the registry goes down.
    let (_, bob_token) = token_of(&ws, "bob");
    let (_, dave_token) = token_of(&ws, "dave");
    let (carol_id, carol_token) = token_of(&ws, "carol");
    for agent in ["alice", "bob", "carol", "dave"] {
        let (granted, out) = ws.json(&["--agent", agent, "grants", "add", "fx"], &[]);
        assert!(out.status.success(), "{granted}");
    }
    let gateway = HttpGateway::start(&ws, &["--require-token", "--access", "grants"]);
    let alice = client(&gateway, &alice_token).await;
    let echoed = alice
        .call_tool(call("mcp__fx__echo", json!({"text": "before"})))
        .await
        .unwrap();
    assert_eq!(text_of(&echoed), "before");
    // Carol's token is seen, then removed: the gateway learns of it on her next request.
    assert_eq!(initialize(&gateway, &carol_token).await.0, 200);
    let (removed, out) = ws.json(&["serve", "tokens", "remove", &carol_id], &[]);
    assert!(out.status.success(), "{removed}");
    assert_eq!(initialize(&gateway, &carol_token).await.0, 401);

    for (what, stall, unseen) in [("cut", false, &bob_token), ("stalled", true, &dave_token)] {
        if stall {
            outage.stall();
        } else {
            outage.cut();
        }
        let started = Instant::now();
        let during = bounded(alice.call_tool(call("mcp__fx__echo", json!({"text": "during"}))))
            .await
            .unwrap_or_else(|e| panic!("registry {what}: the session was dropped: {e}"));
        assert_eq!(text_of(&during), "during", "registry {what}: {during:?}");
        assert!(
            started.elapsed() < Duration::from_secs(8),
            "registry {what}: {:?}",
            started.elapsed()
        );
        // A token this gateway never saw cannot be checked now.
        let (status, retry, body) = initialize(&gateway, unseen).await;
        assert_eq!(status, 503, "registry {what}: {body}");
        assert_eq!(retry.as_deref(), Some("2"));
        assert!(body.contains("registry_unavailable"), "{body}");
        // Carol's was seen removed: refused, outage or not.
        let (status, _, body) = initialize(&gateway, &carol_token).await;
        assert_ne!(
            status, 200,
            "registry {what}: a removed token got in: {body}"
        );

        outage.restore();
        let after = bounded(alice.call_tool(call("mcp__fx__echo", json!({"text": "after"}))))
            .await
            .unwrap_or_else(|e| panic!("registry back after {what}: the session is gone: {e}"));
        assert_eq!(text_of(&after), "after", "{after:?}");
        // It gets in once the registry answers again (after its pause, at most 2 s).
        let back = Instant::now() + Duration::from_secs(10);
        let mut status = 0;
        while status != 200 && Instant::now() < back {
            status = initialize(&gateway, unseen).await.0;
            if status != 200 {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        assert_eq!(status, 200, "registry back after {what}: still refused");
    }
    alice.cancel().await.unwrap();
    let logged = gateway.stderr_lines().join("\n");
    for token in [&alice_token, &bob_token, &carol_token, &dave_token] {
        assert!(!logged.contains(token.as_str()), "a token reached the log");
    }
}
