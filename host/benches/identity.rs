//! What `[serve.auth]` costs a call through `airlock serve --http`, in the same run:
//!
//! - `own_token`: an rmcp client presenting one of Airlock's own bearer tokens (agent
//!   `machine`; a provider's token may not name an agent of Airlock's own tokens);
//! - `jwt`: an rmcp client presenting a JWT access token that a real OpenID provider
//!   (npm `oidc-provider`, tests/peers/idp, on loopback) issued with the client
//!   credentials grant, verified by the gateway against the provider's JWKS (fetched
//!   once, then kept; a verified token is kept until it expires).
//!
//! Both clients talk to the same gateway and call the demo server's `echo` (16 B), taking
//! turns call by call so drift cannot decide the ratio. `scripts/bench-ratios.sh` prints
//! jwt/own_token (target ≤ 1.02×). Needs `tests/peers/node_modules` (the test command, or
//! `npm ci` in tests/peers).

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

const AIRLOCK: &str = env!("CARGO_BIN_EXE_airlock");

fn peers() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/peers")
}

/// A child process killed (with its group) when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-KILL", &format!("-{}", self.0.id())])
            .status();
        let _ = self.0.wait();
    }
}

fn node(args: &[&str]) -> String {
    let out = Command::new("node").args(args).output().expect("run node");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// The provider for `resource`, and its issuer.
fn provider(work: &Path, resource: &str) -> (Running, String) {
    let mint = peers().join("idp/mint.mjs");
    let key = node(&[mint.to_str().unwrap(), "keygen", "bench-key"]);
    let config = json!({
        "port": 0,
        "key": serde_json::from_str::<Value>(&key).unwrap(),
        "clients": [{"client_id": "bench", "client_secret": "bench-secret", "groups": [], "scope": "mcp:tools"}],
        "resources": [resource],
        "access_token_ttl": 3600,
    });
    let file = work.join("provider.json");
    std::fs::write(&file, config.to_string()).unwrap();
    let mut child = Command::new("node")
        .arg(peers().join("idp/provider.mjs"))
        .arg(&file)
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the identity provider (npm ci in tests/peers first)");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let issuer: Value = serde_json::from_str(&line).expect("the provider's issuer line");
    (
        Running(child),
        issuer["issuer"].as_str().unwrap().to_string(),
    )
}

fn airlock(work: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(AIRLOCK);
    command
        .arg("--config")
        .arg(work.join("airlock.toml"))
        .arg("--data-dir")
        .arg(work.join("data"))
        .args(args)
        .env("AIRLOCK_CONFIG", work.join("no-user-config.toml"));
    command
}

/// `airlock serve --http` at `addr` behind `[serve.auth]`.
fn gateway(work: &Path, addr: &str) -> Running {
    let mut child = airlock(work, &["serve", "--http", addr, "--require-token"])
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start airlock serve --http");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut sent = false;
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if !sent && line.contains("listening on ") {
                let _ = tx.send(());
                sent = true;
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(120))
        .expect("airlock serve --http printed its address");
    Running(child)
}

async fn client(url: &str, token: &str) -> RunningService<RoleClient, ()> {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.to_string()).auth_header(token),
    );
    ().serve(transport).await.expect("connect to the gateway")
}

fn echo(text: &str) -> CallToolRequestParams {
    let args = json!({"text": text}).as_object().cloned().unwrap();
    CallToolRequestParams::new("mcp__demo__echo").with_arguments(args)
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let work = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let url = format!("http://{addr}/mcp");
    let (_provider, issuer) = provider(work.path(), &url);
    std::fs::write(
        work.path().join("airlock.toml"),
        format!(
            "[mcp_servers.demo]\ntype = \"stdio\"\ncommand = {AIRLOCK:?}\nargs = [\"demo-server\"]\n\n[serve.auth]\nissuer = {issuer:?}\naudience = {url:?}\nrequired_scopes = [\"mcp:tools\"]\n"
        ),
    )
    .unwrap();
    let made = airlock(
        work.path(),
        &["--json", "--agent", "machine", "serve", "tokens", "add"],
    )
    .output()
    .unwrap();
    let own: Value = serde_json::from_slice(&made.stdout).expect("a token");
    let own = own["token"].as_str().unwrap().to_string();
    let jwt = rt.block_on(async {
        let answer: Value = reqwest::Client::new()
            .post(format!("{issuer}/token"))
            .basic_auth("bench", Some("bench-secret"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!(
                "grant_type=client_credentials&scope=mcp%3Atools&resource={}",
                url.replace(':', "%3A").replace('/', "%2F")
            ))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        answer["access_token"]
            .as_str()
            .expect("an access token")
            .to_string()
    });
    let _gateway = gateway(work.path(), &addr);
    let with_own = rt.block_on(client(&url, &own));
    let with_jwt = rt.block_on(client(&url, &jwt));
    let text = "0123456789abcdef";
    for running in [&with_own, &with_jwt] {
        let out = rt.block_on(running.call_tool(echo(text))).unwrap();
        assert_eq!(
            serde_json::to_value(&out).unwrap()["content"][0]["text"],
            text
        );
    }
    // Turns: each iteration of either function makes one call of each kind, in an order
    // that alternates, and is charged its own kind's time only.
    let mut group = c.benchmark_group("identity_call_16B");
    for (name, mine) in [("own_token", 0usize), ("jwt", 1usize)] {
        let clients = [&with_own, &with_jwt];
        group.bench_function(name, |b| {
            let mut flip = false;
            b.iter_custom(|iterations| {
                let mut spent = Duration::ZERO;
                for _ in 0..iterations {
                    flip = !flip;
                    for turn in if flip { [0, 1] } else { [1, 0] } {
                        let started = Instant::now();
                        rt.block_on(clients[turn].call_tool(echo(text))).unwrap();
                        if turn == mine {
                            spent += started.elapsed();
                        }
                    }
                }
                spent
            })
        });
    }
    group.finish();
    // Closing the sessions is bounded: the gateway is killed right after anyway.
    rt.block_on(async {
        let closing = async {
            let _ = with_own.cancel().await;
            let _ = with_jwt.cancel().await;
        };
        let _ = tokio::time::timeout(Duration::from_secs(5), closing).await;
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
