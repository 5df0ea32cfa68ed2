//! Tests of name sanitizing and deduplication.

use super::*;
use crate::import::names::{sanitize_name, unique_name, valid_name};

// --- Rule 7: names ---

#[test]
fn names_are_sanitized_and_deduplicated() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let long = "a".repeat(70);
    put(
        home.path(),
        ".cursor/mcp.json",
        &format!(
            r#"{{"mcpServers": {{"my server!": {{"command": "x"}}, "ok_name-1": {{"command": "x"}}, "{long}": {{"command": "x"}}}}}}"#
        ),
    );
    put(
        ws.path(),
        ".cursor/mcp.json",
        r#"{"mcpServers": {"my_server_": {"command": "x"}, "ok_name-1": {"command": "x"}}}"#,
    );
    let out = scan_in(home.path(), Some(ws.path()), &no_env, None);
    let cut = "a".repeat(64);
    assert_eq!(
        names(&out),
        [
            cut.as_str(),
            "my_server_",
            "ok_name-1",
            "my_server_-2",
            "ok_name-1-2"
        ]
    );
    assert_eq!(find(&out, &cut).notes, [format!("renamed from {long:?}")]);
    assert_eq!(
        find(&out, "my_server_").notes,
        ["renamed from \"my server!\""]
    );
    assert!(find(&out, "ok_name-1").notes.is_empty());
    assert_eq!(
        find(&out, "my_server_-2").notes,
        [
            "renamed from \"my_server_\" to \"my_server_-2\": an earlier imported server already uses that name"
        ]
    );

    let taken: HashSet<String> = ["a", "a-2", cut.as_str()].map(String::from).into();
    assert_eq!(unique_name("a", &taken), "a-3");
    assert_eq!(unique_name("b", &taken), "b");
    let bumped = unique_name(&cut, &taken);
    assert_eq!(bumped, format!("{}-2", "a".repeat(62)));
    assert!(valid_name(&bumped));
    assert_eq!(sanitize_name(""), "server");
    assert_eq!(sanitize_name("héllo.world"), "h_llo_world");
}
