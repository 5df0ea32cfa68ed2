//! Real servers written with the Python MCP SDK (FastMCP), over real pipes: the catalog
//! with colliding and over-long names, every content block type through both bundled
//! plugins, a secret echoed by the server redacted and marked, the child's environment,
//! process cleanup, and failing servers isolated from working ones.

mod support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use airlock_host::{Airlock, ErrorCode, ServiceStatus};
use serde_json::{Value, json};
use support::{Workspace, python, python_fixture_entry, python_server, toml_str};

const SECRET: &str = "s3cr3t-fixture-token-9f8e7d6c";

fn secret_entry(name: &str, extra: &str) -> String {
    python_fixture_entry(
        name,
        &format!("env = {{ SERVICE_TOKEN = {} }}\n{extra}", toml_str(SECRET)),
    )
}

#[tokio::test]
async fn catalog_names_are_valid_unique_and_keep_raw_names() {
    let ws = Workspace::new(&secret_entry("fx", ""));
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let tools = airlock.tools();
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
    let out = airlock.call(&long.name, json!({}), None).await.unwrap();
    assert_eq!(out.preview, "long");
    let out = airlock.call(&dot.name, json!({}), None).await.unwrap();
    assert_eq!(out.preview, "dot");
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

#[tokio::test]
async fn a_secret_echoed_by_the_server_is_redacted_marked_and_never_stored() {
    let ws = Workspace::new(&secret_entry("fx", ""));
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let out = airlock
        .call("mcp__fx__leak_secret", json!({}), None)
        .await
        .unwrap();
    assert!(!out.preview.contains(SECRET));
    assert!(
        out.preview.contains("[REDACTED:secret:SERVICE_TOKEN]"),
        "{}",
        out.preview
    );
    assert!(out.retained.redacted);
    assert_eq!(out.redactions[0].rule, "secret:SERVICE_TOKEN");
    assert_eq!(out.redactions[0].location, "content[0]");

    let out = airlock
        .call("mcp__fx__structured_secret", json!({}), None)
        .await
        .unwrap();
    let sc = out.structured_content.clone().unwrap();
    assert_eq!(sc["token"], "[REDACTED:secret:SERVICE_TOKEN]");
    assert!(
        out.redactions
            .iter()
            .any(|r| r.location == "structuredContent")
    );
    assert!(
        !serde_json::to_string(&out.content)
            .unwrap()
            .contains(SECRET)
    );

    // A provider-shaped token the server prints is caught by the built-in patterns.
    let gh = format!("ghp_{}", "A".repeat(36));
    let out = airlock
        .call(
            "mcp__fx__echo",
            json!({"text": format!("token {gh} here")}),
            None,
        )
        .await
        .unwrap();
    assert_eq!(out.preview, "token [REDACTED:pattern:github_token] here");
    airlock.close().await;

    for file in support::files_under(&ws.data()) {
        let bytes = std::fs::read(&file).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            !text.contains(SECRET) && !text.contains(&gh),
            "secret stored in {}",
            file.display()
        );
    }
}

#[tokio::test]
async fn configured_patterns_extend_redaction() {
    let ws = Workspace::new(&secret_entry(
        "fx",
        "adapter_config = { redaction = { patterns = [\"acme_[a-z0-9]{8}\"] } }",
    ));
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let out = airlock
        .call("mcp__fx__echo", json!({"text": "key acme_abcd1234!"}), None)
        .await
        .unwrap();
    assert_eq!(out.preview, "key [REDACTED:pattern:custom1]!");
    airlock.close().await;

    let bad = Workspace::new(&secret_entry(
        "fx",
        "adapter_config = { redaction = { patterns = [\"(unclosed\"] } }",
    ));
    let airlock = Airlock::start(bad.load(), bad.options()).await.unwrap();
    match &airlock.status()[0].status {
        ServiceStatus::Failed { reason } => assert!(
            reason.contains("patterns[0]") && reason.contains("builtin:standard"),
            "{reason}"
        ),
        other => panic!("expected a rejected config, got {other:?}"),
    }
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
async fn no_process_survives_close_including_grandchildren() {
    let ws = Workspace::new(&secret_entry("fx", ""));
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let out = airlock
        .call("mcp__fx__spawn_grandchild", json!({}), None)
        .await
        .unwrap();
    let grandchild: u32 = out.preview.trim().parse().unwrap();
    assert!(
        !support::process_gone(grandchild),
        "the grandchild runs while the session is open"
    );
    airlock.close().await;
    let deadline = Instant::now() + Duration::from_secs(5);
    while !support::process_gone(grandchild) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        support::process_gone(grandchild),
        "grandchild {grandchild} survived close"
    );
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
        .call("mcp__good__echo", json!({"text": "still here"}), None)
        .await
        .unwrap();
    assert_eq!(out.preview, "still here");
    let err = airlock
        .call("mcp__missing__echo", json!({}), None)
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::UnknownTool);
    airlock.close().await;
}

#[tokio::test]
async fn a_slow_tool_times_out_with_the_timeout_code() {
    let ws = Workspace::new(&secret_entry("fx", ""));
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    // big_text with a huge size takes a while in Python; 10 ms is never enough.
    let err = airlock
        .call(
            "mcp__fx__big_text",
            json!({"size": 50_000_000}),
            Some(Duration::from_millis(10)),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::Timeout);
    assert!(err.message.contains("cancellation"), "{}", err.message);
    airlock.close().await;
}

/// A credential passed in `args` through a variable (`--api-token=${ARG_API_TOKEN}`) is
/// a known secret too: echoed back by the server, it is redacted.
#[tokio::test]
async fn a_credential_expanded_into_args_is_a_known_secret() {
    const ARG_SECRET: &str = "arg-secret-77c0ffee";
    let text = format!(
        "[mcp_servers.fx]\ncommand = {}\nargs = [{}, \"--api-token=${{ARG_API_TOKEN}}\"]\n",
        toml_str(python().display().to_string()),
        toml_str(python_server("fixture_server.py").display().to_string())
    );
    let env = |name: &str| {
        (name == "ARG_API_TOKEN")
            .then(|| ARG_SECRET.to_string())
            .or_else(|| airlock_host::config::process_env(name))
    };
    let config =
        airlock_host::config::Config::from_str(std::path::Path::new("args.toml"), &text, &env)
            .unwrap();
    let ws = Workspace::new("");
    let airlock = Airlock::start(config, ws.options()).await.unwrap();
    let out = airlock
        .call(
            "mcp__fx__echo",
            json!({"text": format!("the token is {ARG_SECRET}")}),
            None,
        )
        .await
        .unwrap();
    assert!(!out.preview.contains(ARG_SECRET), "{}", out.preview);
    assert!(out.retained.redacted);
    airlock.close().await;
}
