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
    assert!(
        airlock.catalog().tools_for("alice").is_empty(),
        "no grant, no tools"
    );
    airlock.access().grant("alice", "fx").unwrap();
    airlock.access().grant("bob", "fx").unwrap();
    assert!(!airlock.catalog().tools_for("alice").is_empty());
    let alice = CallOptions {
        agent: "alice".into(),
        ..Default::default()
    };
    let out = airlock
        .calls()
        .call_with("mcp__fx__big_text", json!({"size": 100_000}), alice)
        .await
        .unwrap();
    let id = out.retained.output_id.unwrap();
    assert!(
        airlock
            .outputs()
            .read_as("alice", "fx", &id, 0)
            .await
            .is_ok()
    );
    let err = airlock
        .outputs()
        .read_as("bob", "fx", &id, 0)
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::ServiceAccessDenied);
    airlock.access().revoke("alice", "fx").await.unwrap();
    let err = airlock
        .outputs()
        .read_as("alice", "fx", &id, 0)
        .await
        .unwrap_err();
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
        } => Err("this room is read-only".into()),
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
        .calls()
        .call_with("mcp__raw__exotic", json!({}), intruder)
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::ServiceAccessDenied);
    assert!(err.message.contains("read-only"), "{}", err.message);
    airlock
        .calls()
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

/// Every entry point that touches a service, in grants mode: allowed with the grant,
/// `service_access_denied` without it (and an aggregated listing simply omits the
/// service); the embedder's callback is consulted for each.
#[tokio::test]
async fn every_entry_point_checks_grants_and_the_embedders_callback() {
    let ws = Workspace::new(&format!(
        "[mcp_servers.conf]\ncommand = {}\nargs = [{}]\n",
        toml_str(python().display().to_string()),
        toml_str(python_server("conformance_server.py").display().to_string()),
    ));
    let seen = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let record = seen.clone();
    let check = Arc::new(move |request: &AccessRequest<'_>| {
        let what = match request {
            AccessRequest::Call { agent, .. } => format!("{agent} call"),
            AccessRequest::Service {
                agent, operation, ..
            } => format!("{agent} {operation}"),
            AccessRequest::ReadOutput { agent, .. } => format!("{agent} read-output"),
        };
        record.lock().unwrap().push(what);
        Ok(())
    });
    let options = AirlockOptions {
        access: AccessOptions {
            mode: AccessMode::Grants,
            check: Some(check),
        },
        ..ws.options()
    };
    let airlock = Airlock::start(ws.load(), options).await.unwrap();
    airlock.access().grant("alice", "conf").unwrap();
    let call = |agent: &str| CallOptions {
        agent: agent.into(),
        ..Default::default()
    };

    // Alice, granted: every entry point works.
    assert!(!airlock.catalog().tools_for("alice").is_empty());
    let out = airlock
        .calls()
        .call_with("mcp__conf__test_simple_text", json!({}), call("alice"))
        .await
        .unwrap();
    let id = out.retained.output_id.unwrap();
    assert!(
        !airlock
            .resources()
            .list_resources("alice", None)
            .await
            .unwrap()
            .is_empty()
    );
    airlock
        .resources()
        .read_resource("alice", "conf", "test://static-text")
        .await
        .unwrap();
    assert!(
        !airlock
            .resources()
            .list_prompts("alice", None)
            .await
            .unwrap()
            .is_empty()
    );
    airlock
        .resources()
        .get_prompt("alice", "conf", "test_simple_prompt", json!({}))
        .await
        .unwrap();
    airlock
        .resources()
        .subscribe_resource("alice", "conf", "test://watched-resource", true)
        .await
        .unwrap();
    airlock
        .resources()
        .complete(
            "alice",
            "conf",
            json!({"ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
                   "argument": {"name": "arg1", "value": "t"}}),
        )
        .await
        .unwrap();
    airlock
        .outputs()
        .read_as("alice", "conf", &id, 0)
        .await
        .unwrap();
    assert_eq!(airlock.access().status_for("alice").len(), 1);
    assert!(
        airlock
            .catalog()
            .instructions_for("alice")
            .contains("- conf")
    );

    // Mallory, not granted: refused everywhere, and listings leave the service out.
    let denied = |r: Result<Value, airlock_host::CallError>, what: &str| {
        let e = r.expect_err(what);
        assert_eq!(e.code, ErrorCode::ServiceAccessDenied, "{what}: {e}");
    };
    assert!(airlock.catalog().tools_for("mallory").is_empty());
    let e = airlock
        .calls()
        .call_with("mcp__conf__test_simple_text", json!({}), call("mallory"))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::ServiceAccessDenied);
    assert!(
        airlock
            .resources()
            .list_resources("mallory", None)
            .await
            .unwrap()
            .is_empty()
    );
    denied(
        airlock
            .resources()
            .list_resources("mallory", Some("conf"))
            .await
            .map(Value::from),
        "resources/list of one service",
    );
    denied(
        airlock
            .resources()
            .read_resource("mallory", "conf", "test://static-text")
            .await,
        "resources/read",
    );
    assert!(
        airlock
            .resources()
            .list_prompts("mallory", None)
            .await
            .unwrap()
            .is_empty()
    );
    denied(
        airlock
            .resources()
            .get_prompt("mallory", "conf", "test_simple_prompt", json!({}))
            .await,
        "prompts/get",
    );
    denied(
        airlock
            .resources()
            .subscribe_resource("mallory", "conf", "test://watched-resource", true)
            .await
            .map(|_| Value::Null),
        "resources/subscribe",
    );
    denied(
        airlock
            .resources()
            .complete(
                "mallory",
                "conf",
                json!({"ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
                       "argument": {"name": "arg1", "value": "t"}}),
            )
            .await,
        "completion/complete",
    );
    let e = airlock
        .outputs()
        .read_as("mallory", "conf", &id, 0)
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::ServiceAccessDenied);
    assert!(airlock.access().status_for("mallory").is_empty());
    assert!(
        !airlock
            .catalog()
            .instructions_for("mallory")
            .contains("conf")
    );
    assert_eq!(
        airlock.services().session_pid("mallory", "conf").await,
        None,
        "a refused agent never opened a session"
    );

    let seen = seen.lock().unwrap().clone();
    for wanted in [
        "alice call",
        "alice resources/read",
        "alice prompts/get",
        "alice resources/subscribe",
        "alice completion/complete",
        "alice read-output",
    ] {
        assert!(
            seen.iter().any(|s| s == wanted),
            "{wanted} not checked: {seen:?}"
        );
    }
    airlock.close().await;
}
