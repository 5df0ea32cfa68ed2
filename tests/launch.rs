//! Launching servers: the child process sees only the minimal environment (the reference
//! server-everything over stdio and a Python SDK server), a configured credential the
//! server echoes back is redacted, and servers that are missing, crash, hang or speak an
//! unsupported protocol version are reported without blocking the others.

mod support;

use std::time::{Duration, Instant};

use airlock_host::{Airlock, ErrorCode, ServiceStatus};
use serde_json::json;
use support::{
    Workspace, everything_workspace as workspace, python, python_fixture_entry, python_server,
    secret_entry, toml_str,
};

#[tokio::test]
async fn the_reference_server_sees_only_the_minimal_environment_and_secrets_are_redacted() {
    let ws = workspace("");
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let out = airlock
        .calls()
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

#[test]
fn the_child_sees_only_the_minimal_environment() {
    let ws = Workspace::new(&python_fixture_entry(
        "fx",
        "env = { EXTRA_SETTING = \"on\" }",
    ));
    let fake = "AKIAFAKEFAKEFAKEFAKE-not-for-children";
    let (v, out) = ws.json(
        &["call", "mcp__fx__env_names"],
        &[("FAKE_CLOUD_CREDENTIAL", fake), ("LANG", "C.UTF-8")],
    );
    assert!(out.status.success(), "{v}");
    let names: Vec<String> = serde_json::from_str(v["text"].as_str().unwrap()).unwrap();
    let allowed = [
        "PATH",
        "HOME",
        "USERPROFILE",
        "TMP",
        "TEMP",
        "TMPDIR",
        "SystemRoot",
        "LANG",
        "EXTRA_SETTING",
    ];
    // The Python runtime may add a few variables of its own (LC_CTYPE when it coerces
    // the C locale); nothing else of the host's may arrive.
    let python_own = ["LC_CTYPE"];
    for name in &names {
        assert!(
            allowed.contains(&name.as_str()) || python_own.contains(&name.as_str()),
            "unexpected variable {name} in {names:?}"
        );
    }
    assert!(names.contains(&"EXTRA_SETTING".to_string()) && names.contains(&"PATH".to_string()));
    assert!(!names.contains(&"FAKE_CLOUD_CREDENTIAL".to_string()));
}

#[tokio::test]
async fn failing_servers_are_reported_and_do_not_block_the_others() {
    let config = format!(
        "{}\n[mcp_servers.missing]\ncommand = \"definitely-not-installed-airlock-xyz\"\n\n[mcp_servers.crashes]\ncommand = {}\nargs = [\"-c\", \"import sys; print('boom: bad config', file=sys.stderr); sys.exit(3)\"]\n\n[mcp_servers.hangs]\ncommand = {}\nargs = [{}, \"hang\"]\nstartup_timeout_secs = 2\n\n[mcp_servers.oldproto]\ncommand = {}\nargs = [{}, \"bad-version\"]\n\n[mcp_servers.off]\ncommand = \"whatever\"\nenabled = false\n",
        secret_entry("good", ""),
        toml_str(python().display().to_string()),
        toml_str(python().display().to_string()),
        toml_str(python_server("raw_server.py").display().to_string()),
        toml_str(python().display().to_string()),
        toml_str(python_server("raw_server.py").display().to_string()),
    );
    let ws = Workspace::new(&config);
    let started = Instant::now();
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    assert!(
        // Bounded by the slowest healthy server, not by the hanging one (2 s timeout);
        // generous because Python start-up is slow on a loaded machine.
        started.elapsed() < Duration::from_secs(45),
        "a hanging server held startup for {:?}",
        started.elapsed()
    );
    let status: std::collections::BTreeMap<String, ServiceStatus> = airlock
        .services()
        .status()
        .into_iter()
        .map(|s| (s.service, s.status))
        .collect();
    assert!(
        matches!(status["good"], ServiceStatus::Connected { tools, .. } if tools > 5),
        "{status:?}"
    );
    assert_eq!(status["off"], ServiceStatus::Disabled);
    let reason = |name: &str| match &status[name] {
        ServiceStatus::Failed { reason } => reason.clone(),
        other => panic!("{name} should have failed, got {other:?}"),
    };
    assert!(
        reason("missing").contains("not found"),
        "{}",
        reason("missing")
    );
    assert!(
        reason("crashes").contains("boom: bad config"),
        "stderr is in the reason: {}",
        reason("crashes")
    );
    assert!(
        reason("hangs").contains("handshake within 2s"),
        "{}",
        reason("hangs")
    );
    let old = reason("oldproto");
    assert!(
        old.contains("1999-01-01") && old.contains("2025-11-25"),
        "{old}"
    );

    let out = airlock
        .calls()
        .call("mcp__good__echo", json!({"text": "still here"}), None)
        .await
        .unwrap();
    assert_eq!(out.preview, "still here");
    let err = airlock
        .calls()
        .call("mcp__missing__echo", json!({}), None)
        .await
        .unwrap_err();
    // The failed service's tool is not "unknown": the call says why it cannot run.
    assert_eq!(err.code, ErrorCode::ServiceUnavailable, "{err}");
    assert!(err.message.contains("not found"), "{err}");
    let err = airlock
        .calls()
        .call("mcp__nosuchservice__echo", json!({}), None)
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::UnknownTool);
    airlock.close().await;
}
