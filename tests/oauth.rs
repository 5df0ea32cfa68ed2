//! OAuth against a real local authorization server (tests/peers/python/oauth_server.py):
//! non-interactive runs fail naming `airlock servers auth`, the authorization-code flow
//! with PKCE through the loopback listener, silent refresh, logout, and tokens that
//! never show in any output, log or the registry; pre-registered and client ID metadata
//! document clients; client credentials with a secret and with a signed key, without a
//! browser, and a revoked client's clear error.

mod support;

use support::{Workspace, browser_script, python, start_oauth_server};

fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn authorize_refresh_and_logout_against_a_local_authorization_server() {
    // Tokens live 10 s: long enough that the first call uses the first token even on a
    // loaded machine (with 4 s, a slow `servers test` once saw a refreshed one).
    let server = start_oauth_server(10, &[]);
    let ws = Workspace::new("");
    let mut seen = String::new();
    let mut run = |args: &[&str], envs: &[(&str, &str)]| {
        let out = ws.run(args, envs);
        seen.push_str(&text(&out));
        out
    };
    let out = run(
        &[
            "servers",
            "add",
            "secure",
            "--transport",
            "http",
            &server.url,
        ],
        &[],
    );
    assert!(out.status.success(), "{}", text(&out));
    // OAuth turned on by an edit (as for an imported remote server).
    let out = run(&["servers", "auth", "secure"], &[]);
    assert!(text(&out).contains("does not use OAuth"), "{}", text(&out));
    let out = run(&["servers", "edit", "secure", "--auth", "oauth"], &[]);
    assert!(out.status.success(), "{}", text(&out));

    // Without tokens a run fails at once, naming the command to run.
    let out = run(&["servers", "test", "secure"], &[]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("run `airlock servers auth secure`"),
        "{}",
        text(&out)
    );

    // The interactive flow, with a scripted browser.
    let browser = browser_script(ws.dir.path());
    let out = run(
        &["servers", "auth", "secure", "--wait", "60"],
        &[("AIRLOCK_BROWSER", &browser)],
    );
    assert!(out.status.success(), "{}", text(&out));

    let out = run(&["--json", "servers", "test", "secure"], &[]);
    assert!(out.status.success(), "{}", text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["test"]["verified"], true);
    let tools: Vec<String> = report["test"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert!(tools.contains(&"whoami".to_string()), "{tools:?}");

    type Run<'a> = dyn FnMut(&[&str], &[(&str, &str)]) -> std::process::Output + 'a;
    let whoami = |run: &mut Run<'_>| {
        let out = run(&["--json", "call", "mcp__secure__whoami"], &[]);
        let v: serde_json::Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
        assert_eq!(v["ok"], true, "{v}");
        v["text"].as_str().unwrap().to_string()
    };
    let first = whoami(&mut run);
    assert!(first.contains("token-generation: 1"), "{first}");
    // The 10-second token expires; the next run refreshes silently.
    std::thread::sleep(std::time::Duration::from_secs(11));
    let second = whoami(&mut run);
    assert!(
        second.contains("token-generation: 2"),
        "silent refresh: {second}"
    );

    // A server echoing the access token gets it redacted.
    let current = {
        let store: serde_json::Value =
            serde_json::from_slice(&std::fs::read(ws.data().join("secrets/secrets.json")).unwrap())
                .unwrap();
        let record: serde_json::Value =
            serde_json::from_str(store["oauth:secure"].as_str().unwrap()).unwrap();
        find_key(&record, "access_token").remove(0)
    };
    let args = serde_json::json!({ "text": format!("token is {current}") }).to_string();
    let out = run(
        &["--json", "call", "mcp__secure__echo", "--args", &args],
        &[],
    );
    let echoed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(echoed["redacted"], true, "{echoed}");
    assert!(!echoed.to_string().contains(&current));

    // Tokens live only in the 0600 secret store: never in output, the server's log or
    // the registry database.
    let store: serde_json::Value =
        serde_json::from_slice(&std::fs::read(ws.data().join("secrets/secrets.json")).unwrap())
            .unwrap();
    let record = store["oauth:secure"].as_str().expect("stored tokens");
    let record: serde_json::Value = serde_json::from_str(record).unwrap();
    let record_text = record.to_string();
    let mut tokens = Vec::new();
    for key in ["access_token", "refresh_token"] {
        let found = find_key(&record, key);
        assert!(!found.is_empty(), "no {key} in {record_text}");
        tokens.extend(found);
    }
    // Logout forgets the tokens; the next run fails naming the command again.
    let out = run(&["servers", "logout", "secure"], &[]);
    assert!(out.status.success(), "{}", text(&out));
    let out = run(&["--json", "call", "mcp__secure__whoami"], &[]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("airlock servers auth secure"),
        "{}",
        text(&out)
    );
    let log = std::fs::read_to_string(&server.log).unwrap();
    let db = ws.registry_dump();
    for token in &tokens {
        assert!(!seen.contains(token.as_str()), "a token reached the output");
        assert!(!log.contains(token.as_str()));
        assert!(!db.windows(token.len()).any(|w| w == token.as_bytes()));
    }
    assert!(
        !seen.contains("code_challenge"),
        "the authorization URL was printed"
    );
}

