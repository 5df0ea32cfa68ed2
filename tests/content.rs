//! Content blocks through the two bundled content plugins (`builtin:standard` and
//! `builtin:text-only`): swapping the plugin by config alone (the demo server through the
//! `airlock` binary), server-everything's images and resources, every block type from a
//! Python SDK server, `isError` preserved, and unknown future block types never dropped.

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
async fn every_block_type_through_the_standard_plugin() {
    let ws = Workspace::new(&secret_entry("fx", ""));
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let out = airlock
        .call("mcp__fx__all_blocks", json!({}), None)
        .await
        .unwrap();
    let c = &out.content;
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
        .call("mcp__fx__all_blocks", json!({}), None)
        .await
        .unwrap();
    let texts: Vec<&str> = out
        .content
        .iter()
        .map(|b| b["text"].as_str().unwrap())
        .collect();
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
        .call("mcp__raw__exotic", json!({}), None)
        .await
        .unwrap();
    assert_eq!(out.content.len(), 3);
    let holo: Value = serde_json::from_str(out.content[1]["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        holo,
        json!({"type": "hologram", "depth": 3, "uri": "holo://cube"})
    );
    airlock.close().await;
}
