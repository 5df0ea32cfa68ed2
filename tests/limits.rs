//! The limits, crossed on purpose against real hostile servers: a catalog of 10,001
//! tools and one over 32 MiB; answers nested too deep, not UTF-8, or over the message
//! limit (each fails its call at once with a typed error, and the session keeps working);
//! and exports of more than 512 parts. Each refusal names the limit.

mod support;

use std::time::{Duration, Instant};

use airlock_host::{Airlock, ErrorCode, ServiceStatus};
use serde_json::json;
use support::{Workspace, python, python_server, toml_str};

fn raw_entry(name: &str, mode: &str, extra: &str) -> String {
    format!(
        "[mcp_servers.{name}]\ncommand = {}\nargs = [{}, \"{mode}\"]\n{extra}\n",
        toml_str(python().display().to_string()),
        toml_str(python_server("raw_server.py").display().to_string()),
    )
}

fn failed_reason(airlock: &Airlock, service: &str) -> String {
    let report = airlock
        .services()
        .status()
        .into_iter()
        .find(|r| r.service == service)
        .unwrap();
    match report.status {
        ServiceStatus::Failed { reason } => reason,
        other => panic!("{service} should have failed, got {other:?}"),
    }
}

#[tokio::test]
async fn catalogs_over_10000_tools_or_32_mib_are_refused() {
    let ws = Workspace::new(&format!(
        "{}{}{}",
        raw_entry("many", "many-tools", ""),
        raw_entry("huge", "huge-catalog", ""),
        raw_entry("fine", "normal", ""),
    ));
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let many = failed_reason(&airlock, "many");
    assert!(
        many.contains("10001 tools") && many.contains("limit is 10000 tools"),
        "{many}"
    );
    let huge = failed_reason(&airlock, "huge");
    assert!(huge.contains("33554432 bytes"), "{huge}");
    assert!(
        airlock
            .catalog()
            .tools()
            .iter()
            .all(|t| t.service == "fine"),
        "nothing of the refused catalogs is offered"
    );
    assert!(!airlock.catalog().tools().is_empty());
    airlock.close().await;
}

#[tokio::test]
async fn unreadable_answers_fail_their_call_at_once_and_the_session_carries_on() {
    let ws = Workspace::new(&raw_entry(
        "raw",
        "normal",
        "tool_timeout_secs = 60\nenv = { RAW_OVERSIZE = \"42991616\" }",
    ));
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    for (tool, says) in [
        ("mcp__raw__deep", "nested deeper"),
        ("mcp__raw__bad_utf8", "not UTF-8"),
        ("mcp__raw__oversize", "40 MiB message limit"),
    ] {
        let started = Instant::now();
        let err = airlock
            .calls()
            .call(tool, json!({}), None)
            .await
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::ToolError, "{tool}: {err}");
        assert!(err.message.contains(says), "{tool}: {err}");
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{tool} failed at once, not at its timeout ({:?})",
            started.elapsed()
        );
        let pid = airlock.services().session_pid("default", "raw").await;
        let after = airlock
            .calls()
            .call("mcp__raw__exotic", json!({}), None)
            .await
            .unwrap();
        assert!(
            after.preview.contains("before"),
            "{tool}: the session still works"
        );
        assert_eq!(
            airlock.services().session_pid("default", "raw").await,
            pid,
            "{tool}: the same session carried on"
        );
    }
    airlock.close().await;
}

#[tokio::test]
async fn exports_are_parts_with_an_index_and_at_most_512_of_them() {
    let ws = Workspace::new(&format!(
        "[mcp_servers.fx]\ncommand = {}\nargs = [{}]\n",
        toml_str(python().display().to_string()),
        toml_str(python_server("fixture_server.py").display().to_string()),
    ));
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let out = airlock
        .calls()
        .call(
            "mcp__fx__big_text",
            json!({"size": 1200, "char": "é"}),
            None,
        )
        .await
        .unwrap();
    let id = out.retained.output_id.clone().unwrap();
    let folder = tempfile::tempdir().unwrap();

    let err = airlock
        .outputs()
        .export("default", "fx", &id, folder.path(), Some(4))
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidArguments);
    assert!(
        err.message.contains("600 parts") && err.message.contains("limit is 512"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_dir(folder.path()).unwrap().count(),
        0,
        "a refused export writes nothing"
    );

    let export = airlock
        .outputs()
        .export("default", "fx", &id, folder.path(), Some(7))
        .await
        .unwrap();
    assert_eq!(
        export.parts.len(),
        400,
        "7-byte parts hold 3 two-byte characters"
    );
    let mut joined = Vec::new();
    for part in &export.parts {
        let bytes = std::fs::read(folder.path().join(&part.file)).unwrap();
        assert_eq!(bytes.len(), part.size);
        assert_eq!(airlock_host::digest::sha256(&bytes), part.digest);
        joined.extend(bytes);
    }
    assert_eq!(String::from_utf8(joined).unwrap(), "é".repeat(1200));
    assert_eq!(export.digest, out.retained.digest);
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(export.index.unwrap()).unwrap()).unwrap();
    assert_eq!(index["parts"].as_array().unwrap().len(), 400);
    assert_eq!(index["parts"][0]["index"], 1);

    let whole = tempfile::tempdir().unwrap();
    let single = airlock
        .outputs()
        .export("default", "fx", &id, whole.path(), None)
        .await
        .unwrap();
    assert_eq!(single.parts.len(), 1);
    assert!(single.index.is_none());

    let denied = airlock
        .outputs()
        .export("someone-else", "fx", &id, whole.path(), None)
        .await
        .unwrap_err();
    assert_eq!(denied.code, ErrorCode::ServiceAccessDenied);
    airlock.close().await;
}

