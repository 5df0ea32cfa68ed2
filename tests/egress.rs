//! The one egress rule, proven path by path: a real server (`leaky_server.py`) puts its
//! credential into a tool description, a JSON-RPC error, progress and log messages,
//! resource contents and descriptions, prompt messages and its instructions; nothing of
//! it comes out of Airlock — not through the CLI, the library, the event stream, the log
//! at `AIRLOCK_LOG=trace`, the registry, or any file under the data directory. A value
//! matching a configured pattern is redacted from resources and prompts too.

mod support;

use std::time::Duration;

use airlock_host::{Airlock, CallOptions, Event};
use serde_json::{Value, json};
use support::{Workspace, python, python_server, toml_str};

const TOKEN: &str = "leaky-token-9c41e7a2d05b";
const PATTERNED: &str = "acme_0123456789abcdef0123456789abcdef";

/// The leaky server (with a configured pattern) and the raw server, which answers
/// `refuse` with a JSON-RPC error naming the credential.
fn leaky_entry(name: &str) -> String {
    format!(
        "[mcp_servers.{name}]\ncommand = {}\nargs = [{}]\nenv = {{ SERVICE_TOKEN = {} }}\n\
         adapter_config = {{ redaction = {{ patterns = [\"acme_[a-z0-9]{{32}}\"] }} }}\n\n\
         [mcp_servers.raw]\ncommand = {}\nargs = [{}]\nenv = {{ SERVICE_TOKEN = {} }}\n",
        toml_str(python().display().to_string()),
        toml_str(python_server("leaky_server.py").display().to_string()),
        toml_str(TOKEN),
        toml_str(python().display().to_string()),
        toml_str(python_server("raw_server.py").display().to_string()),
        toml_str(TOKEN),
    )
}