fn find_key(v: &serde_json::Value, key: &str) -> Vec<String> {
    match v {
        serde_json::Value::Object(map) => map
            .iter()
            .flat_map(|(k, v)| {
                if k == key {
                    v.as_str().map(String::from).into_iter().collect()
                } else {
                    find_key(v, key)
                }
            })
            .collect(),
        serde_json::Value::Array(items) => items.iter().flat_map(|i| find_key(i, key)).collect(),
        _ => Vec::new(),
    }
}

/// Every file under `dir`, except the secret store (where tokens belong), as bytes.
fn files_outside_the_secret_store(dir: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.file_name().is_some_and(|n| n == "secrets") {
            continue;
        }
        if path.is_dir() {
            found.extend(files_outside_the_secret_store(&path));
        } else if let Ok(bytes) = std::fs::read(&path) {
            found.push((path, bytes));
        }
    }
    found
}

/// Neither `secret` nor the body of `private_pem` is in any file under `data` outside the
/// secret store, nor in `seen` (everything the runs printed, trace logs included).
fn assert_no_credentials(data: &std::path::Path, seen: &str, secret: &str, private_pem: &str) {
    let key_body: String = private_pem
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect();
    for (path, bytes) in files_outside_the_secret_store(data) {
        for needle in [secret, key_body.as_str()] {
            assert!(
                !bytes.windows(needle.len()).any(|w| w == needle.as_bytes()),
                "{} holds a credential",
                path.display()
            );
        }
    }
    assert!(
        !seen.contains(secret),
        "the client secret reached the output"
    );
    for line in private_pem.lines().filter(|l| !l.starts_with("-----")) {
        assert!(!seen.contains(line), "the private key reached the output");
    }
}

fn called(ws: &Workspace, tool: &str, envs: &[(&str, &str)]) -> (serde_json::Value, String) {
    let out = ws.run(&["--json", "call", tool], envs);
    let all = text(&out);
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {all}"));
    (v, all)
}

#[test]
fn client_credentials_need_no_browser_and_a_revoked_client_is_named() {
    let key = openssl::ec::EcKey::generate(
        &openssl::ec::EcGroup::from_curve_name(openssl::nid::Nid::X9_62_PRIME256V1).unwrap(),
    )
    .unwrap();
    let key = openssl::pkey::PKey::from_ec_key(key).unwrap();
    let private_pem = String::from_utf8(key.private_key_to_pem_pkcs8().unwrap()).unwrap();
    let keys = tempfile::tempdir().unwrap();
    let public = keys.path().join("keyed.pub.pem");
    std::fs::write(&public, key.public_key_to_pem().unwrap()).unwrap();
    let secret = "m2m-secret-5e1f0c9a7b";
    let server = start_oauth_server(
        3600,
        &[
            "--cc-client".into(),
            format!("m2m:{secret}"),
            "--cc-jwt".into(),
            format!("keyed={}", public.display()),
        ],
    );
    let ws = Workspace::new(&format!(
        "[mcp_servers.m2m]\nurl = \"{url}\"\nauth = {{ type = \"client_credentials\", client_id = \"m2m\", client_secret = \"${{M2M_SECRET}}\" }}\n\n\
         [mcp_servers.keyed]\nurl = \"{url}\"\nauth = {{ type = \"client_credentials\", client_id = \"keyed\", private_key = \"${{KEYED_PEM}}\" }}\n",
        url = server.url
    ));
    let envs = [
        ("M2M_SECRET", secret),
        ("KEYED_PEM", private_pem.as_str()),
        ("AIRLOCK_LOG", "trace"),
    ];
    let mut seen = String::new();
    // No `servers auth` step: each service gets its token when it connects.
    for (tool, client) in [("mcp__m2m__client", "m2m"), ("mcp__keyed__client", "keyed")] {
        let (v, all) = called(&ws, tool, &envs);
        seen.push_str(&all);
        assert_eq!(v["ok"], true, "{all}");
        assert_eq!(v["text"], format!("client: {client}"), "{v}");
    }
    // The stored token is reused by the next run: one grant per client so far.
    let (v, all) = called(&ws, "mcp__m2m__client", &envs);
    seen.push_str(&all);
    assert_eq!(v["ok"], true, "{all}");
    let log = std::fs::read_to_string(&server.log).unwrap();
    assert_eq!(
        log.matches("POST /token grant_type=client_credentials -> 200")
            .count(),
        2,
        "{log}"
    );

    // The server revokes the client: the stored token is refused, the silent retry's
    // grant is refused too, and the error names the credential's field, not its value.
    let out = std::process::Command::new(python())
        .args([
            "-c",
            "import sys, urllib.request; urllib.request.urlopen(urllib.request.Request(sys.argv[1], method='POST')).read()",
        ])
        .arg(format!("{}/admin/revoke?client_id=m2m", server.url.trim_end_matches("/mcp")))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let (v, all) = called(&ws, "mcp__m2m__client", &envs);
    seen.push_str(&all);
    assert_eq!(v["ok"], false, "{all}");
    let message = v["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("client \"m2m\"") && message.contains("auth.client_secret"),
        "{v}"
    );

    // Neither the secret nor the key reaches the output, the trace log or any file
    // outside the secret store.
    assert_no_credentials(&ws.data(), &seen, secret, &private_pem);
}

