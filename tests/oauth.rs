//! OAuth against a real local authorization server (tests/peers/python/oauth_server.py):
//! non-interactive runs fail naming `airlock servers auth`, the authorization-code flow
//! with PKCE through the loopback listener, silent refresh, logout, and tokens that
//! never show in any output, log or the registry.

mod support;

use std::io::BufRead;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};

use support::{Workspace, python, python_server};

struct OAuthServer {
    child: Child,
    url: String,
    log: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for OAuthServer {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::killpg(pid, nix::sys::signal::Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

fn start_oauth_server(token_ttl: u32) -> OAuthServer {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.log");
    let mut child = Command::new(python())
        .arg(python_server("oauth_server.py"))
        .args([
            "--port",
            "0",
            "--token-ttl",
            &token_ttl.to_string(),
            "--log",
        ])
        .arg(&log)
        .process_group(0)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the OAuth server");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("LISTENING ")
        .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
        .to_string();
    OAuthServer {
        child,
        url,
        log,
        _dir: dir,
    }
}

/// A "browser" that follows the authorization redirect to Airlock's loopback listener
/// (the test server approves without a login page).
fn browser_script(dir: &std::path::Path) -> String {
    let path = dir.join("browser.sh");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\nexec {} -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=30).read()' \"$1\"\n",
            python().display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn authorize_refresh_and_logout_against_a_local_authorization_server() {
    let server = start_oauth_server(4);
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
    // The 4-second token expires; the next run refreshes silently.
    std::thread::sleep(std::time::Duration::from_secs(5));
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
    let db = std::fs::read(ws.data().join("registry.db")).unwrap();
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
