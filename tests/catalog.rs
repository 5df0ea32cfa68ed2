//! The tool catalog: qualified names with service and raw name (the demo server through
//! the `airlock` binary), server-everything's catalog and calls, names that stay valid,
//! unique and keep the raw name (colliding and over-long names from a Python SDK server),
//! and incompatible schemas listed with the reason.

mod support;

use std::collections::BTreeSet;

use airlock_host::Airlock;
use serde_json::json;
use support::{
    DEMO_TOKEN as TOKEN, Workspace, demo_workspace, everything_workspace as workspace, secret_entry,
};

#[test]
fn tools_lists_qualified_names_with_service_and_raw_name() {
    let ws = demo_workspace("");
    let (v, out) = ws.json(&["tools"], &[("DEMO_TOKEN_FOR_TEST", TOKEN)]);
    assert!(out.status.success());
    let tools = v["tools"].as_array().unwrap();
    let echo = tools
        .iter()
        .find(|t| t["name"] == "mcp__demo__echo")
        .expect("echo listed");
    assert_eq!(echo["service"], "demo");
    assert_eq!(echo["tool"], "echo");
    assert!(echo["description"].as_str().unwrap().contains("Echoes"));
    assert_eq!(tools.len(), 6);
}

#[tokio::test]
async fn catalog_and_calls() {
    let ws = workspace("");
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let status = &airlock.services().status()[0];
    assert!(
        matches!(status.status, airlock_host::ServiceStatus::Connected { tools, .. } if tools >= 10),
        "{status:?}"
    );
    let server = status.server.as_ref().unwrap();
    assert!(
        airlock_host::session::SUPPORTED_PROTOCOL_VERSIONS
            .contains(&server.protocol_version.as_str())
    );
    let tools = airlock.catalog().tools();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    for expected in [
        "mcp__everything__echo",
        "mcp__everything__get-sum",
        "mcp__everything__get-tiny-image",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    let out = airlock
        .calls()
        .call(
            "mcp__everything__echo",
            json!({"message": "hello everything"}),
            None,
        )
        .await
        .unwrap();
    assert!(out.preview.contains("hello everything"), "{}", out.preview);
    let out = airlock
        .calls()
        .call("mcp__everything__get-sum", json!({"a": 2, "b": 3}), None)
        .await
        .unwrap();
    assert!(out.preview.contains('5'), "{}", out.preview);
    let err = airlock
        .calls()
        .call("mcp__everything__get-sum", json!({"a": "two"}), None)
        .await;
    match err {
        Err(e) => assert!(
            matches!(
                e.code,
                airlock_host::ErrorCode::InvalidArguments | airlock_host::ErrorCode::ToolError
            ),
            "{e}"
        ),
        Ok(out) => assert!(out.is_error, "bad arguments must fail: {}", out.preview),
    }
    airlock.close().await;
}

#[tokio::test]
async fn catalog_names_are_valid_unique_and_keep_raw_names() {
    let ws = Workspace::new(&secret_entry("fx", ""));
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let tools = airlock.catalog().tools();
    let names: BTreeSet<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names.len(), tools.len(), "names are unique");
    let valid = |n: &str| {
        n.len() <= 64
            && !n.is_empty()
            && n.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    };
    assert!(tools.iter().all(|t| valid(&t.name)), "{names:?}");
    assert!(names.contains("mcp__fx__echo"));
    // `read.file` and `read_file` read the same once sanitized: both get a short hash.
    let dot = tools.iter().find(|t| t.raw_name == "read.file").unwrap();
    let underscore = tools.iter().find(|t| t.raw_name == "read_file").unwrap();
    assert_ne!(dot.name, underscore.name);
    assert!(
        dot.name.starts_with("mcp__fx__read_file_")
            && underscore.name.starts_with("mcp__fx__read_file_")
    );
    // A 70-character tool name is cut to 64 with a hash, and still callable.
    let long = tools.iter().find(|t| t.raw_name == "t".repeat(70)).unwrap();
    assert_eq!(long.name.len(), 64);
    let out = airlock
        .calls()
        .call(&long.name, json!({}), None)
        .await
        .unwrap();
    assert_eq!(out.preview, "long");
    let out = airlock
        .calls()
        .call(&dot.name, json!({}), None)
        .await
        .unwrap();
    assert_eq!(out.preview, "dot");
    airlock.close().await;
}

#[tokio::test]
async fn incompatible_schemas_are_listed_with_the_reason() {
    let ws = Workspace::new(&support::demo_entry("demo", ""));
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    assert!(
        airlock
            .catalog()
            .tools()
            .iter()
            .all(|t| t.incompatible.is_none())
    );
    airlock.close().await;
    let reason = airlock_host::catalog::incompatibility(
        &json!({"type": "object", "properties": {"n": {"$ref": "#/$defs/N"}}}),
    )
    .unwrap();
    assert!(reason.contains("$ref"));
}
