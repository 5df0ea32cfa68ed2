//! Tests of file parsing: unparsable files.

use super::*;

// --- Rule 6: malformed files ---

#[test]
fn unparsable_files_are_one_problem_each_and_quote_no_secrets() {
    let home = tempfile::tempdir().unwrap();
    let json = put(
        home.path(),
        ".cursor/mcp.json",
        fixture!("malformed.invalid.json"),
    );
    let toml = put(
        home.path(),
        ".codex/config.toml",
        fixture!("malformed.invalid.toml"),
    );
    put(
        home.path(),
        ".gemini/settings.json",
        r#"{"mcpServers": {"fine": {"command": "x"}}}"#,
    );
    let out = scan_in(home.path(), None, &no_env, None);
    assert_eq!(names(&out), ["fine"]);
    assert_eq!(out.files_read.len(), 3);
    assert!(out.files_read.contains(&json) && out.files_read.contains(&toml));
    assert_eq!(out.problems.len(), 2, "{:?}", out.problems);
    let cursor = &out.problems[0];
    assert_eq!(
        (cursor.client, &cursor.source, &cursor.entry),
        (Client::Cursor, &json, &None)
    );
    assert!(
        cursor.message.starts_with("invalid JSON: "),
        "{}",
        cursor.message
    );
    let codex = &out.problems[1];
    assert_eq!(
        (codex.client, &codex.source, &codex.entry),
        (Client::Codex, &toml, &None)
    );
    assert!(
        codex.message.starts_with("invalid TOML at line "),
        "{}",
        codex.message
    );
    for p in &out.problems {
        assert!(!p.to_string().contains("ghp_"), "{p}");
        assert!(!format!("{p:?}").contains("ghp_"), "{p:?}");
    }
}
