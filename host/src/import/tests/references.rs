//! Tests of `${…}` resolution and of which resolved values are secret.

use super::*;
use crate::import::references::Resolver;

// --- Rule 1: references ---

#[test]
fn env_references_resolve_from_airlocks_environment() {
    let home = tempfile::tempdir().unwrap();
    put(
        home.path(),
        ".cursor/mcp.json",
        r#"{"mcpServers": {"s": {"command": "srv", "env": {
            "A": "${ALPHA}", "B": "${env:BETA}", "C": "$GAMMA",
            "D": "prefix-${ALPHA}-suffix", "E": "$NOT_SET_VAR",
            "F": "${MISSING:-fallback}", "G": "literal $GAMMA"
        }}}}"#,
    );
    let vars = env_of(&[("ALPHA", "1"), ("BETA", "2"), ("GAMMA", "3")]);
    let out = scan_in(home.path(), None, &*vars, None);
    let s = find(&out, "s");
    // Whatever came from Airlock's environment is secret; an unset variable, a default
    // written in the file and literal text are not.
    assert_eq!(
        env(s),
        &values(&[
            ("A", "1", true),
            ("B", "2", true),
            ("C", "3", true),
            ("D", "prefix-1-suffix", true),
            ("E", "", false),
            ("F", "fallback", false),
            ("G", "literal $GAMMA", false),
        ])
    );
    assert_eq!(
        s.repair,
        ["env NOT_SET_VAR for E is not set in Airlock's environment"]
    );
    assert!(s.enabled);
}

#[test]
fn args_and_urls_keep_references_to_set_variables_in_airlock_form() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    put(
        home.path(),
        ".cursor/mcp.json",
        r#"{"mcpServers": {
            "local": {"command": "srv", "args": ["--dir", "${env:DATA_DIR}", "${workspaceFolder}/x", "${UNSET_ARG}"]},
            "remote": {"url": "https://${MCP_HOST}/mcp"},
            "kept": {"url": "https://${env:MCP_BASE}/mcp"}
        }}"#,
    );
    let vars = env_of(&[("DATA_DIR", "/data"), ("MCP_BASE", "mcp.example")]);
    let out = scan_in(home.path(), Some(ws.path()), &*vars, None);
    let local = find(&out, "local");
    let in_ws = format!("{}/x", ws.path().display());
    assert_eq!(args(local), ["--dir", "${DATA_DIR}", in_ws.as_str(), ""]);
    assert_eq!(
        local.repair,
        ["env UNSET_ARG for args[3] is not set in Airlock's environment"]
    );
    let remote = find(&out, "remote");
    assert_eq!(url(remote), "https:///mcp");
    let kept = find(&out, "kept");
    assert_eq!(url(kept), "https://${MCP_BASE}/mcp");
    assert!(kept.repair.is_empty() && kept.enabled);
    assert_eq!(
        remote.repair,
        ["env MCP_HOST for url is not set in Airlock's environment"]
    );
}

// --- Rule 2: secrets by name ---

#[test]
fn credential_like_names_and_values_are_secret() {
    let home = tempfile::tempdir().unwrap();
    put(
        home.path(),
        ".cursor/mcp.json",
        r#"{"mcpServers": {"s": {"command": "srv", "env": {
            "GITHUB_TOKEN": "abc", "NODE_ENV": "production", "db-password": "pw",
            "PLAIN": "${SERVICE_TOKEN}", "OTHER": "ghp_abcdefghijklmnop0123456789",
            "client_secret": "cs", "X_AUTH": "a", "SIGNING_PRIVATE_KEY": "k"
        }}}}"#,
    );
    let vars = env_of(&[("SERVICE_TOKEN", "svc")]);
    let out = scan_in(home.path(), None, &*vars, None);
    let secret: Vec<(&str, bool)> = env(find(&out, "s"))
        .iter()
        .map(|(k, v)| (k.as_str(), v.secret))
        .collect();
    assert_eq!(
        secret,
        [
            ("GITHUB_TOKEN", true),
            ("NODE_ENV", false),
            ("OTHER", true),
            ("PLAIN", true),
            ("SIGNING_PRIVATE_KEY", true),
            ("X_AUTH", true),
            ("client_secret", true),
            ("db-password", true),
        ]
    );
    assert_eq!(env(find(&out, "s"))["PLAIN"], val("svc", true));
}

#[test]
fn values_resolved_from_env_references_are_secret_and_masked() {
    let vars = env_of(&[
        ("DATABASE_URL", "postgres://u:pw@h/db"),
        ("DB_HOST", "db.internal"),
    ]);
    let mut r = Resolver {
        env: &*vars,
        home: Path::new("/home/u"),
        workspace: None,
        repair: Vec::new(),
        notes: Vec::new(),
    };
    assert_eq!(
        r.imported("DATABASE_URL", "${DATABASE_URL}"),
        val("postgres://u:pw@h/db", true)
    );
    assert_eq!(
        r.imported("DATABASE_URL", "$DATABASE_URL"),
        val("postgres://u:pw@h/db", true)
    );
    assert!(r.repair.is_empty());

    let home = tempfile::tempdir().unwrap();
    put(
        home.path(),
        ".cursor/mcp.json",
        r#"{"mcpServers": {"db": {"command": "srv", "env": {
            "DATABASE_URL": "${DATABASE_URL}", "DSN": "postgres://${env:DB_HOST}/app",
            "REGION": "eu", "FALLBACK": "${UNSET_VAR:-plain}"
        }}}}"#,
    );
    let out = scan_in(home.path(), None, &*vars, None);
    let db = find(&out, "db");
    assert!(db.enabled && db.repair.is_empty(), "{db:?}");
    assert_eq!(
        env(db),
        &values(&[
            ("DATABASE_URL", "postgres://u:pw@h/db", true),
            ("DSN", "postgres://db.internal/app", true),
            ("FALLBACK", "plain", false),
            ("REGION", "eu", false),
        ])
    );
    assert_eq!(
        env(&db.masked()),
        &values(&[
            ("DATABASE_URL", MASK, true),
            ("DSN", MASK, true),
            ("FALLBACK", "plain", false),
            ("REGION", "eu", false),
        ])
    );
    let shown = format!("{out:?}{:?}", db.masked());
    assert!(!shown.contains("u:pw@h"), "{shown}");
    assert!(!shown.contains("db.internal"), "{shown}");
}

#[test]
fn literal_non_credential_values_stay_plain() {
    let home = tempfile::tempdir().unwrap();
    put(
        home.path(),
        ".cursor/mcp.json",
        r#"{"mcpServers": {"s": {"command": "srv", "env": {
            "DATABASE_URL": "postgres://localhost/dev", "NODE_ENV": "production",
            "GREETING": "${UNSET_GREETING:-hello}", "PRICE": "literal $5"
        }}}}"#,
    );
    let out = scan_in(home.path(), None, &no_env, None);
    let s = find(&out, "s");
    assert_eq!(
        env(s),
        &values(&[
            ("DATABASE_URL", "postgres://localhost/dev", false),
            ("GREETING", "hello", false),
            ("NODE_ENV", "production", false),
            ("PRICE", "literal $5", false),
        ])
    );
    assert_eq!(&s.masked(), s, "nothing to mask");
    assert!(s.enabled && s.repair.is_empty());
}
