//! P8: 64 concurrent callers on 8 services (8 demo-server child processes), each caller
//! making calls one after another through `Airlock::call_with` (4 KiB results), with the
//! host's runtime on one worker thread and on two, in the same run. Criterion times a
//! round of 64 × 8 calls (`concurrency_64x8/one_worker`, `/two_workers`); a separate
//! pass per runtime records every call's latency and writes p50/p99 and calls/s to
//! `target/criterion/concurrency_64x8/latency.json`, which `scripts/bench-ratios.sh`
//! prints.

use std::time::{Duration, Instant};

use airlock_host::config::{Config, process_env};
use airlock_host::{Airlock, AirlockOptions, CallOptions};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;

const AIRLOCK: &str = env!("CARGO_BIN_EXE_airlock");
const SERVICES: usize = 8;
const CALLERS: usize = 64;
const CALLS_PER_CALLER: usize = 8;

fn config_text() -> String {
    (0..SERVICES)
        .map(|i| {
            format!("[mcp_servers.demo{i}]\ntype = \"stdio\"\ncommand = {AIRLOCK:?}\nargs = [\"demo-server\"]\n")
        })
        .collect()
}

/// One round: every caller makes its calls; returns each call's latency.
async fn round(airlock: &Airlock, text: &str) -> Vec<Duration> {
    let callers = (0..CALLERS).map(|caller| {
        let airlock = airlock.clone();
        let text = text.to_string();
        tokio::spawn(async move {
            let tool = format!("mcp__demo{}__echo", caller % SERVICES);
            let mut latencies = Vec::with_capacity(CALLS_PER_CALLER);
            for _ in 0..CALLS_PER_CALLER {
                let started = Instant::now();
                let out = airlock
                    .calls()
                    .call_with(&tool, json!({"text": text}), CallOptions::default())
                    .await
                    .expect("call succeeds");
                assert!(!out.is_error);
                latencies.push(started.elapsed());
            }
            latencies
        })
    });
    let mut all = Vec::with_capacity(CALLERS * CALLS_PER_CALLER);
    for caller in futures::future::join_all(callers).await {
        all.extend(caller.expect("caller task"));
    }
    all
}

fn runtime(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .unwrap()
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e3
}

fn bench(c: &mut Criterion) {
    let work = tempfile::tempdir().unwrap();
    let config_path = work.path().join("airlock.toml");
    std::fs::write(&config_path, config_text()).unwrap();
    let text = "0123456789abcdef".repeat(256);
    let mut group = c.benchmark_group("concurrency_64x8");
    group.throughput(Throughput::Elements((CALLERS * CALLS_PER_CALLER) as u64));
    group.sample_size(10);
    let mut report = serde_json::Map::new();
    for (label, workers) in [("one_worker", 1), ("two_workers", 2)] {
        let rt = runtime(workers);
        let mut options = AirlockOptions::new(work.path().join(label));
        options.plugin_cache = Some(work.path().join("plugin-cache"));
        let config = Config::from_str(&config_path, &config_text(), &process_env).unwrap();
        let airlock = rt.block_on(Airlock::start(config, options)).unwrap();
        // Warm-up: every session open, every instance pool filled.
        rt.block_on(round(&airlock, &text));
        group.bench_function(label, |b| {
            b.iter_custom(|iters| {
                let started = Instant::now();
                for _ in 0..iters {
                    rt.block_on(round(&airlock, &text));
                }
                started.elapsed()
            })
        });
        let started = Instant::now();
        let mut latencies = Vec::new();
        for _ in 0..5 {
            latencies.extend(rt.block_on(round(&airlock, &text)));
        }
        let elapsed = started.elapsed().as_secs_f64();
        latencies.sort();
        report.insert(
            label.to_string(),
            json!({
                "calls_per_sec": latencies.len() as f64 / elapsed,
                "p50_ms": percentile(&latencies, 0.50),
                "p99_ms": percentile(&latencies, 0.99),
                "max_ms": percentile(&latencies, 1.0),
            }),
        );
        rt.block_on(airlock.close());
    }
    group.finish();
    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/criterion/concurrency_64x8");
    std::fs::create_dir_all(&out).unwrap();
    let report = serde_json::Value::Object(report);
    std::fs::write(out.join("latency.json"), report.to_string()).unwrap();
    println!("concurrency_64x8 latency: {report}");
}

criterion_group!(benches, bench);
criterion_main!(benches);
