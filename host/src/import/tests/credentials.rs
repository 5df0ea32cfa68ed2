//! Tests of credential scrubbing in args and urls.

use super::*;
use crate::import::credentials::{scrub_args, scrub_url};

// --- Rule 3: credentials typed into args ---

#[test]
fn credentials_typed_into_args_are_scrubbed() {
    let mut list: Vec<String> = [
        "--api-key=abc123XYZ",
        "--token",
        "s3cr3tValue",
        "--port",
        "8080",
        "/home/me/data",
        "--password=hunter2",
        "sk-proj0123456789abcdefXYZ",
        "GITHUB_TOKEN=ghp_abcdefghijklmnop0123",
        "--header",
        "Authorization: Bearer abc123",
        "--max-tokens",
        "1000",
        "--token-file",
        "/run/secrets/token",
        "AKIAIOSFODNN7EXAMPLE",
        "--verbose",
        "--client-secret",
        "${CLIENT_SECRET}",
        "--log-level=debug",
        "--auth",
        "stdio",
        "https://example.com/mcp",
        "--author",
        "Jane Doe",
    ]
    .map(String::from)
    .to_vec();
    let scrubbed = scrub_args(&mut list);
    assert_eq!(scrubbed, [0, 2, 6, 7, 8, 10, 15]);
    assert_eq!(
        list,
        [
            "--api-key=REDACTED",
            "--token",
            "REDACTED",
            "--port",
            "8080",
            "/home/me/data",
            "--password=REDACTED",
            "REDACTED",
            "GITHUB_TOKEN=REDACTED",
            "--header",
            "Authorization: REDACTED",
            "--max-tokens",
            "1000",
            "--token-file",
            "/run/secrets/token",
            "REDACTED",
            "--verbose",
            "--client-secret",
            "${CLIENT_SECRET}",
            "--log-level=debug",
            "--auth",
            "stdio",
            "https://example.com/mcp",
            "--author",
            "Jane Doe",
        ]
    );
}

#[test]
fn scrubbed_args_are_reported_by_position_only() {
    let home = tempfile::tempdir().unwrap();
    put(
        home.path(),
        ".cursor/mcp.json",
        r#"{"mcpServers": {"s": {"command": "srv", "args": ["serve", "--password", "Hunter2Hunter2"]}}}"#,
    );
    let out = scan_in(home.path(), None, &no_env, None);
    let s = find(&out, "s");
    assert_eq!(args(s), ["serve", "--password", "REDACTED"]);
    assert_eq!(
        s.repair,
        [
            "args[2] looked like a credential typed into the command line and was replaced with REDACTED; pass it through an env var instead"
        ]
    );
    assert!(!format!("{out:?}").contains("Hunter2"));
}

#[test]
fn url_args_with_credentials_are_scrubbed() {
    let mut list: Vec<String> = [
        "https://mcp.x/sse?token=abc123def456",
        "https://user:pass@host/x",
        "postgresql://u:pw@h/db",
        "--url=https://mcp.x/sse?region=eu&api_key=k3yk3y",
        "DATABASE_URL=postgres://app:s3cret@db.internal:5432/app",
        "--dsn",
        "redis://:hunter2@cache:6379/0",
        "https://mcp.x/sse?key=${API_KEY}",
        "https://example.com/mcp?author=jane&page=2",
        "postgresql://localhost/dev",
        "--db=postgresql://app@localhost/dev",
        "--port=8080",
        "/srv/data",
        "--author",
        "Jane Doe",
    ]
    .map(String::from)
    .to_vec();
    let scrubbed = scrub_args(&mut list);
    assert_eq!(scrubbed, [0, 1, 2, 3, 4, 6]);
    assert_eq!(
        list,
        [
            "https://mcp.x/sse?token=REDACTED",
            "https://user:REDACTED@host/x",
            "postgresql://u:REDACTED@h/db",
            "--url=https://mcp.x/sse?region=eu&api_key=REDACTED",
            "DATABASE_URL=postgres://app:REDACTED@db.internal:5432/app",
            "--dsn",
            "redis://:REDACTED@cache:6379/0",
            "https://mcp.x/sse?key=${API_KEY}",
            "https://example.com/mcp?author=jane&page=2",
            "postgresql://localhost/dev",
            "--db=postgresql://app@localhost/dev",
            "--port=8080",
            "/srv/data",
            "--author",
            "Jane Doe",
        ]
    );
}

