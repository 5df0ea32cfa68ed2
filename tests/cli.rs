//! The `airlock` binary end to end: error codes and exit status with `--json` (the bundled
//! demo server as a real child process), the `airlock demo` walkthrough, and
//! `airlock plugin run` replaying a stage offline.

mod support;

use serde_json::Value;
use support::{DEMO_TOKEN as TOKEN, demo_workspace};

#[test]
fn error_codes_and_exit_status() {
    let ws = demo_workspace("");
    let env = [("DEMO_TOKEN_FOR_TEST", TOKEN)];

    let (v, out) = ws.json(&["call", "mcp__demo__fail"], &env);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(v["ok"], false);
    assert_eq!(v["error"], "tool_error");
    assert!(
        v["message"].as_str().unwrap().contains("unreachable"),
        "{v}"
    );
    assert!(
        v["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("unreachable")
    );

    let (v, out) = ws.json(&["call", "mcp__demo__nope"], &env);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(v["error"], "unknown_tool");

    let (v, _) = ws.json(&["call", "mcp__demo__echo", "--args", "[1,2]"], &env);
    assert_eq!(v["error"], "invalid_arguments");
    let (v, _) = ws.json(&["call", "mcp__demo__echo", "--args", "{not json"], &env);
    assert_eq!(v["error"], "invalid_arguments");
    let (v, _) = ws.json(&["call", "mcp__demo__echo", "--args", "{}"], &env);
    assert_eq!(
        v["error"], "invalid_arguments",
        "the server rejects a missing required argument: {v}"
    );

    let (v, out) = ws.json(
        &["call", "mcp__demo__add", "--args", r#"{"a": 2, "b": 40}"#],
        &env,
    );
    assert!(out.status.success());
    assert_eq!(v["text"], "42");
    assert_eq!(v["structured_content"]["sum"], 42.0);
}

#[test]
fn demo_command_walks_through_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(support::airlock_bin())
        .args(["--json", "--data-dir"])
        .arg(dir.path())
        .arg("demo")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let steps = v["steps"].as_array().unwrap();
    assert_eq!(steps[0]["result"]["redacted"], true);
    assert!(
        !steps[0]["result"]["text"]
            .as_str()
            .unwrap()
            .contains("demo_tok_")
    );
    assert_eq!(steps[1]["result"]["content"][1]["type"], "image");
    assert_eq!(steps[4]["result"]["content"][1]["text"], "[image content]");
}

#[test]
fn plugin_run_replays_a_stage_offline() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("tools.json");
    std::fs::write(
        &input,
        serde_json::json!({"service": {"id": "my.srv", "label": "My Service"}, "tools": [{"name": "do.it", "inputSchema": {"type": "object"}}]}).to_string(),
    )
    .unwrap();
    let out = std::process::Command::new(support::airlock_bin())
        .args(["--data-dir"])
        .arg(dir.path().join("data"))
        .args([
            "plugin",
            "run",
            "builtin:standard",
            "--stage",
            "naming",
            "--plugin-config",
            r#"{"style":"namespace"}"#,
            "--input",
        ])
        .arg(&input)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["namespace"], "my_service");
    assert_eq!(v["tools"][0]["name"], "my_service__do_it");
    assert_eq!(v["tools"][0]["raw_name"], "do.it");

    let out = std::process::Command::new(support::airlock_bin())
        .args(["--data-dir"])
        .arg(dir.path().join("data"))
        .args([
            "plugin",
            "run",
            "builtin:standard",
            "--stage",
            "naming",
            "--plugin-config",
            r#"{"style":"fancy"}"#,
            "--input",
        ])
        .arg(&input)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("builtin:standard") && err.contains("style"),
        "{err}"
    );
}