#[test]
fn the_cli_saves_an_output_and_refuses_too_many_parts() {
    let ws = Workspace::new(&format!(
        "[mcp_servers.fx]\ncommand = {}\nargs = [{}]\n",
        toml_str(python().display().to_string()),
        toml_str(python_server("fixture_server.py").display().to_string()),
    ));
    let (call, _) = ws.json(
        &["call", "mcp__fx__big_text", "--args", "{\"size\": 1000}"],
        &[],
    );
    let id = call["output_id"].as_str().unwrap();
    let dir = ws.dir.path().join("saved");
    let dir = dir.display().to_string();
    let (refused, out) = ws.json(
        &["output", "fx", id, "--save", &dir, "--part-size", "1"],
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        refused["message"].as_str().unwrap().contains("512"),
        "{refused}"
    );
    let (saved, out) = ws.json(
        &["output", "fx", id, "--save", &dir, "--part-size", "100"],
        &[],
    );
    assert!(out.status.success(), "{saved}");
    assert_eq!(saved["export"]["parts"].as_array().unwrap().len(), 10);
}

/// A 30 MiB result with a known secret every 4 KiB goes through the content and
/// redaction plugins, comes back with every occurrence redacted, is retained whole, and
/// pages back byte for byte.
#[tokio::test]
async fn a_30_mib_result_full_of_secrets_is_redacted_retained_and_pages_back_exactly() {
    const TOKEN: &str = "salted-secret-4f1c9a7e";
    const SIZE: usize = 30 << 20;
    let ws = Workspace::new(&raw_entry(
        "raw",
        "normal",
        &format!("tool_timeout_secs = 120\nenv = {{ SERVICE_TOKEN = \"{TOKEN}\" }}"),
    ));
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let out = airlock
        .calls()
        .call("mcp__raw__salted", json!({"size": SIZE}), None)
        .await
        .unwrap();
    assert!(!out.is_error);
    // What the server sent, and what must come back: each token replaced by its marker.
    let block: String = format!("{TOKEN} {}", "line of ordinary text\n".repeat(4096))
        .chars()
        .take(4096)
        .collect();
    let sent: String = block.repeat(SIZE / 4096 + 1).chars().take(SIZE).collect();
    let occurrences = sent.matches(TOKEN).count();
    assert_eq!(occurrences, SIZE / 4096);
    let expected = sent.replace(TOKEN, "[REDACTED:secret:SERVICE_TOKEN]");
    assert!(out.retained.redacted);
    assert_eq!(
        out.redactions
            .iter()
            .map(|r| r.count as usize)
            .sum::<usize>(),
        occurrences
    );
    let output_id = out
        .retained
        .output_id
        .clone()
        .expect("the result is retained");
    assert_eq!(out.retained.size, expected.len());
    assert_eq!(
        out.retained.digest,
        airlock_host::results::digest(expected.as_bytes())
    );

    let mut paged = String::with_capacity(expected.len());
    let mut offset = 0;
    loop {
        let page = airlock
            .outputs()
            .read("raw", &output_id, offset)
            .await
            .unwrap();
        paged.push_str(&page.text);
        match page.next_offset {
            Some(next) => offset = next,
            None => break,
        }
    }
    assert!(paged == expected, "the pages rejoin to the redacted text");
    assert!(!paged.contains(TOKEN));
    // Once on disk, it reads back the same.
    airlock.outputs().flush().await;
    let first = airlock.outputs().read("raw", &output_id, 0).await.unwrap();
    assert!(expected.starts_with(&first.text) && !first.text.is_empty());
    airlock.close().await;
}
