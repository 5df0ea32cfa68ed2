//! Tests of the entry normalizer: remote entries and their headers, disabled entries,
//! malformed entries.

use super::*;
use crate::import::references::Resolver;

#[test]
fn codex_bearer_token_env_var_becomes_a_withheld_authorization_header() {
    // The header Airlock would send…
    let vars = env_of(&[("REMOTE_TOKEN", "abc")]);
    let mut r = Resolver {
        env: &*vars,
        home: Path::new("/home/u"),
        workspace: None,
        repair: Vec::new(),
        notes: Vec::new(),
    };
    assert_eq!(
        r.imported("Authorization", "Bearer ${REMOTE_TOKEN}"),
        val("Bearer abc", true)
    );
    assert!(r.repair.is_empty());

    // …is a credential, so a remote entry arrives disabled without it.
    let home = tempfile::tempdir().unwrap();
    let codex_home = tempfile::tempdir().unwrap();
    let file = put(
        codex_home.path(),
        "config.toml",
        "[mcp_servers.remote]\nurl = \"https://example.com/mcp\"\nbearer_token_env_var = \"REMOTE_TOKEN\"\n",
    );
    let dir = codex_home.path().to_str().unwrap().to_string();
    let withheld = "credentials not imported: header Authorization (from bearer_token_env_var REMOTE_TOKEN); set it with `airlock servers edit remote --header ...`";

    let vars = env_of(&[("CODEX_HOME", dir.as_str()), ("REMOTE_TOKEN", "abc")]);
    let out = scan_in(home.path(), None, &*vars, None);
    assert_eq!(out.files_read, std::slice::from_ref(&file));
    let remote = find(&out, "remote");
    assert!(!remote.enabled);
    assert!(headers(remote).is_empty());
    assert_eq!(remote.repair, [withheld]);

    let vars = env_of(&[("CODEX_HOME", dir.as_str())]);
    let out = scan_in(home.path(), None, &*vars, None);
    assert_eq!(
        find(&out, "remote").repair,
        [
            "env REMOTE_TOKEN for Authorization is not set in Airlock's environment",
            withheld
        ]
    );
}

#[test]
fn remote_headers_resolved_from_env_references_are_withheld() {
    let home = tempfile::tempdir().unwrap();
    put(
        home.path(),
        ".cursor/mcp.json",
        r#"{"mcpServers": {"r": {"url": "https://r.example/mcp", "headers": {
            "X-Tenant": "${TENANT_ID}", "X-Client": "cursor"}}}}"#,
    );
    let vars = env_of(&[("TENANT_ID", "acme-tenant-42")]);
    let out = scan_in(home.path(), None, &*vars, None);
    let r = find(&out, "r");
    assert!(!r.enabled);
    assert_eq!(headers(r), &values(&[("X-Client", "cursor", false)]));
    assert_eq!(
        r.repair,
        [
            "credentials not imported: header X-Tenant; set it with `airlock servers edit r --header ...`"
        ]
    );
    assert!(!format!("{out:?}").contains("acme-tenant-42"));
}

// --- Rule 4: remote entries ---

#[test]
fn remote_entries_arrive_disabled_without_credentials() {
    let home = tempfile::tempdir().unwrap();
    put(
        home.path(),
        ".cursor/mcp.json",
        r#"{"mcpServers": {
            "secret-headers": {"url": "https://a.example/mcp", "headers": {
                "Authorization": "Bearer abc", "X-Api-Key": "k", "Accept": "application/json"}},
            "plain": {"type": "http", "url": "https://b.example/mcp", "headers": {"X-Region": "eu"}},
            "query": {"url": "https://c.example/mcp?api_key=abc123&region=eu"}
        }}"#,
    );
    let out = scan_in(home.path(), None, &no_env, None);

    let s = find(&out, "secret-headers");
    assert!(!s.enabled);
    assert_eq!(
        headers(s),
        &values(&[("Accept", "application/json", false)])
    );
    assert_eq!(
        s.repair,
        [
            "credentials not imported: header Authorization; set it with `airlock servers edit secret-headers --header ...`",
            "credentials not imported: header X-Api-Key; set it with `airlock servers edit secret-headers --header ...`",
        ]
    );

    let plain = find(&out, "plain");
    assert!(plain.enabled);
    assert!(plain.repair.is_empty());
    assert_eq!(headers(plain), &values(&[("X-Region", "eu", false)]));

    let query = find(&out, "query");
    assert!(!query.enabled);
    assert_eq!(
        url(query),
        "https://c.example/mcp?api_key=REDACTED&region=eu"
    );
    assert_eq!(query.repair.len(), 1);
    assert!(
        query.repair[0].starts_with("credentials not imported: url query parameter api_key"),
        "{:?}",
        query.repair
    );
    assert!(!format!("{out:?}").contains("abc123"));
}

// --- Rule 5: disabled in the source ---

#[test]
fn entries_disabled_in_the_source_import_disabled() {
    let home = tempfile::tempdir().unwrap();
    put(
        home.path(),
        ".cursor/mcp.json",
        r#"{"mcpServers": {
            "a": {"command": "x", "disabled": true},
            "b": {"command": "y", "enabled": false},
            "c": {"command": "z", "disabled": false}
        }}"#,
    );
    let out = scan_in(home.path(), None, &no_env, None);
    for name in ["a", "b"] {
        let c = find(&out, name);
        assert!(!c.enabled, "{name}");
        assert_eq!(c.notes, ["disabled in the source; imported disabled"]);
    }
    let c = find(&out, "c");
    assert!(c.enabled);
    assert!(c.notes.is_empty());
}

