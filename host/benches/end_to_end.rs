//! One tool call end to end, on the demo server built into the `airlock` binary (a real
//! child process speaking MCP over stdio), measured five ways in the same run:
//!
//! - `baseline`: a plain rmcp client talking to the server directly;
//! - `airlock`: `Airlock::call_with` (session, content plugin, redaction plugin,
//!   retention), P2;
//! - `gateway`: a plain rmcp client talking to `airlock serve` over stdio, which calls the
//!   server (issue 10's gateway figure);
//! - `gateway_cores`: the same gateway with as many runtime workers as cores
//!   (`TOKIO_WORKER_THREADS`), where the stdio gateway runs on one;
//! - `relay`: a plain rmcp client talking to a bare byte relay in front of the server
//!   (this benchmark's binary run again as one: two threads copying bytes, no parsing),
//!   the floor of any second hop, which `gateway` is measured against.
//!
//! Results of 16 B, 4 KiB and 1 MiB (the server's `echo` tool). `scripts/bench-ratios.sh`
//! prints airlock/baseline, gateway/baseline, gateway/relay and gateway/gateway_cores.

use std::process::Stdio;

use airlock_host::config::{Config, process_env};
use airlock_host::{Airlock, AirlockOptions, CallOptions};
use criterion::{Criterion, Throughput, criterion_group};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use serde_json::{Value, json};

const AIRLOCK: &str = env!("CARGO_BIN_EXE_airlock");

/// Set (to the server's program) when this binary runs as the bare relay.
const RELAY: &str = "AIRLOCK_BENCH_RELAY";

/// The bare relay: starts the server and copies bytes both ways until either side
/// closes (`std::io::copy`, which splices between pipes on Linux).
fn relay(program: &str) {
    let mut child = std::process::Command::new(program)
        .arg("demo-server")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the relayed server");
    let mut to_server = child.stdin.take().unwrap();
    let mut from_server = child.stdout.take().unwrap();
    std::thread::spawn(move || std::io::copy(&mut std::io::stdin().lock(), &mut to_server));
    let _ = std::io::copy(&mut from_server, &mut std::io::stdout().lock());
    let _ = child.kill();
    let _ = child.wait();
}

fn config_text() -> String {
    format!(
        "[mcp_servers.demo]\ntype = \"stdio\"\ncommand = {AIRLOCK:?}\nargs = [\"demo-server\"]\n"
    )
}

/// A plain rmcp client over the stdio of `command`, which is kept alive with it.
async fn rmcp_client(
    mut command: tokio::process::Command,
) -> (RunningService<RoleClient, ()>, tokio::process::Child) {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the MCP server");
    let transport = rmcp::transport::async_rw::AsyncRwTransport::new_client(
        child.stdout.take().unwrap(),
        child.stdin.take().unwrap(),
    );
    let client = ().serve(transport).await.expect("MCP handshake");
    (client, child)
}

fn echo(name: &str, text: &str) -> CallToolRequestParams {
    let args = json!({"text": text}).as_object().cloned().unwrap();
    CallToolRequestParams::new(name.to_string()).with_arguments(args)
}

