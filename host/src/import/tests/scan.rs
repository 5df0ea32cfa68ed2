//! Tests of the model and of `scan`: client names, masking and digests, files read, order.

use super::*;

// --- Clients ---

#[test]
fn client_names_parse_and_serialize() {
    for client in Client::ALL {
        assert_eq!(Client::parse(client.name()), Ok(client));
        assert_eq!(
            serde_json::to_string(&client).unwrap(),
            format!("\"{}\"", client.name())
        );
    }
    assert_eq!(Client::parse(" Muse-Code "), Ok(Client::MuseCode));
    let err = Client::parse("zed").unwrap_err().to_string();
    assert!(
        err.contains("claude-code, cursor, codex, gemini, vscode, muse-code"),
        "{err}"
    );
}

#[test]
fn missing_files_are_skipped_silently() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let out = scan_in(home.path(), Some(ws.path()), &no_env, None);
    assert!(out.candidates.is_empty());
    assert!(out.problems.is_empty());
    assert!(out.files_read.is_empty());
}

// --- Rule 8: secrets never leak; masking ---

#[test]
fn secrets_stay_out_of_messages_and_debug_and_are_masked() {
    let home = tempfile::tempdir().unwrap();
    put(
        home.path(),
        ".cursor/mcp.json",
        r#"{"mcpServers": {
            "leaky": {"command": "srv", "args": ["--token", "Sup3rSecretArg"], "env": {
                "GITHUB_TOKEN": "ghp_SECRETvalue0123456789abcd", "EMPTY_TOKEN": "${UNSET_SECRET_VAR}", "MODE": "fast"}},
            "bad": {"command": "srv", "env": {"API_TOKEN": "Sup3rSecretEnv", "N": 1}}
        }}"#,
    );
    let out = scan_in(home.path(), None, &no_env, None);
    let shown = format!(
        "{out:?}{}",
        out.problems
            .iter()
            .map(|p| p.to_string())
            .collect::<String>()
    );
    for secret in ["Sup3rSecret", "ghp_SECRETvalue"] {
        assert!(!shown.contains(secret), "{secret} leaked: {shown}");
    }
    let leaky = find(&out, "leaky");
    assert_eq!(
        env(leaky)["GITHUB_TOKEN"],
        val("ghp_SECRETvalue0123456789abcd", true)
    );
    let masked = leaky.masked();
    assert_eq!(
        env(&masked),
        &values(&[
            ("EMPTY_TOKEN", "", true),
            ("GITHUB_TOKEN", "••••••", true),
            ("MODE", "fast", false),
        ])
    );
    assert_eq!(
        env(leaky)["GITHUB_TOKEN"].value,
        "ghp_SECRETvalue0123456789abcd",
        "masking must not touch the original"
    );
    assert_ne!(masked.digest(), leaky.digest());
}

#[test]
fn digest_is_stable_and_covers_secret_values() {
    let home = tempfile::tempdir().unwrap();
    let write = |token: &str| {
        put(
            home.path(),
            ".cursor/mcp.json",
            &format!(
                r#"{{"mcpServers": {{"s": {{"command": "x", "env": {{"API_TOKEN": "{token}"}}}}}}}}"#
            ),
        );
        scan_in(home.path(), None, &no_env, None).candidates[0].digest()
    };
    let first = write("one");
    assert_eq!(first.len(), 64);
    assert!(first.bytes().all(|b| b.is_ascii_hexdigit()));
    assert_eq!(write("one"), first);
    assert_ne!(write("two"), first);
}

// --- Rule 9: order ---

#[test]
fn order_is_client_then_user_before_workspace_then_key() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let entry = |names: &[&str]| {
        names
            .iter()
            .map(|n| format!(r#""{n}": {{"command": "x"}}"#))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let h = home.path();
    let w = ws.path();
    put(
        h,
        ".claude.json",
        &format!(r#"{{"mcpServers": {{{}}}}}"#, entry(&["b", "a"])),
    );
    put(
        w,
        ".mcp.json",
        &format!(r#"{{"mcpServers": {{{}}}}}"#, entry(&["c"])),
    );
    put(
        h,
        ".cursor/mcp.json",
        &format!(r#"{{"mcpServers": {{{}}}}}"#, entry(&["z"])),
    );
    put(
        w,
        ".cursor/mcp.json",
        &format!(r#"{{"mcpServers": {{{}}}}}"#, entry(&["y"])),
    );
    put(
        h,
        ".codex/config.toml",
        "[mcp_servers.m]\ncommand = \"x\"\n",
    );
    put(
        h,
        ".gemini/settings.json",
        &format!(r#"{{"mcpServers": {{{}}}}}"#, entry(&["g"])),
    );
    put(
        w,
        ".vscode/mcp.json",
        &format!(r#"{{"servers": {{{}}}}}"#, entry(&["v"])),
    );
    put(
        h,
        ".muse/settings.json",
        &format!(r#"{{"mcpServers": {{{}}}}}"#, entry(&["u"])),
    );
    put(
        w,
        ".muse/settings.json",
        &format!(r#"{{"mcpServers": {{{}}}}}"#, entry(&["t"])),
    );

    let out = scan_in(h, Some(w), &no_env, None);
    assert!(out.problems.is_empty(), "{:?}", out.problems);
    assert_eq!(
        names(&out),
        ["a", "b", "c", "z", "y", "m", "g", "v", "u", "t"]
    );
    let clients: Vec<Client> = out.candidates.iter().map(|c| c.client).collect();
    use Client::*;
    assert_eq!(
        clients,
        [
            ClaudeCode, ClaudeCode, ClaudeCode, Cursor, Cursor, Codex, Gemini, Vscode, MuseCode,
            MuseCode
        ]
    );
    assert_eq!(out.files_read.len(), 9);

    let only = scan_in(h, Some(w), &no_env, Some(Client::Gemini));
    assert_eq!(names(&only), ["g"]);
    assert_eq!(only.files_read, [h.join(".gemini/settings.json")]);
}

#[test]
fn a_workspace_that_is_the_home_folder_is_read_once() {
    let home = tempfile::tempdir().unwrap();
    put(
        home.path(),
        ".cursor/mcp.json",
        r#"{"mcpServers": {"s": {"command": "x"}}}"#,
    );
    let out = scan_in(home.path(), Some(home.path()), &no_env, None);
    assert_eq!(names(&out), ["s"]);
    assert_eq!(out.files_read.len(), 1);
}
