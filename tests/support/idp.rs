//! The identity peers of the `[serve.auth]` tests: a real OpenID provider (npm
//! `oidc-provider`, tests/peers/idp) with token exchange, and an upstream MCP server
//! (tests/peers/python/bearer_server.py) that says which bearer token each call carried.

use std::io::BufRead;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use super::{python, python_server, root};

/// A running `oidc-provider` with three clients: `alice-app` (group `eng`) and `bob-app`
/// (group `ops`), both allowed scope `mcp:tools`, issuing JWT access tokens for
/// `resource`; and `gateway-app`, which may exchange their tokens (RFC 8693) for tokens
/// for `exchange_audiences`.
pub struct Idp {
    child: Child,
    /// Its issuer, `http://127.0.0.1:PORT`.
    pub issuer: String,
    dir: tempfile::TempDir,
}

impl Drop for Idp {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::killpg(pid, nix::sys::signal::Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

pub fn peer(script: &str) -> PathBuf {
    root().join("tests/peers/idp").join(script)
}

pub fn node(args: &[&str]) -> String {
    let out = Command::new("node").args(args).output().expect("run node");
    assert!(
        out.status.success(),
        "node {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

impl Idp {
    pub fn start(resource: &str, exchange_audiences: &[&str]) -> Idp {
        Idp::start_with(resource, exchange_audiences, false)
    }

    /// [`Idp::start`] issuing opaque access tokens for `resource`, which `gateway-app`
    /// may introspect (RFC 7662, at `/token/introspection`).
    pub fn start_opaque(resource: &str) -> Idp {
        Idp::start_with(resource, &[], true)
    }

    fn start_with(resource: &str, exchange_audiences: &[&str], opaque: bool) -> Idp {
        let dir = tempfile::tempdir().unwrap();
        let key = node(&[peer("mint.mjs").to_str().unwrap(), "keygen", "idp-key-1"]);
        std::fs::write(dir.path().join("key.json"), &key).unwrap();
        let config = json!({
            "port": 0,
            "key": serde_json::from_str::<Value>(&key).unwrap(),
            "clients": [
                {"client_id": "alice-app", "client_secret": "alice-secret", "groups": ["eng"], "scope": "mcp:tools"},
                {"client_id": "bob-app", "client_secret": "bob-secret", "groups": ["ops"], "scope": "mcp:tools"},
                {"client_id": "gateway-app", "client_secret": "gateway-secret", "groups": [], "scope": "mcp:tools", "token_exchange": true, "introspection": true},
            ],
            "resources": if opaque { json!([]) } else { json!([resource]) },
            "opaque_resources": if opaque { json!([resource]) } else { json!([]) },
            "exchange_audiences": exchange_audiences,
            "resource_scopes": "mcp:tools",
        });
        let config_file = dir.path().join("provider.json");
        std::fs::write(&config_file, config.to_string()).unwrap();
        let mut child = Command::new("node")
            .arg(peer("provider.mjs"))
            .arg(&config_file)
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the identity provider");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let started: Value = serde_json::from_str(&line)
            .unwrap_or_else(|_| panic!("the provider's first line: {line:?}"));
        Idp {
            child,
            issuer: started["issuer"].as_str().unwrap().to_string(),
            dir,
        }
    }

    /// `claims` signed with the provider's own key (so only the claims can be wrong).
    pub fn mint(&self, claims: Value) -> String {
        self.sign(&self.dir.path().join("key.json"), claims)
    }

    /// `claims` signed with a key the provider does not publish, named `kid` (a new
    /// id, or the provider's own key's id: a forgery).
    pub fn mint_with_unknown_key(&self, kid: &str, claims: Value) -> String {
        let other = self.dir.path().join("other.json");
        let key = node(&[peer("mint.mjs").to_str().unwrap(), "keygen", kid]);
        std::fs::write(&other, key).unwrap();
        self.sign(&other, claims)
    }

    fn sign(&self, key: &std::path::Path, claims: Value) -> String {
        let file = self.dir.path().join("claims.json");
        std::fs::write(&file, claims.to_string()).unwrap();
        node(&[
            peer("mint.mjs").to_str().unwrap(),
            "sign",
            key.to_str().unwrap(),
            file.to_str().unwrap(),
        ])
    }

    /// An access token for `resource` from the client credentials grant.
    pub async fn token(&self, client: &str, secret: &str, resource: &str) -> String {
        let form = format!(
            "grant_type=client_credentials&scope=mcp%3Atools&resource={}",
            url_encoded(resource)
        );
        let answer: Value = reqwest::Client::new()
            .post(format!("{}/token", self.issuer))
            .basic_auth(client, Some(secret))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        answer["access_token"]
            .as_str()
            .unwrap_or_else(|| panic!("no access token: {answer}"))
            .to_string()
    }
}

/// `text` as a form value.
pub fn url_encoded(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A real streamable-HTTP MCP server (tests/peers/python/bearer_server.py) that says
/// which bearer token each call carried, and logs each call's token digest.
pub struct BearerServer {
    child: Child,
    /// Its MCP endpoint.
    pub url: String,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for BearerServer {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::killpg(pid, nix::sys::signal::Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

impl BearerServer {
    pub fn start() -> BearerServer {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("calls.log");
        let mut child = Command::new(python())
            .arg(python_server("bearer_server.py"))
            .args(["--port", "0", "--log"])
            .arg(&log)
            .process_group(0)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the bearer server");
        let url = super::listening_url(&mut child);
        BearerServer {
            child,
            url,
            log,
            _dir: dir,
        }
    }

    /// The SHA-256 (hex) of every bearer token a call carried, in order.
    pub fn token_digests(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| {
                serde_json::from_str::<Value>(l).unwrap()["token_sha256"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect()
    }
}

pub fn sha256_hex(text: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(text.as_bytes()))
}
