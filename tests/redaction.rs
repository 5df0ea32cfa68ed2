//! Redaction: a configured credential the server echoes back is redacted, marked and
//! never stored (the demo server through the `airlock` binary, with digest, size and
//! paging of the redacted text; a Python SDK server through the library, in text and
//! `structuredContent`), built-in provider patterns, configured patterns (a bad one is
//! rejected), and a credential expanded into `args` is a known secret too.

mod support;

use airlock_host::{Airlock, ServiceStatus};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use support::{
    DEMO_TOKEN as TOKEN, FIXTURE_SECRET as SECRET, Workspace, demo_workspace, python,
    python_server, secret_entry, toml_str,
};

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
        let Some(bytes) = support::file_bytes(&file) else {
            continue;
        };
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

#[tokio::test]
async fn a_secret_echoed_by_the_server_is_redacted_marked_and_never_stored() {
    let ws = Workspace::new(&secret_entry("fx", ""));
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let out = airlock
        .calls()
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
        .calls()
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
        .calls()
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
        let Some(bytes) = support::file_bytes(&file) else {
            continue;
        };
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
        .calls()
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
    match &airlock.services().status()[0].status {
        ServiceStatus::Failed { reason } => assert!(
            reason.contains("patterns[0]") && reason.contains("builtin:standard"),
            "{reason}"
        ),
        other => panic!("expected a rejected config, got {other:?}"),
    }
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
        .calls()
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