#[test]
fn pre_registered_and_metadata_document_clients_skip_registration() {
    let docs = tempfile::tempdir().unwrap();
    let doc = docs.path().join("client.json");
    let doc_url = "https://agents.example/airlock/client.json";
    std::fs::write(
        &doc,
        serde_json::json!({
            "client_id": doc_url,
            "client_name": "Airlock",
            "redirect_uris": ["http://127.0.0.1/callback"],
            "token_endpoint_auth_method": "none",
        })
        .to_string(),
    )
    .unwrap();
    let secret = "pre-secret-0b7d2e";
    let server = start_oauth_server(
        3600,
        &[
            "--client".into(),
            format!("pre:{secret}"),
            "--cimd".into(),
            format!("{doc_url}={}", doc.display()),
        ],
    );
    let ws = Workspace::new(&format!(
        "[mcp_servers.pre]\nurl = \"{url}\"\nauth = {{ type = \"oauth\", client_id = \"pre\", client_secret = \"${{PRE_SECRET}}\" }}\n\n\
         [mcp_servers.doc]\nurl = \"{url}\"\nauth = {{ type = \"oauth\", client_metadata_url = \"{doc_url}\" }}\n",
        url = server.url
    ));
    let browser = browser_script(ws.dir.path());
    let envs = [
        ("PRE_SECRET", secret),
        ("AIRLOCK_BROWSER", browser.as_str()),
    ];
    let mut seen = String::new();
    for (service, client) in [("pre", "pre"), ("doc", doc_url)] {
        let out = ws.run(&["servers", "auth", service, "--wait", "60"], &envs);
        seen.push_str(&text(&out));
        assert!(out.status.success(), "{}", text(&out));
        let (v, all) = called(&ws, &format!("mcp__{service}__client"), &envs);
        seen.push_str(&all);
        assert_eq!(v["ok"], true, "{all}");
        assert_eq!(v["text"], format!("client: {client}"), "{v}");
    }
    let log = std::fs::read_to_string(&server.log).unwrap();
    assert!(
        !log.contains("POST /register"),
        "no dynamic registration: {log}"
    );
    assert_eq!(
        log.matches("POST /token grant_type=authorization_code -> 200")
            .count(),
        2,
        "{log}"
    );
    assert!(
        !seen.contains(secret),
        "the client secret reached the output"
    );
}