// --- Rule 6: malformed entries ---

#[test]
fn malformed_entries_become_problems_and_the_rest_import() {
    let home = tempfile::tempdir().unwrap();
    let file = put(
        home.path(),
        ".cursor/mcp.json",
        r#"{"mcpServers": {
            "no-endpoint": {"args": []},
            "both": {"command": "x", "url": "https://x.example"},
            "cmd-number": {"command": 5},
            "args-not-strings": {"command": "x", "args": ["a", 1]},
            "env-not-strings": {"command": "x", "env": {"A": true}},
            "relative": {"command": "x", "cwd": "rel/dir"},
            "ftp": {"url": "ftp://x.example"},
            "not-object": "just a string",
            "good": {"command": "x"}
        }}"#,
    );
    let out = scan_in(home.path(), None, &no_env, None);
    assert_eq!(names(&out), ["good"]);
    assert_eq!(out.problems.len(), 8, "{:?}", out.problems);
    for p in &out.problems {
        assert_eq!(p.client, Client::Cursor);
        assert_eq!(p.source, file);
    }
    let expect = [
        ("no-endpoint", "neither \"command\" nor \"url\" is set"),
        (
            "both",
            "both \"command\" and \"url\" are set; an entry needs exactly one",
        ),
        ("cmd-number", "\"command\" must be a string, got a number"),
        (
            "args-not-strings",
            "\"args\" must be an array of strings; item 1 is a number",
        ),
        (
            "env-not-strings",
            "\"env\" must be an object of strings; \"A\" is a boolean",
        ),
        (
            "relative",
            "\"cwd\" must be an absolute path, got \"rel/dir\"",
        ),
        ("ftp", "\"url\" must start with http:// or https://"),
        ("not-object", "the entry must be an object, got a string"),
    ];
    for (entry, message) in expect {
        assert_eq!(problem(&out, entry).message, message, "{entry}");
    }
    assert_eq!(
        problem(&out, "args-not-strings").to_string(),
        format!(
            "cursor: {file:?}, server \"args-not-strings\": \"args\" must be an array of strings; item 1 is a number"
        )
    );
}

#[test]
fn oauth_clients_of_other_clients_carry_over_without_their_secrets() {
    use crate::config::{Auth, OAuthClient};
    let home = tempfile::tempdir().unwrap();
    put(
        home.path(),
        ".gemini/settings.json",
        r#"{"mcpServers": {
            "webex": {"url": "https://mcp.example/mcp", "oauth": {
                "enabled": true, "clientId": "gem-client", "clientSecret": "gem-oauth-secret-EXAMPLE",
                "authorizationUrl": "https://idp.example/authorize", "scopes": ["spark:mcp"]}},
            "off": {"url": "https://off.example/mcp", "oauth": {"enabled": false, "clientId": "x"}},
            "local": {"command": "node", "oauth": {"clientId": "y"}},
            "bad": {"url": "https://bad.example/mcp", "oauth": {"scopes": "all"}}
        }}"#,
    );
    put(
        home.path(),
        ".cursor/mcp.json",
        r#"{"mcpServers": {"notion": {"url": "https://notion.example/mcp",
            "auth": {"CLIENT_ID": "${env:CURSOR_CLIENT}", "scopes": ["read"]}}}}"#,
    );
    let vars = env_of(&[("CURSOR_CLIENT", "cur-client")]);
    let out = scan_in(home.path(), None, &*vars, None);
    let auth = |name: &str| match &find(&out, name).transport {
        ImportedTransport::Http { auth, .. } => auth.clone(),
        ImportedTransport::Stdio { .. } => panic!("{name} is not remote"),
    };

    // The client id and scopes come along; the secret does not, and says how to set it.
    let webex = find(&out, "webex");
    assert_eq!(
        auth("webex"),
        Auth::OAuth(OAuthClient {
            client_id: Some("gem-client".into()),
            scopes: vec!["spark:mcp".into()],
            ..Default::default()
        })
    );
    assert!(!webex.enabled);
    assert!(
        webex.repair.iter().any(|r| r.contains("oauth.clientSecret")
            && r.contains("airlock servers edit webex --client-secret-env VAR")),
        "{:?}",
        webex.repair
    );
    assert!(
        webex.notes.iter().any(|n| n.contains("authorizationUrl")),
        "{:?}",
        webex.notes
    );
    assert!(!format!("{webex:?}").contains("gem-oauth-secret-EXAMPLE"));

    // A Cursor static client, its id by reference (kept as `${VAR}`).
    assert_eq!(
        auth("notion"),
        Auth::OAuth(OAuthClient {
            client_id: Some("${CURSOR_CLIENT}".into()),
            scopes: vec!["read".into()],
            ..Default::default()
        })
    );
    assert!(find(&out, "notion").enabled);

    // Disabled in the source, or on a local server: not imported, with a note.
    assert_eq!(auth("off"), Auth::None);
    assert!(
        find(&out, "local")
            .notes
            .iter()
            .any(|n| n.contains("\"oauth\" only applies to remote servers"))
    );
    // A malformed table is the entry's problem, naming the field.
    assert!(
        problem(&out, "bad").message.contains("\"oauth.scopes\""),
        "{:?}",
        problem(&out, "bad")
    );
}
