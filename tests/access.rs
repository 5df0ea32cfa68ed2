//! Access control: in grants mode an agent reads only its own outputs and only while
//! granted (grant changes are events), and the embedder's access callback refuses a call
//! before it ever reaches the server.

mod support;

use std::sync::Arc;

use airlock_host::{
    AccessMode, AccessOptions, AccessRequest, Airlock, AirlockOptions, CallOptions, ErrorCode,
    Event,
};
use serde_json::{Value, json};
use support::{Workspace, python, python_fixture_entry, python_server, toml_str};

#[tokio::test]
async fn an_agent_reads_only_its_own_outputs_and_only_while_granted() {
    let ws = Workspace::new(&python_fixture_entry("fx", ""));
    let options = AirlockOptions {
        access: AccessOptions {
            mode: AccessMode::Grants,
            check: None,
        },
        ..ws.options()
    };
    let airlock = Airlock::start(ws.load(), options).await.unwrap();
    let mut events = airlock.events();
    assert!(airlock.tools_for("alice").is_empty(), "no grant, no tools");
    airlock.grant("alice", "fx").unwrap();
    airlock.grant("bob", "fx").unwrap();
    assert!(!airlock.tools_for("alice").is_empty());
    let alice = CallOptions {
        agent: "alice".into(),
        ..Default::default()
    };
    let out = airlock
        .call_with("mcp__fx__big_text", json!({"size": 100_000}), alice)
        .await
        .unwrap();
    let id = out.retained.output_id.unwrap();
    assert!(airlock.read_output_as("alice", "fx", &id, 0).is_ok());
    let err = airlock.read_output_as("bob", "fx", &id, 0).unwrap_err();
    assert_eq!(err.code, ErrorCode::ServiceAccessDenied);
    airlock.revoke("alice", "fx").await.unwrap();
    let err = airlock.read_output_as("alice", "fx", &id, 0).unwrap_err();
    assert_eq!(
        err.code,
        ErrorCode::ServiceAccessDenied,
        "each read re-checks access: {err}"
    );
    let changes: Vec<(String, bool)> = std::iter::from_fn(|| events.try_recv().ok())
        .filter_map(|e| match e {
            Event::GrantsChanged { agent, granted, .. } => Some((agent, granted)),
            _ => None,
        })
        .collect();
    assert_eq!(
        changes,
        vec![
            ("alice".into(), true),
            ("bob".into(), true),
            ("alice".into(), false)
        ]
    );
    airlock.close().await;
}

#[tokio::test]
async fn a_denied_call_never_reaches_the_server() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let ws = Workspace::new(&format!(
        "[mcp_servers.raw]\ncommand = {}\nargs = [{}]\nenv = {{ RAW_LOG = {} }}\n",
        toml_str(python().display().to_string()),
        toml_str(python_server("raw_server.py").display().to_string()),
        toml_str(log.path().display().to_string())
    ));
    let check = Arc::new(|request: &AccessRequest<'_>| match request {
        AccessRequest::Call {
            agent: "intruder", ..
        } => Err("this room is read-only".to_string()),
        _ => Ok(()),
    });
    let options = AirlockOptions {
        access: AccessOptions {
            mode: AccessMode::Open,
            check: Some(check),
        },
        ..ws.options()
    };
    let airlock = Airlock::start(ws.load(), options).await.unwrap();
    let intruder = CallOptions {
        agent: "intruder".into(),
        ..Default::default()
    };
    let err = airlock
        .call_with("mcp__raw__exotic", json!({}), intruder)
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::ServiceAccessDenied);
    assert!(err.message.contains("read-only"), "{}", err.message);
    airlock
        .call("mcp__raw__exotic", json!({}), None)
        .await
        .unwrap();
    airlock.close().await;
    let received: Vec<Value> = std::fs::read_to_string(log.path())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let calls = received
        .iter()
        .filter(|m| m["method"] == "tools/call")
        .count();
    assert_eq!(
        calls, 1,
        "only the allowed call reached the server: {received:?}"
    );
    let initializes = received
        .iter()
        .filter(|m| m["method"] == "initialize")
        .count();
    assert_eq!(
        initializes, 1,
        "the denied agent never even opened a session"
    );
}