/// Auth tables set with `airlock servers add/edit` flags: the client secret is read from
/// an environment variable and the key from a file, both kept in the secret store (the
/// registry holds references); the calls work in runs that no longer have them; an edit
/// that switches to a private key forgets the old secret; bad flags are named.
#[test]
fn registry_services_take_auth_tables_from_flags_and_keep_secrets_in_the_store() {
    let key = openssl::rsa::Rsa::generate(2048).unwrap();
    let key = openssl::pkey::PKey::from_rsa(key).unwrap();
    let keys = tempfile::tempdir().unwrap();
    let private = keys.path().join("keyed.pem");
    std::fs::write(&private, key.private_key_to_pem_pkcs8().unwrap()).unwrap();
    let public = keys.path().join("keyed.pub.pem");
    std::fs::write(&public, key.public_key_to_pem().unwrap()).unwrap();
    let not_pem = keys.path().join("not.pem");
    std::fs::write(&not_pem, "hello").unwrap();
    let private_pem = std::fs::read_to_string(&private).unwrap();
    let secret = "flag-secret-8c1d4e7f02";
    let server = start_oauth_server(
        3600,
        &[
            "--cc-client".into(),
            format!("m2m:{secret}"),
            "--cc-jwt".into(),
            format!("keyed={}", public.display()),
        ],
    );
    let ws = Workspace::new("");
    let seen = std::cell::RefCell::new(String::new());
    let run = |args: &[&str], envs: &[(&str, &str)]| {
        let out = ws.run(args, envs);
        seen.borrow_mut().push_str(&text(&out));
        out
    };

    // Bad flags are refused, naming the flag or the variable, and add nothing.
    let add = ["servers", "add", "m2m", "--transport", "http", &server.url];
    for (extra, expected) in [
        (
            vec!["--auth", "client_credentials", "--client-id", "m2m"],
            "--client-secret-env VAR or --private-key-file PATH",
        ),
        (
            vec![
                "--auth",
                "client_credentials",
                "--client-id",
                "m2m",
                "--client-secret-env",
                "NOT_SET_ANYWHERE",
            ],
            "NOT_SET_ANYWHERE is not set",
        ),
        (
            vec![
                "--auth",
                "client_credentials",
                "--client-id",
                "m2m",
                "--private-key-file",
                not_pem.to_str().unwrap(),
            ],
            "not a PEM private key",
        ),
        (vec!["--auth", "magic"], "--auth must be"),
        (
            vec!["--client-id", "m2m"],
            "--client-id applies to --auth oauth or --auth client_credentials",
        ),
        (
            vec![
                "--auth",
                "oauth",
                "--client-metadata-url",
                "http://plain.example/doc.json",
            ],
            "must be an https:// URL",
        ),
    ] {
        let mut args = add.to_vec();
        args.extend(extra);
        let out = run(&args, &[]);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(text(&out).contains(expected), "{args:?}: {}", text(&out));
    }
    let (list, out) = ws.json(&["servers", "list"], &[]);
    assert!(out.status.success());
    assert_eq!(list["servers"].as_array().map(Vec::len), Some(0), "{list}");

    // A client secret from the environment of the `add` run only.
    let mut args = add.to_vec();
    args.extend([
        "--auth",
        "client_credentials",
        "--client-id",
        "m2m",
        "--client-secret-env",
        "M2M_SECRET",
        "--auth-scope",
        "tools",
    ]);
    let out = run(&args, &[("M2M_SECRET", secret)]);
    assert!(out.status.success(), "{}", text(&out));
    let out = run(&["servers", "test", "m2m"], &[]);
    assert!(out.status.success(), "{}", text(&out));
    let (got, out) = ws.json(&["servers", "get", "m2m"], &[]);
    seen.borrow_mut().push_str(&text(&out));
    let auth = &got["server"]["auth"];
    assert_eq!(auth["type"], "client_credentials", "{got}");
    assert_eq!(auth["client_id"], "m2m", "{got}");
    assert_eq!(auth["client_secret"], "••••••", "{got}");
    let (v, all) = called(&ws, "mcp__m2m__client", &[("AIRLOCK_LOG", "trace")]);
    seen.borrow_mut().push_str(&all);
    assert_eq!(v["ok"], true, "{all}");
    assert_eq!(v["text"], "client: m2m", "{v}");
    let store = std::fs::read_to_string(ws.data().join("secrets/secrets.json")).unwrap();
    assert!(store.contains(secret), "the secret is in the secret store");

    // Switch to a private key: the JWT client answers, the old secret leaves the store.
    let key_path = private.to_str().unwrap();
    let out = run(
        &[
            "servers",
            "edit",
            "m2m",
            "--client-secret-env",
            "M2M_SECRET",
            "--private-key-file",
            key_path,
        ],
        &[("M2M_SECRET", secret)],
    );
    assert!(
        !out.status.success(),
        "a secret and a key together are refused"
    );
    assert!(text(&out).contains("not both"), "{}", text(&out));
    let out = run(
        &[
            "servers",
            "edit",
            "m2m",
            "--client-id",
            "keyed",
            "--private-key-file",
            key_path,
        ],
        &[],
    );
    assert!(out.status.success(), "{}", text(&out));
    let out = run(&["servers", "test", "m2m"], &[]);
    assert!(out.status.success(), "{}", text(&out));
    let (v, all) = called(&ws, "mcp__m2m__client", &[("AIRLOCK_LOG", "trace")]);
    seen.borrow_mut().push_str(&all);
    assert_eq!(v["ok"], true, "{all}");
    assert_eq!(v["text"], "client: keyed", "{v}");
    let store = std::fs::read_to_string(ws.data().join("secrets/secrets.json")).unwrap();
    assert!(!store.contains(secret), "the replaced secret was forgotten");

    // Nothing outside the secret store, and no output, holds the secret or the key.
    assert_no_credentials(&ws.data(), &seen.borrow(), secret, &private_pem);

    // Removing the service forgets its key.
    let out = ws.run(&["servers", "remove", "m2m"], &[]);
    assert!(out.status.success(), "{}", text(&out));
    let store = std::fs::read_to_string(ws.data().join("secrets/secrets.json")).unwrap();
    let first_line = private_pem.lines().nth(1).unwrap();
    assert!(
        !store.contains(first_line),
        "the key left the store with the service"
    );
}
