//! Content blocks through the two bundled content plugins (`builtin:standard` and
//! `builtin:text-only`): swapping the plugin by config alone (the demo server through the
//! `airlock` binary), server-everything's images and resources, every block type from a
//! Python SDK server, `isError` preserved, unknown future block types never dropped, and
//! every block type through the library and the gateway (stdio, HTTP) unchanged.

mod support;

use airlock_host::Airlock;
use serde_json::{Value, json};
use support::{
    DEMO_TOKEN as TOKEN, Workspace, demo_workspace, everything_workspace as workspace, python,
    python_server, secret_entry, toml_str,
};

#[test]
fn swapping_the_content_plugin_in_config_changes_the_output() {
    let env = [("DEMO_TOKEN_FOR_TEST", TOKEN)];
    let standard = demo_workspace("");
    let (v, _) = standard.json(&["call", "mcp__demo__render_chart"], &env);
    assert_eq!(v["content"][1]["type"], "image");
    assert_eq!(v["content"][1]["mimeType"], "image/png");
    let (v, _) = standard.json(&["call", "mcp__demo__read_docs"], &env);
    assert_eq!(
        v["content"][0]["text"],
        "[resource demo://docs/readme]\nAirlock demo: try `airlock tools`."
    );
    assert_eq!(
        v["content"][1]["text"],
        "[resource demo://docs/manual.pdf] (binary, application/pdf)"
    );
    let link: Value = serde_json::from_str(v["content"][2]["text"].as_str().unwrap()).unwrap();
    assert_eq!(link["type"], "resource_link");

    let text_only = demo_workspace("adapters = { content = \"builtin:text-only\" }");
    let (v, _) = text_only.json(&["call", "mcp__demo__render_chart"], &env);
    assert_eq!(
        v["content"][1],
        serde_json::json!({"type": "text", "text": "[image content]"})
    );
    let (v, _) = text_only.json(&["call", "mcp__demo__read_docs"], &env);
    let texts: Vec<&str> = v["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        texts,
        [
            "[resource content]",
            "[resource content]",
            "[resource content]"
        ]
    );
}

