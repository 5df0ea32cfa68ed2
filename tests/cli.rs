//! The `airlock` binary end to end on the bundled demo server (a real child process):
//! `--json` output shapes, exit codes, error codes, paging, redaction, config errors, and
//! swapping the content plugin by config alone.

mod support;

use serde_json::Value;
use sha2::{Digest, Sha256};
use support::{Workspace, demo_entry};

const TOKEN: &str = "tok_live_0123456789abcdef";

fn demo_workspace(extra: &str) -> Workspace {
    Workspace::new(&demo_entry(
        "demo",
        &format!("env = {{ DEMO_API_TOKEN = \"${{DEMO_TOKEN_FOR_TEST}}\" }}\n{extra}"),
    ))
}

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

#[test]
fn call_redacts_the_echoed_secret_and_marks_it() {
    let ws = demo_workspace("");
    let (v, out) = ws.json(
        &["call", "mcp__demo__show_config"],
        &[("DEMO_TOKEN_FOR_TEST", TOKEN)],
    );
    assert!(out.status.success(), "{v}");
    assert_eq!(v["ok"], true);
    assert_eq!(v["redacted"], true);
    let text = v["text"].as_str().unwrap();
    assert!(!text.contains(TOKEN), "secret leaked: {text}");
    assert!(text.contains("[REDACTED:secret:DEMO_API_TOKEN]"), "{text}");
    assert_eq!(v["redactions"][0]["location"], "content[0]");
    assert_eq!(v["redactions"][0]["rule"], "secret:DEMO_API_TOKEN");
    // The digest and size are of the retained (redacted) text, which the preview is whole.
    assert_eq!(v["complete"], true);
    assert_eq!(v["size"].as_u64().unwrap() as usize, text.len());
    assert_eq!(
        v["digest"].as_str().unwrap(),
        format!("sha256:{}", hex(&Sha256::digest(text.as_bytes())))
    );
    // The stored bytes contain no secret either.
    for file in support::files_under(&ws.data()) {
        let bytes = std::fs::read(&file).unwrap();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(TOKEN),
            "secret in {}",
            file.display()
        );
    }
    // Paging the retained output returns the same text.
    let id = v["output_id"].as_str().unwrap();
    let (page, out) = ws.json(&["output", "demo", id], &[]);
    assert!(out.status.success());
    assert_eq!(page["text"], text);
    assert_eq!(page["eof"], true);
    assert_eq!(page["next_offset"], Value::Null);
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

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

#[test]
fn config_errors_name_the_server_the_file_and_the_variable() {
    let ws = demo_workspace("");
    let out = ws.run(&["tools"], &[]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("\"demo\"")
            && err.contains("DEMO_TOKEN_FOR_TEST")
            && err.contains("airlock.toml"),
        "{err}"
    );

    let bad = Workspace::new("[mcp_servers.weird]\ntype = \"carrier-pigeon\"\ncommand = \"x\"\n");
    let out = bad.run(&["tools"], &[]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("\"weird\"")
            && err.contains("\"type\" must be \"stdio\" or \"http\"")
            && err.contains("airlock.toml"),
        "{err}"
    );

    let relative = Workspace::new("[mcp_servers.rel]\ncommand = \"x\"\ncwd = \"relative/dir\"\n");
    let err = String::from_utf8_lossy(&relative.run(&["tools"], &[]).stderr).to_string();
    assert!(err.contains("\"rel\"") && err.contains("absolute"), "{err}");

    let unknown = Workspace::new("[mcp_servers.u]\ncommand = \"x\"\ncomand = \"typo\"\n");
    let err = String::from_utf8_lossy(&unknown.run(&["tools"], &[]).stderr).to_string();
    assert!(err.contains("unknown field \"comand\""), "{err}");

    let syntax = Workspace::new("[mcp_servers.u\n");
    let err = String::from_utf8_lossy(&syntax.run(&["tools"], &[]).stderr).to_string();
    assert!(
        err.contains("not valid TOML") && err.contains("airlock.toml"),
        "{err}"
    );
}

#[test]
fn json_config_files_are_read_too() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("servers.json");
    let entry = serde_json::json!({"mcpServers": {"demo": {"command": support::airlock_bin(), "args": ["demo-server"]}}});
    std::fs::write(&config, entry.to_string()).unwrap();
    let out = std::process::Command::new(support::airlock_bin())
        .args(["--json", "--data-dir"])
        .arg(dir.path().join("data"))
        .arg("--config")
        .arg(&config)
        .args([
            "call",
            "mcp__demo__echo",
            "--args",
            r#"{"text":"from json"}"#,
        ])
        .env("AIRLOCK_CONFIG", dir.path().join("none.toml"))
        .current_dir(dir.path())
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["text"], "from json", "{v}");
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