fn first_text(result: &rmcp::model::CallToolResult) -> String {
    let v = serde_json::to_value(result).unwrap();
    v["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let work = tempfile::tempdir().unwrap();
    let config_path = work.path().join("airlock.toml");
    std::fs::write(&config_path, config_text()).unwrap();
    let plugin_cache = work.path().join("plugin-cache");

    // Direct: the server itself.
    let (direct, _direct_child) = rt.block_on(rmcp_client({
        let mut cmd = tokio::process::Command::new(AIRLOCK);
        cmd.arg("demo-server");
        cmd
    }));

    // The library.
    let mut options = AirlockOptions::new(work.path().join("library-data"));
    options.plugin_cache = Some(plugin_cache.clone());
    let config = Config::from_str(&config_path, &config_text(), &process_env).unwrap();
    let airlock = rt.block_on(Airlock::start(config, options)).unwrap();

    // The bare relay in front of the server.
    let (relayed, _relay_child) = rt.block_on(rmcp_client({
        let mut cmd = tokio::process::Command::new(std::env::current_exe().unwrap());
        cmd.env(RELAY, AIRLOCK);
        cmd
    }));

    // The gateway: `airlock serve` over stdio, as it runs (one runtime worker), and with
    // as many workers as cores (what it ran with before).
    let serve = |data: &str, workers: Option<&str>| {
        let mut cmd = tokio::process::Command::new(AIRLOCK);
        cmd.arg("--config")
            .arg(&config_path)
            .arg("--data-dir")
            .arg(work.path().join(data))
            .arg("serve")
            .env("AIRLOCK_PLUGIN_CACHE", &plugin_cache)
            .env("AIRLOCK_CONFIG", work.path().join("no-user-config.toml"))
            .env_remove("TOKIO_WORKER_THREADS");
        if let Some(workers) = workers {
            cmd.env("TOKIO_WORKER_THREADS", workers);
        }
        cmd
    };
    let (gateway, _gateway_child) = rt.block_on(rmcp_client(serve("gateway-data", None)));
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let (gateway_cores, _gateway_cores_child) = rt.block_on(rmcp_client(serve(
        "gateway-cores-data",
        Some(&cores.to_string()),
    )));

    for (label, size) in [("16B", 16usize), ("4KiB", 4 << 10), ("1MiB", 1 << 20)] {
        let text: String = "0123456789abcdef".repeat(size / 16);
        // All three give back the same text before anything is timed.
        let direct_out = rt.block_on(direct.call_tool(echo("echo", &text))).unwrap();
        assert_eq!(first_text(&direct_out), text);
        let relayed_out = rt.block_on(relayed.call_tool(echo("echo", &text))).unwrap();
        assert_eq!(first_text(&relayed_out), text);
        let library_out = rt
            .block_on(airlock.calls().call_with(
                "mcp__demo__echo",
                json!({"text": text}),
                CallOptions::default(),
            ))
            .unwrap();
        assert_eq!(
            library_out.content_json()[0]["text"],
            Value::from(text.clone())
        );
        let gateway_out = rt
            .block_on(gateway.call_tool(echo("mcp__demo__echo", &text)))
            .unwrap();
        assert!(first_text(&gateway_out).starts_with(&text[..text.len().min(1024)]));

        let mut group = c.benchmark_group(format!("call_{label}"));
        group.throughput(Throughput::Bytes(size as u64));
        if size > 64 << 10 {
            group.sample_size(20);
        }
        group.bench_function("baseline", |b| {
            b.iter(|| rt.block_on(direct.call_tool(echo("echo", &text))).unwrap())
        });
        group.bench_function("relay", |b| {
            b.iter(|| rt.block_on(relayed.call_tool(echo("echo", &text))).unwrap())
        });
        group.bench_function("airlock", |b| {
            b.iter(|| {
                rt.block_on(airlock.calls().call_with(
                    "mcp__demo__echo",
                    json!({"text": text}),
                    CallOptions::default(),
                ))
                .unwrap()
            })
        });
        group.bench_function("gateway", |b| {
            b.iter(|| {
                rt.block_on(gateway.call_tool(echo("mcp__demo__echo", &text)))
                    .unwrap()
            })
        });
        group.bench_function("gateway_cores", |b| {
            b.iter(|| {
                rt.block_on(gateway_cores.call_tool(echo("mcp__demo__echo", &text)))
                    .unwrap()
            })
        });
        group.finish();
    }
    rt.block_on(async {
        let _ = direct.cancel().await;
        let _ = relayed.cancel().await;
        let _ = gateway.cancel().await;
        let _ = gateway_cores.cancel().await;
        airlock.close().await;
    });
}

criterion_group!(benches, bench);

fn main() {
    if let Ok(program) = std::env::var(RELAY) {
        relay(&program);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
