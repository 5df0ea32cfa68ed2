//! Airlock protects its upstream servers (`[limits]`), against real servers: a cap on
//! calls in flight refuses one more with `overloaded`; a rate refuses with
//! `rate_limited` and says when to retry, and retrying then works (through the library
//! and through a live gateway's `_meta.retry_after_ms`); a breaker stops connecting to
//! a server that keeps refusing connections, then probes it back once it listens again;
//! a listing whose server died under it is sent once more on a fresh session, and a tool
//! call whose server died under it is never sent twice.

mod support;

use std::time::{Duration, Instant};

use airlock_host::{Airlock, CallOptions, ErrorCode};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::{Value, json};
use support::{
    HttpGateway, Workspace, everything_server, free_port, python, python_fixture_entry,
    python_server, start_http_server, toml_str,
};

fn as_agent(agent: &str) -> CallOptions {
    CallOptions {
        agent: agent.to_string(),
        ..Default::default()
    }
}

/// The live limits report of `service`.
fn limits_of(airlock: &Airlock, service: &str) -> Value {
    let report = airlock
        .services()
        .status()
        .into_iter()
        .find(|r| r.service == service)
        .expect("the service is configured");
    serde_json::to_value(&report).unwrap()["limits"].clone()
}

#[tokio::test]
async fn a_full_service_refuses_one_more_call_and_takes_it_once_a_slot_frees() {
    let ws = Workspace::new(&python_fixture_entry(
        "fx",
        "[limits.services.fx]\nmax_concurrent = 2\n",
    ));
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let slow = |agent: &str| {
        let airlock = airlock.clone();
        let options = as_agent(agent);
        tokio::spawn(async move {
            airlock
                .calls()
                .call_with("mcp__fx__sleepy", json!({"seconds": 1.5}), options)
                .await
        })
    };
    let (a, b) = (slow("a"), slow("b"));
    let deadline = Instant::now() + Duration::from_secs(20);
    while limits_of(&airlock, "fx")["in_flight"] != 2 {
        assert!(Instant::now() < deadline, "two calls never got in flight");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let refused = airlock
        .calls()
        .call_with("mcp__fx__echo", json!({"text": "third"}), as_agent("c"))
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::Overloaded, "{refused}");
    assert!(refused.message.contains("max_concurrent"), "{refused}");
    assert!(refused.retry_after.is_some());
    assert_eq!(
        airlock_host::call_json(&Err(refused.clone()))["error"],
        "overloaded"
    );

    for slow in [a, b] {
        assert!(!slow.await.unwrap().unwrap().is_error);
    }
    assert_eq!(limits_of(&airlock, "fx")["in_flight"], 0);
    let later = airlock
        .calls()
        .call_with("mcp__fx__echo", json!({"text": "third"}), as_agent("c"))
        .await
        .unwrap();
    assert_eq!(later.preview, "third");
}

#[tokio::test]
async fn a_spent_rate_says_when_to_retry_and_retrying_then_works() {
    let ws = Workspace::new(&python_fixture_entry(
        "fx",
        "[limits]\nagent_calls_per_second = 0.5\nagent_burst = 2\n",
    ));
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let echo = |agent: &str| {
        airlock
            .calls()
            .call_with("mcp__fx__echo", json!({"text": "hi"}), as_agent(agent))
    };
    echo("alice").await.unwrap();
    echo("alice").await.unwrap();
    let refused = echo("alice").await.unwrap_err();
    assert_eq!(refused.code, ErrorCode::RateLimited, "{refused}");
    let wait = refused.retry_after.expect("a rate refusal says when");
    // A token every 2 s: what the two calls took is already refilled.
    assert!(wait <= Duration::from_millis(2001), "{wait:?}");
    assert_eq!(
        airlock_host::call_json(&Err(refused.clone()))["retry_after_ms"],
        json!(wait.as_millis() as u64)
    );
    // Another agent's budget is its own.
    echo("bob").await.unwrap();
    // Retrying when told works.
    tokio::time::sleep(wait).await;
    echo("alice").await.unwrap();
}