#[tokio::test]
async fn images_and_resources_through_both_plugins() {
    let ws = workspace("");
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let out = airlock
        .calls()
        .call("mcp__everything__get-tiny-image", json!({}), None)
        .await
        .unwrap();
    let blocks = out.content_json();
    let image = blocks
        .iter()
        .find(|b| b["type"] == "image")
        .expect("the image is kept");
    assert_eq!(image["mimeType"], "image/png");
    let out = airlock
        .calls()
        .call(
            "mcp__everything__get-resource-reference",
            json!({"resourceType": "Text", "resourceId": 1}),
            None,
        )
        .await
        .unwrap();
    assert!(
        out.content_json().iter().any(|b| b["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("[resource "))),
        "{:?}",
        out.content
    );
    airlock.close().await;

    let ws = workspace("adapters = { content = \"builtin:text-only\" }");
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let out = airlock
        .calls()
        .call("mcp__everything__get-tiny-image", json!({}), None)
        .await
        .unwrap();
    assert!(out.content_json().iter().all(|b| b["type"] == "text"));
    assert!(
        out.content_json()
            .iter()
            .any(|b| b["text"] == "[image content]")
    );
    airlock.close().await;
}

#[tokio::test]
async fn every_block_type_through_the_standard_plugin() {
    let ws = Workspace::new(&secret_entry("fx", ""));
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let out = airlock
        .calls()
        .call("mcp__fx__all_blocks", json!({}), None)
        .await
        .unwrap();
    let c = &out.content_json();
    assert_eq!(c.len(), 6, "{c:?}");
    assert_eq!(c[0], json!({"type": "text", "text": "plain text"}));
    assert_eq!(c[1]["type"], "image");
    assert_eq!(c[1]["mimeType"], "image/png");
    assert!(!c[1]["data"].as_str().unwrap().is_empty());
    let audio: Value = serde_json::from_str(c[2]["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        (audio["type"].as_str(), audio["mimeType"].as_str()),
        (Some("audio"), Some("audio/wav"))
    );
    let link: Value = serde_json::from_str(c[3]["text"].as_str().unwrap()).unwrap();
    assert_eq!(link["uri"], "file:///srv/report.csv");
    assert_eq!(c[4]["text"], "[resource mem://notes/1]\nembedded note");
    assert_eq!(
        c[5]["text"],
        "[resource mem://files/a.pdf] (binary, application/pdf)"
    );
    assert!(!out.is_error);
    airlock.close().await;
}

#[tokio::test]
async fn every_block_type_through_the_text_only_plugin() {
    let ws = Workspace::new(&secret_entry(
        "fx",
        "adapters = { content = \"builtin:text-only\" }",
    ));
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let out = airlock
        .calls()
        .call("mcp__fx__all_blocks", json!({}), None)
        .await
        .unwrap();
    let blocks = out.content_json();
    let texts: Vec<&str> = blocks.iter().map(|b| b["text"].as_str().unwrap()).collect();
    assert_eq!(
        texts,
        [
            "plain text",
            "[image content]",
            "[audio content]",
            "[resource content]",
            "[resource content]",
            "[resource content]"
        ]
    );
    // isError is preserved by both plugins.
    let failed = airlock
        .calls()
        .call("mcp__fx__fail", json!({"reason": "disk full"}), None)
        .await
        .unwrap();
    assert!(failed.is_error);
    assert!(failed.preview.contains("disk full"), "{}", failed.preview);
    airlock.close().await;
}

#[tokio::test]
async fn unknown_future_blocks_are_never_dropped() {
    let ws = Workspace::new(&format!(
        "[mcp_servers.raw]\ncommand = {}\nargs = [{}]\n",
        toml_str(python().display().to_string()),
        toml_str(python_server("raw_server.py").display().to_string())
    ));
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let out = airlock
        .calls()
        .call("mcp__raw__exotic", json!({}), None)
        .await
        .unwrap();
    assert_eq!(out.content.len(), 3);
    let holo: Value =
        serde_json::from_str(out.content_json()[1]["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        holo,
        json!({"type": "hologram", "depth": 3, "uri": "holo://cube"})
    );
    airlock.close().await;
}

/// Every content block the specification defines (text with annotations and `_meta`,
/// image, audio, resource link, embedded text and blob resources) and blocks only a
/// newer revision knows (a future type; a link with icons, which the plugin contract has
/// no field for), sent back by the server as a test gave them to it.
fn every_block() -> Value {
    json!([
        {"type": "text", "text": "plain", "annotations": {"audience": ["user", "assistant"], "priority": 0.7, "lastModified": "2026-01-02T03:04:05Z"}, "_meta": {"io.example/k": [1, 2.5, null, true]}},
        {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png", "annotations": {"priority": 0.25}},
        {"type": "audio", "data": "UklGRiQAAABXQVZF", "mimeType": "audio/wav", "_meta": {"seconds": 1.5}},
        {"type": "resource_link", "uri": "file:///srv/report.csv", "name": "report.csv", "title": "Report", "description": "Monthly figures", "mimeType": "text/csv", "size": 1234, "_meta": {"rows": 12}},
        {"type": "resource", "resource": {"uri": "mem://notes/1", "mimeType": "text/markdown", "text": "# Note\nbody ü €", "_meta": {"v": 2}}, "annotations": {"audience": ["assistant"]}},
        {"type": "resource", "resource": {"uri": "mem://files/a.pdf", "mimeType": "application/pdf", "blob": "JVBERi0xLjQK"}, "_meta": {"pages": 1}},
        {"type": "hologram", "depth": 3, "uri": "holo://cube", "frames": [{"t": 0}, {"t": 1}]},
        {"type": "resource_link", "uri": "file:///srv/logo.svg", "name": "logo", "icons": [{"src": "https://example.invalid/i.png", "mimeType": "image/png", "sizes": ["48x48"]}]},
    ])
}

/// `value` as canonical JSON text (sorted keys, no spaces): equal texts are the same
/// JSON byte for byte.
fn canonical(value: &Value) -> String {
    serde_json::to_string(value).unwrap()
}

/// A `tools/call` result read from a response body: one JSON-RPC message, as JSON or as
/// the data of an SSE event.
fn result_of(body: &str) -> Value {
    let text = body
        .lines()
        .find_map(|l| {
            l.strip_prefix("data:")
                .map(str::trim)
                .filter(|d| !d.is_empty())
        })
        .unwrap_or(body);
    let message: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {body}"));
    message["result"].clone()
}

#[tokio::test]
async fn every_content_type_crosses_the_library_and_the_gateway_unchanged() {
    let ws = Workspace::new(&format!(
        "[mcp_servers.raw]\ncommand = {}\nargs = [{}]\nadapter_config = {{ content = {{ mode = \"passthrough\" }} }}\n",
        toml_str(python().display().to_string()),
        toml_str(python_server("raw_server.py").display().to_string())
    ));
    let blocks = every_block();
    let structured = json!({"total": 12, "rows": [{"a": 1.25}, {"b": "ü"}]});
    let arguments = json!({"blocks": blocks, "structured": structured});

    // The library.
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let out = airlock
        .calls()
        .call("mcp__raw__echo_blocks", arguments.clone(), None)
        .await
        .unwrap();
    assert_eq!(
        canonical(&Value::Array(out.content_json())),
        canonical(&blocks)
    );
    assert_eq!(out.structured_content.as_ref(), Some(&structured));
    airlock.close().await;

    // The gateway over stdio, to a client speaking raw JSON-RPC.
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let mut child = support::stdio_gateway(&ws, &["serve"]);
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut send = async |message: Value| {
        let mut line = serde_json::to_vec(&message).unwrap();
        line.push(b'\n');
        stdin.write_all(&line).await.unwrap();
    };
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "tests", "version": "1"}}}),
    )
    .await;
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "mcp__raw__echo_blocks", "arguments": arguments}}))
    .await;
    let answer = loop {
        let line = lines
            .next_line()
            .await
            .unwrap()
            .expect("the gateway answers");
        let message: Value = serde_json::from_str(&line).unwrap();
        if message["id"] == 2 {
            break message;
        }
    };
    let result = &answer["result"];
    assert_eq!(
        canonical(&result["content"]),
        canonical(&blocks),
        "{answer}"
    );
    assert_eq!(result["structuredContent"], structured);
    assert_eq!(result["isError"], false);
    assert!(
        result.get("resultType").is_none(),
        "a 2025-11-25 result: {answer}"
    );
    assert!(result["_meta"]["output_id"].is_string(), "{answer}");
    drop(stdin);
    let _ = child.wait().await;

    // The gateway over streamable HTTP, to a 2026-07-28 client (stateless requests).
    let gateway = support::HttpGateway::start(&ws, &[]);
    let client = reqwest::Client::new();
    let (status, body) = support::modern_call(
        &client,
        &gateway.url,
        3,
        "mcp__raw__echo_blocks",
        arguments.clone(),
        &[],
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let result = result_of(&body);
    assert_eq!(canonical(&result["content"]), canonical(&blocks), "{body}");
    assert_eq!(result["structuredContent"], structured);
    assert_eq!(result["resultType"], "complete", "{body}");

    // A result whose blocks all fit rmcp's model goes out typed, unchanged too.
    let typed = Value::Array(blocks.as_array().unwrap()[..6].to_vec());
    let (status, body) = support::modern_call(
        &client,
        &gateway.url,
        4,
        "mcp__raw__echo_blocks",
        json!({"blocks": typed}),
        &[],
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(canonical(&result_of(&body)["content"]), canonical(&typed));
}
