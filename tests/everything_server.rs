//! The official reference server `@modelcontextprotocol/server-everything` (npm) over
//! stdio: catalog, calls, and its content types through both bundled plugins.

mod support;

use airlock_host::Airlock;
use serde_json::json;
use support::{Workspace, everything_server, toml_str};

fn workspace(extra: &str) -> Workspace {
    let (node, entry) = everything_server();
    Workspace::new(&format!(
        "[mcp_servers.everything]\ncommand = {}\nargs = [{}, \"stdio\"]\nenv = {{ API_TOKEN = \"everything-test-token-77\" }}\n{extra}\n",
        toml_str(node),
        toml_str(entry.display().to_string())
    ))
}

#[tokio::test]
async fn catalog_and_calls() {
    let ws = workspace("");
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let status = &airlock.status()[0];
    assert!(
        matches!(status.status, airlock_host::ServiceStatus::Connected { tools, .. } if tools >= 10),
        "{status:?}"
    );
    let server = status.server.as_ref().unwrap();
    assert!(
        airlock_host::session::SUPPORTED_PROTOCOL_VERSIONS
            .contains(&server.protocol_version.as_str())
    );
    let tools = airlock.tools();
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
        .call(
            "mcp__everything__echo",
            json!({"message": "hello everything"}),
            None,
        )
        .await
        .unwrap();
    assert!(out.preview.contains("hello everything"), "{}", out.preview);
    let out = airlock
        .call("mcp__everything__get-sum", json!({"a": 2, "b": 3}), None)
        .await
        .unwrap();
    assert!(out.preview.contains('5'), "{}", out.preview);
    let err = airlock
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
async fn images_and_resources_through_both_plugins() {
    let ws = workspace("");
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let out = airlock
        .call("mcp__everything__get-tiny-image", json!({}), None)
        .await
        .unwrap();
    let image = out
        .content
        .iter()
        .find(|b| b["type"] == "image")
        .expect("the image is kept");
    assert_eq!(image["mimeType"], "image/png");
    let out = airlock
        .call(
            "mcp__everything__get-resource-reference",
            json!({"resourceType": "Text", "resourceId": 1}),
            None,
        )
        .await
        .unwrap();
    assert!(
        out.content.iter().any(|b| b["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("[resource "))),
        "{:?}",
        out.content
    );
    airlock.close().await;

    let ws = workspace("adapters = { content = \"builtin:text-only\" }");
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let out = airlock
        .call("mcp__everything__get-tiny-image", json!({}), None)
        .await
        .unwrap();
    assert!(out.content.iter().all(|b| b["type"] == "text"));
    assert!(out.content.iter().any(|b| b["text"] == "[image content]"));
    airlock.close().await;
}

#[tokio::test]
async fn the_reference_server_sees_only_the_minimal_environment_and_secrets_are_redacted() {
    let ws = workspace("");
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let out = airlock
        .call("mcp__everything__get-env", json!({}), None)
        .await
        .unwrap();
    let text = out.preview.clone();
    assert!(
        !text.contains("everything-test-token-77"),
        "the configured credential is redacted: {text}"
    );
    assert!(text.contains("[REDACTED:secret:API_TOKEN]"), "{text}");
    assert!(
        !text.contains("CARGO_PKG_NAME")
            && !text.contains("RUST_TEST_THREADS")
            && !text.contains("CARGO_MANIFEST_DIR"),
        "host env leaked: {text}"
    );
    airlock.close().await;
}