/// The last line of stdout as JSON (the result after `--events` lines).
fn last_json(out: &std::process::Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.lines().last().unwrap_or("")).unwrap_or_else(|e| {
        panic!(
            "no JSON result ({e}):\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Asserts `text` holds neither the credential nor the patterned value.
fn clean(what: &str, text: &str) {
    assert!(
        !text.contains(TOKEN),
        "{what} leaked the credential:\n{text}"
    );
    assert!(
        !text.contains(PATTERNED),
        "{what} leaked the patterned value:\n{text}"
    );
}

#[test]
fn nothing_leaks_through_the_cli_the_log_or_the_data_directory() {
    let ws = Workspace::new(&leaky_entry("leaky"));
    let trace = [("AIRLOCK_LOG", "trace")];

    let (tools, out) = ws.json(&["tools"], &trace);
    clean("airlock tools", &tools.to_string());
    clean(
        "the trace log of airlock tools",
        &String::from_utf8_lossy(&out.stderr),
    );
    let lookup = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "mcp__leaky__lookup")
        .unwrap();
    let description = lookup["description"].as_str().unwrap();
    assert!(description.contains("[REDACTED:secret:"), "{description}");
    assert!(description.contains("[REDACTED:pattern:"), "{description}");

    for tool in ["mcp__raw__refuse", "mcp__leaky__refuse"] {
        let (refused, out) = ws.json(&["call", tool], &trace);
        assert_eq!(refused["ok"], false, "{refused}");
        assert_eq!(refused["error"], "tool_error", "{refused}");
        clean("an error's message", &refused.to_string());
        assert!(
            refused["message"].as_str().unwrap().contains("[REDACTED"),
            "{refused}"
        );
        clean(
            "the trace log of a refused call",
            &String::from_utf8_lossy(&out.stderr),
        );
    }

    let out = ws.run(&["--json", "call", "mcp__leaky__noisy", "--events"], &trace);
    let noisy = last_json(&out);
    assert_eq!(noisy["ok"], true, "{noisy}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    clean("progress events and the result", &noisy.to_string());
    clean("progress and server logs at trace level", &stderr);
    assert!(
        stderr.contains("server log"),
        "the server's log reaches the log: {stderr}"
    );
    let events = String::from_utf8_lossy(&out.stdout);
    clean("the event stream", &events);
    assert!(events.contains("\"progress\""), "{events}");

    for args in [
        vec!["resources"],
        vec!["read-resource", "leaky", "leaky://config"],
        vec!["prompts"],
        vec![
            "get-prompt",
            "leaky",
            "greet",
            "--args",
            "{\"name\": \"Ada\"}",
        ],
        vec!["status"],
    ] {
        let (value, out) = ws.json(&args, &trace);
        assert!(out.status.success(), "{args:?}: {value}");
        clean(&format!("airlock {}", args.join(" ")), &value.to_string());
        clean(
            &format!("the trace log of airlock {}", args.join(" ")),
            &String::from_utf8_lossy(&out.stderr),
        );
    }
    let (read, _) = ws.json(&["read-resource", "leaky", "leaky://config"], &[]);
    let text = read["contents"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("[REDACTED:secret:") && text.contains("[REDACTED:pattern:"),
        "{text}"
    );

    for file in support::files_under(&ws.data()) {
        let Some(bytes) = support::file_bytes(&file) else {
            continue;
        };
        clean(
            &format!("{}", file.display()),
            &String::from_utf8_lossy(&bytes),
        );
    }
}

/// `--log-format json` (and `AIRLOCK_LOG_FORMAT=json`): one JSON object per line, and
/// the same scrubber: a credential holding a quote and a backslash, which a JSON string
/// (or a `Debug` field) writes escaped, is caught in that form too.
#[test]
fn json_logs_are_one_object_per_line_and_carry_no_secret() {
    const ODD: &str = "odd\"token\\7f3c91e2";
    let ws = Workspace::new(&format!(
        "[mcp_servers.leaky]\ncommand = {}\nargs = [{}]\nenv = {{ SERVICE_TOKEN = {} }}\n",
        toml_str(python().display().to_string()),
        toml_str(python_server("leaky_server.py").display().to_string()),
        toml_str(ODD),
    ));
    let escaped = serde_json::to_string(ODD).unwrap();
    let escaped = &escaped[1..escaped.len() - 1];
    for (args, env) in [
        (
            vec![
                "--log-format",
                "json",
                "--json",
                "call",
                "mcp__leaky__noisy",
            ],
            vec![("AIRLOCK_LOG", "trace")],
        ),
        (
            vec!["--json", "call", "mcp__leaky__noisy"],
            vec![("AIRLOCK_LOG", "trace"), ("AIRLOCK_LOG_FORMAT", "json")],
        ),
    ] {
        let out = ws.run(&args, &env);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        let mut records = 0;
        for line in stderr.lines().filter(|l| !l.trim().is_empty()) {
            let record: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("not a JSON log record ({e}): {line}"));
            assert!(
                record["level"].is_string() && record["fields"].is_object(),
                "{line}"
            );
            records += 1;
        }
        assert!(records > 0, "nothing was logged at trace level");
        assert!(
            stderr.contains("log line carrying [REDACTED"),
            "the server's log reaches the log, redacted: {stderr}"
        );
        for form in [ODD, escaped] {
            assert!(!stderr.contains(form), "the log leaked {form:?}:\n{stderr}");
        }
    }
}

#[test]
fn a_tested_catalog_is_stored_redacted() {
    let ws = Workspace::new("");
    let out = ws.run(
        &[
            "servers",
            "add",
            "leaky",
            "--env",
            &format!("SERVICE_TOKEN={TOKEN}"),
            "--",
            &python().display().to_string(),
            &python_server("leaky_server.py").display().to_string(),
        ],
        &[],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // No pattern is configured for this one: the credential is what must not leak.
    let no_token = |what: &str, text: &str| {
        assert!(
            !text.contains(TOKEN),
            "{what} leaked the credential:\n{text}"
        )
    };
    let (tested, out) = ws.json(&["servers", "test", "leaky"], &[("AIRLOCK_LOG", "trace")]);
    assert!(out.status.success(), "{tested}");
    no_token("airlock servers test", &tested.to_string());
    no_token("its trace log", &String::from_utf8_lossy(&out.stderr));
    let (tools, _) = ws.json(&["tools"], &[]);
    no_token("the tools from the tested catalog", &tools.to_string());
    for file in support::files_under(&ws.data()) {
        if file.to_string_lossy().contains("/secrets/") {
            continue; // the 0600 secret store itself
        }
        let Some(bytes) = support::file_bytes(&file) else {
            continue;
        };
        no_token(
            &format!("{}", file.display()),
            &String::from_utf8_lossy(&bytes),
        );
    }
}

#[tokio::test]
async fn the_library_redacts_progress_errors_resources_and_prompts() {
    let ws = Workspace::new(&leaky_entry("leaky"));
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let mut events = airlock.events();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let out = airlock
        .calls()
        .call_with(
            "mcp__leaky__noisy",
            json!({}),
            CallOptions {
                progress: Some(tx),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(out.preview, "noisy done");
    let mut messages = Vec::new();
    while let Ok(update) = rx.try_recv() {
        messages.extend(update.message);
    }
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(messages[0].contains("[REDACTED:secret:"), "{messages:?}");
    clean("progress messages", &messages.join("\n"));
    tokio::time::sleep(Duration::from_millis(50)).await;
    while let Ok(event) = events.try_recv() {
        if let Event::Progress { message, .. } = &event {
            clean("a progress event", message.as_deref().unwrap_or(""));
        }
    }

    let err = airlock
        .calls()
        .call("mcp__raw__refuse", json!({}), None)
        .await
        .unwrap_err();
    clean("a JSON-RPC error", &err.message);
    let refused = airlock
        .calls()
        .call("mcp__leaky__refuse", json!({}), None)
        .await
        .unwrap();
    assert!(refused.is_error);
    clean("an isError result", &refused.preview);

    let listed = airlock
        .resources()
        .list_resources("default", None)
        .await
        .unwrap();
    clean("resources/list", &Value::Array(listed).to_string());
    let read = airlock
        .resources()
        .read_resource("default", "leaky", "leaky://config")
        .await
        .unwrap();
    clean("resources/read", &read.to_string());
    let prompt = airlock
        .resources()
        .get_prompt("default", "leaky", "greet", json!({"name": "Ada"}))
        .await
        .unwrap();
    clean("prompts/get", &prompt.to_string());
    for tool in airlock.catalog().tools() {
        clean("the catalog", &serde_json::to_string(&tool).unwrap());
    }
    for report in airlock.services().status() {
        clean("status", &serde_json::to_string(&report).unwrap());
    }
    airlock.close().await;
}
