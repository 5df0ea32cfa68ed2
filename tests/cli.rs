//! The `airlock` binary end to end: error codes and exit status with `--json` (the bundled
//! demo server as a real child process), the `airlock demo` walkthrough,
//! `airlock plugin run` replaying a stage offline, and the embedding example.

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

fn airlock(data: &std::path::Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(support::airlock_bin())
        .arg("--data-dir")
        .arg(data)
        .args(args)
        .output()
        .unwrap()
}

/// A policy team's golden test: `plugin run --expect FILE` passes when the replay gives
/// exactly the recorded output (a failure included), and otherwise lists each
/// difference by JSON pointer and exits 1.
#[test]
fn plugin_run_checks_a_replay_against_a_golden_file() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let input = dir.path().join("call.json");
    std::fs::write(
        &input,
        serde_json::json!({
            "result": {"content": [{"type": "text", "text": "token=sekrit-value-42 and more"}]},
            "secrets": [{"name": "API_TOKEN", "value": "sekrit-value-42"}]
        })
        .to_string(),
    )
    .unwrap();
    let path = |p: &std::path::Path| p.to_str().unwrap().to_string();
    let (input_arg, golden) = (path(&input), dir.path().join("expected.json"));
    let run = |extra: &[&str]| {
        let mut args = vec![
            "plugin",
            "run",
            "builtin:standard",
            "--stage",
            "redaction",
            "--input",
            &input_arg,
        ];
        args.extend_from_slice(extra);
        airlock(&data, &args)
    };
    // Record the golden output, then check against it.
    let recorded = run(&[]);
    assert!(recorded.status.success());
    std::fs::write(&golden, &recorded.stdout).unwrap();
    let golden_arg = path(&golden);
    let out = run(&["--expect", &golden_arg]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("matches"));

    // The policy changes (a new pattern): the difference is named where it is.
    let out = run(&[
        "--plugin-config",
        r#"{"patterns": [{"name": "more", "regex": "more"}]}"#,
        "--expect",
        &golden_arg,
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("/result/content/0/text") && err.contains("/marks"),
        "{err}"
    );
    assert!(err.contains("[REDACTED:pattern:more]"), "{err}");

    // A recorded failure is a golden output too.
    std::fs::write(
        &golden,
        serde_json::json!({"ok": false, "error": "adapter_error", "message": "x"}).to_string(),
    )
    .unwrap();
    let out = run(&["--plugin-config", r#"{"nope": 1}"#, "--expect", &golden_arg]);
    assert_eq!(out.status.code(), Some(1), "only the message differs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/message") && !err.contains("/error"), "{err}");
}

/// `plugin check` says what a config needs to pin a plugin (contract, stages, imports,
/// size, sha256); a pinned plugin loads when the digest matches and is refused, naming
/// both digests, when it does not.
#[test]
fn plugins_can_be_checked_and_pinned_by_digest() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let out = airlock(&data, &["--json", "plugin", "check", "builtin:text-only"]);
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["contract"], "0.2.0", "{v}");
    assert_eq!(v["stages"], serde_json::json!(["content"]), "{v}");
    assert!(v["size"].as_u64().unwrap() > 1000, "{v}");
    let sha = v["sha256"].as_str().unwrap().to_string();
    assert_eq!(sha.len(), 64);
    let imports = v["imports"].as_array().unwrap();
    assert!(
        imports
            .iter()
            .all(|i| i.as_str().unwrap().starts_with("wasi:")
                || i.as_str().unwrap().starts_with("airlock:adapter/")),
        "{v}"
    );
    let text = airlock(&data, &["plugin", "check", "builtin:text-only"]);
    assert!(String::from_utf8_lossy(&text.stdout).contains(&format!("sha256    {sha}")));

    let wrong = "0".repeat(64);
    for (pin, works) in [(sha.as_str(), true), (wrong.as_str(), false)] {
        let ws = support::demo_workspace(&format!(
            "adapters = {{ content = {{ path = \"builtin:text-only\", sha256 = \"{pin}\" }} }}"
        ));
        let out = ws.run(&["--json", "status"], &[("DEMO_TOKEN_FOR_TEST", TOKEN)]);
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if works {
            assert!(!all.contains("pins"), "{all}");
            let (call, _) = ws.json(
                &["call", "mcp__demo__echo", "--args", r#"{"text":"hi"}"#],
                &[("DEMO_TOKEN_FOR_TEST", TOKEN)],
            );
            assert_eq!(call["ok"], true, "{call}");
        } else {
            assert!(
                all.contains(&sha) && all.contains(&wrong) && all.contains("pins"),
                "{all}"
            );
        }
    }
    // A malformed pin is a config error naming the field.
    let ws = support::demo_workspace(
        "adapters = { content = { path = \"builtin:text-only\", sha256 = \"abc\" } }",
    );
    let out = ws.run(&["status"], &[("DEMO_TOKEN_FOR_TEST", TOKEN)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("adapters.content") && err.contains("64 hex digits"),
        "{err}"
    );
}

/// The embedding example (`host/examples/embed.rs`, shown in the README) runs as
/// written: it starts Airlock on the demo server, lists its tools, calls one whose result
/// outgrows the preview, pages the rest back whole, and closes.
#[test]
fn the_embedding_example_runs() {
    let out = std::process::Command::new(support::example_binary("embed"))
        .env("AIRLOCK_CONFIG", "/nonexistent/airlock.toml")
        .output()
        .expect("run the embed example");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("service demo: connected"), "{stdout}");
    assert!(stdout.contains("tool mcp__demo__echo (echo)"), "{stdout}");
    assert!(
        stdout
            .contains("called mcp__demo__echo: 98304 bytes, preview 49152 bytes, complete: false"),
        "{stdout}"
    );
    assert!(
        stdout.contains("paged back 98304 bytes: same text: true"),
        "{stdout}"
    );
}
