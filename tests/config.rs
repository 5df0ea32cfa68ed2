//! Config files through the `airlock` binary: errors name the server, the file and the
//! variable (unset variables, bad transport types, relative paths, unknown fields, TOML
//! syntax), and JSON config files (`mcpServers`) are read too.

mod support;

use serde_json::Value;
use support::{Workspace, demo_workspace};

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