#[tokio::test]
async fn a_gateway_client_is_told_when_to_retry() {
    let ws = Workspace::new(&python_fixture_entry(
        "fx",
        "[limits.services.fx]\ncalls_per_second = 0.5\nburst = 1\n",
    ));
    let gateway = HttpGateway::start(&ws, &[]);
    let client =
        ().serve(StreamableHttpClientTransport::from_uri(gateway.url.clone()))
            .await
            .unwrap();
    let echo = || {
        client.call_tool(
            CallToolRequestParams::new("mcp__fx__echo")
                .with_arguments(json!({"text": "hi"}).as_object().unwrap().clone()),
        )
    };
    let first = echo().await.unwrap();
    assert_ne!(first.is_error, Some(true));
    let refused = echo().await.unwrap();
    assert_eq!(refused.is_error, Some(true));
    let meta = serde_json::to_value(&refused).unwrap()["_meta"].clone();
    assert_eq!(meta["error"], "rate_limited", "{meta}");
    let wait = meta["retry_after_ms"].as_u64().expect("retry_after_ms");
    assert!(wait > 1000 && wait <= 2001, "{meta}");
    tokio::time::sleep(Duration::from_millis(wait)).await;
    let again = echo().await.unwrap();
    assert_ne!(again.is_error, Some(true), "{again:?}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn the_breaker_stops_connecting_to_a_dead_server_and_probes_it_back() {
    let (node, entry) = everything_server();
    let entry = entry.display().to_string();
    let port = free_port();
    let listen = || {
        start_http_server(
            &node,
            &[&entry, "streamableHttp"],
            &[("PORT", &port.to_string())],
            port,
        )
    };
    let server = listen();
    let ws = Workspace::new(&format!(
        "[mcp_servers.ev]\ntype = \"http\"\nurl = \"http://127.0.0.1:{port}/mcp\"\nstartup_timeout_secs = 5\n\n\
         [limits]\nbreaker_failures = 2\nbreaker_cooldown_secs = 1\n"
    ));
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let echo = || {
        airlock
            .calls()
            .call("mcp__ev__echo", json!({"message": "hi"}), None)
    };
    echo().await.unwrap();

    // The server goes away; the next two connections fail, and open the breaker.
    drop(server);
    airlock.services().disconnect("default", "ev").await;
    for _ in 0..2 {
        let failed = echo().await.unwrap_err();
        assert_eq!(failed.code, ErrorCode::ServiceUnavailable, "{failed}");
    }
    let limits = limits_of(&airlock, "ev");
    assert_eq!(limits["breaker"], "open", "{limits}");
    assert_eq!(limits["failures"], 2, "{limits}");
    let refused = echo().await.unwrap_err();
    assert_eq!(refused.code, ErrorCode::CircuitOpen, "{refused}");
    let wait = refused.retry_after.expect("an open breaker says when");
    assert!(wait <= Duration::from_millis(1001), "{wait:?}");
    assert!(refused.message.contains("2 times in a row"), "{refused}");

    // The server is back: after the cooldown, one probe connects and closes the breaker.
    let _server = listen();
    tokio::time::sleep(wait).await;
    let back = echo().await.unwrap();
    assert!(!back.is_error, "{}", back.preview);
    let limits = limits_of(&airlock, "ev");
    assert_eq!(limits["breaker"], "closed", "{limits}");
    assert_eq!(limits["failures"], 0, "{limits}");
}

#[tokio::test]
async fn a_listing_is_retried_on_a_fresh_session_and_a_tool_call_never_is() {
    let dir = tempfile::tempdir().unwrap();
    let mark = dir.path().join("crashed-once");
    let log = dir.path().join("received.jsonl");
    let ws = Workspace::new(&format!(
        "[mcp_servers.raw]\ncommand = {}\nargs = [{}, \"flaky\"]\nenv = {{ RAW_MARK = {}, RAW_LOG = {} }}\n",
        toml_str(python().display().to_string()),
        toml_str(python_server("raw_server.py").display().to_string()),
        toml_str(mark.display().to_string()),
        toml_str(log.display().to_string()),
    ));
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let received = |method: &str, tool: Option<&str>| {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|m| m["method"] == method)
            .filter(|m| tool.is_none_or(|t| m["params"]["name"] == t))
            .count()
    };

    // The server exits on its first resources/list; the listing is sent again, once,
    // to a fresh server, and the caller sees only the answer.
    let resources = airlock
        .resources()
        .list_resources("default", Some("raw"))
        .await
        .unwrap();
    assert_eq!(resources.len(), 1, "{resources:?}");
    assert_eq!(resources[0]["uri"], "raw://one");
    assert!(mark.exists());
    assert_eq!(received("resources/list", None), 2);

    // A tool call whose server dies under it fails, and is not sent again.
    let died = airlock
        .calls()
        .call("mcp__raw__die", json!({}), None)
        .await
        .unwrap_err();
    assert_eq!(died.code, ErrorCode::ServiceUnavailable, "{died}");
    assert_eq!(received("tools/call", Some("die")), 1);
    // The next call opens a fresh session.
    let echoed = airlock
        .calls()
        .call("mcp__raw__echo", json!({"text": "after"}), None)
        .await
        .unwrap();
    assert_eq!(echoed.preview, "after");
    assert_eq!(received("tools/call", Some("die")), 1);
}

#[test]
fn status_shows_the_limits() {
    let ws = Workspace::new(&python_fixture_entry(
        "fx",
        "[limits]\nmax_concurrent = 3\ncalls_per_second = 4\n",
    ));
    let (status, _) = ws.json(&["status"], &[]);
    let limits = &status["services"][0]["limits"];
    assert_eq!(limits["max_concurrent"], 3, "{status}");
    assert_eq!(limits["calls_per_second"], 4.0, "{status}");
    assert_eq!(limits["breaker"], "closed", "{status}");
    assert_eq!(limits["in_flight"], 0, "{status}");
}

#[test]
fn a_bad_limit_is_named_with_its_file() {
    let ws = Workspace::new(&python_fixture_entry(
        "fx",
        "[limits.services.fx]\nmax_concurrent = 0\n",
    ));
    let out = ws.run(&["status"], &[]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("limits.services.fx.max_concurrent"),
        "{stderr}"
    );
    assert!(stderr.contains("airlock.toml"), "{stderr}");
}
