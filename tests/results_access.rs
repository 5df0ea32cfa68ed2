//! What an agent platform sees of every call: retained outputs, previews and paging on
//! character boundaries, digests, the retention limit, per-agent output ownership,
//! grants and the embedder's access callback (a denied call never reaches the server).

mod support;

use std::sync::Arc;

use airlock_host::results::{COMPACT_PREVIEW, DEFAULT_PREVIEW, ResultLimits};
use airlock_host::{
    AccessMode, AccessOptions, AccessRequest, Airlock, AirlockOptions, CallOptions, ErrorCode,
    Event,
};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use support::{Workspace, python, python_fixture_entry, python_server, toml_str};

fn digest(bytes: &[u8]) -> String {
    format!(
        "sha256:{}",
        Sha256::digest(bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    )
}

fn read_all(airlock: &Airlock, agent: &str, service: &str, id: &str) -> String {
    let (mut offset, mut text, mut pages) = (0, String::new(), 0);
    loop {
        let page = airlock.read_output_as(agent, service, id, offset).unwrap();
        assert!(page.text.len() <= DEFAULT_PREVIEW);
        text.push_str(&page.text);
        pages += 1;
        match page.next_offset {
            Some(n) => offset = n,
            None => {
                assert!(page.eof);
                break;
            }
        }
    }
    assert!(pages > 1);
    text
}

#[tokio::test]
async fn a_5_mib_result_is_kept_whole_previewed_and_paged_back_exactly() {
    let ws = Workspace::new(&python_fixture_entry("fx", ""));
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let size = 5 << 20;
    let out = airlock
        .call("mcp__fx__big_text", json!({"size": size}), None)
        .await
        .unwrap();
    assert_eq!(out.retained.size, size);
    assert!(!out.retained.complete);
    assert_eq!(
        out.preview.len(),
        DEFAULT_PREVIEW,
        "the largest preview that fits"
    );
    let id = out.retained.output_id.clone().unwrap();
    let text = read_all(&airlock, "default", "fx", &id);
    assert_eq!(text.len(), size);
    assert_eq!(digest(text.as_bytes()), out.retained.digest);
    airlock.close().await;
}

#[tokio::test]
async fn multibyte_text_is_cut_on_character_boundaries() {
    let ws = Workspace::new(&python_fixture_entry("fx", ""));
    let options = AirlockOptions {
        result_limits: ResultLimits {
            preview: COMPACT_PREVIEW,
            ..ResultLimits::default()
        },
        ..ws.options()
    };
    let airlock = Airlock::start(ws.load(), options).await.unwrap();
    // "✓" is 3 bytes: 4096 bytes hold 1365 of them (4095 bytes), never a partial one.
    let out = airlock
        .call(
            "mcp__fx__big_text",
            json!({"size": 5000, "char": "✓"}),
            None,
        )
        .await
        .unwrap();
    assert_eq!(out.preview.len(), 4095);
    assert!(out.preview.chars().all(|c| c == '✓'));
    let id = out.retained.output_id.clone().unwrap();
    let page = airlock.read_output_as("default", "fx", &id, 4095).unwrap();
    assert_eq!(page.text.len(), 4095);
    let err = airlock
        .read_output_as("default", "fx", &id, 4096)
        .unwrap_err();
    assert_eq!(
        err.code,
        ErrorCode::InvalidArguments,
        "an offset inside a character is refused: {err}"
    );
    airlock.close().await;
}

#[tokio::test]
async fn the_preview_size_is_chosen_per_agent() {
    let ws = Workspace::new(&python_fixture_entry("fx", ""));
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let compact = CallOptions {
        agent: "small-model".into(),
        preview: Some(COMPACT_PREVIEW),
        ..Default::default()
    };
    let small = airlock
        .call_with("mcp__fx__big_text", json!({"size": 100_000}), compact)
        .await
        .unwrap();
    assert_eq!(small.preview.len(), COMPACT_PREVIEW);
    let full = airlock
        .call("mcp__fx__big_text", json!({"size": 100_000}), None)
        .await
        .unwrap();
    assert_eq!(full.preview.len(), DEFAULT_PREVIEW);
    assert!(!small.retained.complete && !full.retained.complete);
    airlock.close().await;
}

#[tokio::test]
async fn a_result_over_the_retention_limit_is_not_kept_and_the_call_says_so() {
    let ws = Workspace::new(&python_fixture_entry("fx", ""));
    let options = AirlockOptions {
        result_limits: ResultLimits {
            max_retained: 1 << 20,
            ..ResultLimits::default()
        },
        ..ws.options()
    };
    let airlock = Airlock::start(ws.load(), options).await.unwrap();
    let out = airlock
        .call("mcp__fx__big_text", json!({"size": 2 << 20}), None)
        .await
        .unwrap();
    assert!(out.retained.output_id.is_none());
    assert!(
        out.retained
            .not_retained_reason
            .as_deref()
            .unwrap()
            .contains("retention limit")
    );
    assert_eq!(out.retained.size, 2 << 20);
    assert_eq!(out.preview.len(), DEFAULT_PREVIEW);
    airlock.close().await;
    let stored: u64 = support::files_under(&ws.data().join("outputs"))
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len())
        .sum();
    assert!(
        stored < 1 << 20,
        "nothing that size was written ({stored} bytes)"
    );
}

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

#[tokio::test]
async fn incompatible_schemas_are_listed_with_the_reason() {
    let ws = Workspace::new(&support::demo_entry("demo", ""));
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    assert!(airlock.tools().iter().all(|t| t.incompatible.is_none()));
    airlock.close().await;
    let reason = airlock_host::catalog::incompatibility(
        &json!({"type": "object", "properties": {"n": {"$ref": "#/$defs/N"}}}),
    )
    .unwrap();
    assert!(reason.contains("$ref"));
}
