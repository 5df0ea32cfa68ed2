//! One tool call through `airlock serve --http` in each protocol era, in the same run:
//!
//! - `handshake`: an rmcp client that opened a 2025-11-25 session (`initialize`, a
//!   session id on every request);
//! - `stateless`: an rmcp client on 2026-07-28 (`server/discover`, then self-contained
//!   requests carrying their protocol version, client info and capabilities).
//!
//! Both call the demo server's `echo` (built into the `airlock` binary) with 16 B and
//! 4 KiB. `scripts/bench-ratios.sh` prints stateless/handshake.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rmcp::model::{CallToolRequestParams, ProtocolVersion};
use rmcp::service::{ClientLifecycleMode, RoleClient, RunningService, serve_client_with_lifecycle};
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::json;

const AIRLOCK: &str = env!("CARGO_BIN_EXE_airlock");

/// `airlock serve --http` on a free loopback port, and its endpoint.
fn gateway(work: &std::path::Path) -> (Child, String) {
    let config = work.join("airlock.toml");
    std::fs::write(
        &config,
        format!("[mcp_servers.demo]\ntype = \"stdio\"\ncommand = {AIRLOCK:?}\nargs = [\"demo-server\"]\n"),
    )
    .unwrap();
    let mut child = Command::new(AIRLOCK)
        .arg("--config")
        .arg(&config)
        .arg("--data-dir")
        .arg(work.join("data"))
        .args(["serve", "--http", "127.0.0.1:0"])
        .env("AIRLOCK_CONFIG", work.join("no-user-config.toml"))
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
            if !sent && let Some(at) = line.split("listening on ").nth(1) {
                let _ = tx.send(at.trim().to_string());
                sent = true;
            }
        }
    });
    let url = rx
        .recv_timeout(std::time::Duration::from_secs(120))
        .expect("airlock serve --http printed its address");
    (child, url)
}

async fn client(url: &str, lifecycle: ClientLifecycleMode) -> RunningService<RoleClient, ()> {
    let transport = StreamableHttpClientTransport::from_uri(url.to_string());
    serve_client_with_lifecycle((), transport, lifecycle)
        .await
        .expect("connect to the gateway")
}

fn echo(text: &str) -> CallToolRequestParams {
    let args = json!({"text": text}).as_object().cloned().unwrap();
    CallToolRequestParams::new("mcp__demo__echo").with_arguments(args)
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let work = tempfile::tempdir().unwrap();
    let (mut child, url) = gateway(work.path());
    let handshake = rt.block_on(client(&url, ClientLifecycleMode::Initialize));
    let stateless = rt.block_on(client(
        &url,
        ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
    ));
    for (name, running) in [("handshake", &handshake), ("stateless", &stateless)] {
        let version = running
            .peer()
            .peer_info()
            .map(|info| info.protocol_version.to_string());
        eprintln!("{name}: MCP {version:?}");
    }
    for (label, size) in [("16B", 16usize), ("4KiB", 4 << 10)] {
        let text: String = "0123456789abcdef".repeat(size / 16);
        for running in [&handshake, &stateless] {
            let out = rt.block_on(running.call_tool(echo(&text))).unwrap();
            let value = serde_json::to_value(&out).unwrap();
            assert_eq!(value["content"][0]["text"], json!(text));
        }
        let mut group = c.benchmark_group(format!("era_call_{label}"));
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_function("handshake", |b| {
            b.iter(|| rt.block_on(handshake.call_tool(echo(&text))).unwrap())
        });
        group.bench_function("stateless", |b| {
            b.iter(|| rt.block_on(stateless.call_tool(echo(&text))).unwrap())
        });
        group.finish();
    }
    rt.block_on(async {
        let _ = handshake.cancel().await;
        let _ = stateless.cancel().await;
    });
    let _ = child.kill();
    let _ = child.wait();
}

criterion_group!(benches, bench);
criterion_main!(benches);
