//! Policies beyond the bundled Rust ones, through a real server: the JavaScript policy
//! (`plugins/policy-js`) deciding calls, and a policy instance whose memory creeps up
//! recycled before it reaches its cap.

mod support;

use airlock_host::{ErrorCode, Event};
use serde_json::json;
use support::{arrived, fixture_wasm, policy_workspace as workspace, start_with, toml_str};

/// The bundled JavaScript policy (`plugins/policy-js`, built from source by the test
/// command with componentize-qjs, on QuickJS) deciding real calls: allow, deny by tool glob and by
/// argument pattern, ask, rewrite the arguments, and withhold a result.
#[tokio::test]
async fn a_javascript_policy_decides_calls_through_a_real_server() {
    let wasm = support::root().join("target/js-plugins/policy-js.wasm");
    assert!(
        wasm.is_file(),
        "{} is missing: run scripts/build-js-plugin.sh (the test command does)",
        wasm.display()
    );
    let wasm = toml_str(wasm.display().to_string());
    let rules = format!(
        r#"adapters = {{ policy = {wasm} }}
adapter_config = {{ policy = {{ deny = ["secret_*"], deny_arguments = ["/etc/"], ask = ["wipe_*"], redact_keys = ["command"] }} }}"#
    );
    let capped = format!(
        r#"adapters = {{ policy = {wasm} }}
adapter_config = {{ policy = {{ max_result_chars = 10 }} }}"#
    );
    let ws = workspace(&[("js", &rules), ("capped", &capped)]);
    let airlock = start_with(&ws, None).await;
    let mut events = airlock.events();

    let out = airlock
        .calls()
        .call("mcp__js__read_note", json!({"path": "/srv/a.md"}), None)
        .await
        .unwrap();
    assert!(out.preview.contains("/srv/a.md"), "{}", out.preview);
    for (tool, args, says) in [
        ("mcp__js__secret_report", json!({}), "is denied (secret_*)"),
        (
            "mcp__js__read_note",
            json!({"path": "/etc/passwd"}),
            "match a denied pattern",
        ),
        (
            "mcp__js__wipe_notes",
            json!({"folder": "/srv"}),
            "Allow wipe_notes on js?",
        ),
    ] {
        let err = airlock.calls().call(tool, args, None).await.unwrap_err();
        assert_eq!(err.code, ErrorCode::PolicyDenied, "{tool}: {err}");
        assert!(err.message.contains(says), "{tool}: {err}");
    }
    // Rewritten: the server sees the command withheld.
    airlock
        .calls()
        .call(
            "mcp__js__run",
            json!({"command": "cat ~/.ssh/id_rsa"}),
            None,
        )
        .await
        .unwrap();
    let reached = arrived(&ws, "js");
    let tools: Vec<&str> = reached
        .iter()
        .map(|c| c["tool"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["read_note", "run"]);
    assert_eq!(reached[1]["arguments"]["command"], json!("[withheld]"));

    // Withheld after the server ran it: the result is longer than the cap.
    let err = airlock
        .calls()
        .call("mcp__capped__read_note", json!({"path": "/srv/a.md"}), None)
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::PolicyDenied);
    assert!(err.message.contains("more than 10"), "{err}");
    assert_eq!(arrived(&ws, "capped").len(), 1);

    let mut rules = Vec::new();
    while let Ok(event) = events.try_recv() {
        if let Event::PolicyDecided { rule, decision, .. } = event {
            rules.push(format!("{rule} {decision}"));
        }
    }
    for expected in [
        "default allow",
        "deny:secret_* deny",
        "deny_arguments:/etc/ deny",
        "ask:wipe_* ask",
        "redact_keys rewrite",
        "max_result_chars withhold",
    ] {
        assert!(rules.iter().any(|r| r == expected), "{expected}: {rules:?}");
    }
    airlock.close().await;
}

/// A plugin whose memory creeps up with every call (4 MiB here, as a JavaScript or
/// Python engine's heap does) never reaches the 64 MiB cap: past three quarters of it,
/// the host replaces the instance with a fresh one, and every call keeps running.
#[tokio::test]
async fn an_instance_whose_memory_creeps_up_is_recycled_before_the_cap() {
    let fixture = toml_str(fixture_wasm("policy").display().to_string());
    let ws = workspace(&[(
        "leaky",
        &format!(
            "adapters = {{ policy = [{fixture}] }}\nadapter_config = {{ policy = [{{ action = \"leak\" }}] }}"
        ),
    )]);
    let airlock = start_with(&ws, None).await;
    for i in 0..40 {
        let out = airlock
            .calls()
            .call(
                "mcp__leaky__read_note",
                json!({"path": format!("/n/{i}")}),
                None,
            )
            .await;
        assert!(out.is_ok(), "call {i}: {:?}", out.err());
    }
    assert_eq!(arrived(&ws, "leaky").len(), 40);
    airlock.close().await;
}