#[test]
fn option_values_holding_headers_variables_or_tokens_are_scrubbed() {
    let mut list: Vec<String> = [
        "--header=Authorization: Bearer abc123",
        "--header=X-Api-Key: k3yValue",
        "--env=API_KEY=abc123",
        "--set=db-password=hunter2",
        "--config=ghp_abcdefghijklmnop0123456789",
        "--header=Accept: application/json",
        "--header=Authorization: Bearer ${GITHUB_TOKEN}",
        "--env=NODE_ENV=production",
        "--env=TOKEN_FILE=/run/secrets/token",
        "--author=Jane Doe",
    ]
    .map(String::from)
    .to_vec();
    let scrubbed = scrub_args(&mut list);
    assert_eq!(scrubbed, [0, 1, 2, 3, 4]);
    assert_eq!(
        list,
        [
            "--header=Authorization: REDACTED",
            "--header=X-Api-Key: REDACTED",
            "--env=API_KEY=REDACTED",
            "--set=db-password=REDACTED",
            "--config=REDACTED",
            "--header=Accept: application/json",
            "--header=Authorization: Bearer ${GITHUB_TOKEN}",
            "--env=NODE_ENV=production",
            "--env=TOKEN_FILE=/run/secrets/token",
            "--author=Jane Doe",
        ]
    );
}

#[test]
fn url_and_header_args_are_reported_by_position_only() {
    let home = tempfile::tempdir().unwrap();
    put(
        home.path(),
        ".cursor/mcp.json",
        r#"{"mcpServers": {"s": {"command": "mcp-remote", "args": [
            "--sse", "https://mcp.x/sse?token=abc123def456", "postgresql://u:Pw0rdXYZ@h/db",
            "--header=Authorization: Bearer Tok3nXYZ"]}}}"#,
    );
    let out = scan_in(home.path(), None, &no_env, None);
    let s = find(&out, "s");
    assert_eq!(
        args(s),
        [
            "--sse",
            "https://mcp.x/sse?token=REDACTED",
            "postgresql://u:REDACTED@h/db",
            "--header=Authorization: REDACTED",
        ]
    );
    let reason = |i: usize| {
        format!(
            "args[{i}] looked like a credential typed into the command line and was replaced with REDACTED; pass it through an env var instead"
        )
    };
    assert_eq!(s.repair, [reason(1), reason(2), reason(3)]);
    let shown = format!("{out:?}");
    for secret in ["abc123def456", "Pw0rdXYZ", "Tok3nXYZ"] {
        assert!(!shown.contains(secret), "{secret} leaked: {shown}");
    }
}

#[test]
fn url_credentials_are_scrubbed() {
    assert_eq!(
        scrub_url("https://user:pw@h.example/p?x=1&token=t0k#frag"),
        (
            "https://user:REDACTED@h.example/p?x=1&token=REDACTED#frag".to_string(),
            vec![
                "the password in the url".to_string(),
                "url query parameter token".to_string()
            ]
        )
    );
    assert_eq!(
        scrub_url("https://h.example/mcp?key=${API_KEY}"),
        ("https://h.example/mcp?key=${API_KEY}".to_string(), vec![])
    );
}

#[test]
fn scrub_url_understands_any_scheme_and_urls_inside_text() {
    assert_eq!(
        scrub_url("postgresql://u:pw@h/db"),
        (
            "postgresql://u:REDACTED@h/db".to_string(),
            vec!["the password in the url".to_string()]
        )
    );
    assert_eq!(
        scrub_url(
            "DSN=mysql://root:pw@db/app primary, see https://docs.example/x?access_token=t0k"
        ),
        (
            "DSN=mysql://root:REDACTED@db/app primary, see https://docs.example/x?access_token=REDACTED"
                .to_string(),
            vec![
                "the password in the url".to_string(),
                "url query parameter access_token".to_string()
            ]
        )
    );
    // Query parameters merely mentioning a credential word are left alone.
    assert_eq!(
        scrub_url("https://example.com/mcp?author=jane&token_type=bearer"),
        (
            "https://example.com/mcp?author=jane&token_type=bearer".to_string(),
            vec![]
        )
    );
    assert_eq!(
        scrub_url("no url here: just text"),
        ("no url here: just text".to_string(), vec![])
    );
}
