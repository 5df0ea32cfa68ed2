//! Soak: 16 agents × 500 calls of mixed sizes through the plugins, with cancellations
//! and server crashes mixed in, against a real server (the hand-written raw server, so
//! the run measures Airlock rather than a Python SDK). After warm-up the resident set
//! stays flat, and once Airlock closes, the file descriptors, threads and child
//! processes are back to what they were before it started. Bounded: a fixed number of
//! calls. The figures are printed (`--nocapture`).

mod support;

use std::time::{Duration, Instant};

use airlock_host::{Airlock, CallOptions, ErrorCode};
use serde_json::json;
use support::{Workspace, python, python_server, toml_str};
use tokio_util::sync::CancellationToken;

const AGENTS: usize = 16;
const CALLS: usize = 500;

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn count(dir: &str) -> usize {
    std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0)
}

/// Processes whose parent is this one (zombies awaiting their reaper included).
fn children() -> usize {
    let me = std::process::id().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read_to_string(e.path().join("stat")).is_ok_and(|stat| {
                stat.rsplit(')')
                    .next()
                    .and_then(|rest| rest.split_whitespace().nth(1))
                    == Some(me.as_str())
            })
        })
        .count()
}

async fn agent_calls(airlock: Airlock, agent: usize) -> (usize, usize, usize) {
    let (mut ok, mut cancelled, mut crashed) = (0, 0, 0);
    for i in 0..CALLS {
        let options = CallOptions {
            agent: format!("agent-{agent}"),
            ..Default::default()
        };
        let (tool, args) = match i % 10 {
            _ if i == 250 => ("mcp__fx__die", json!({})),
            0 if i % 50 == 0 => ("mcp__fx__slow", json!({})),
            1 => ("mcp__fx__big", json!({"size": 64 << 10})),
            2 if i % 100 == 2 => ("mcp__fx__big", json!({"size": 1 << 20})),
            3 | 4 => ("mcp__fx__leak", json!({})),
            5 => ("mcp__fx__big", json!({"size": 4096})),
            _ => ("mcp__fx__echo", json!({"text": format!("call {i}")})),
        };
        let cancel = CancellationToken::new();
        if tool == "mcp__fx__slow" {
            let c = cancel.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(20)).await;
                c.cancel();
            });
        }
        let outcome = airlock
            .calls()
            .call_with(
                tool,
                args,
                CallOptions {
                    cancel: Some(cancel),
                    ..options
                },
            )
            .await;
        match outcome {
            Ok(out) => {
                assert!(
                    !out.preview.contains("soak-secret-7f3a9c"),
                    "a secret leaked"
                );
                ok += 1;
            }
            Err(e) if e.code == ErrorCode::Cancelled => cancelled += 1,
            Err(e) if tool == "mcp__fx__die" => {
                assert_eq!(e.code, ErrorCode::ServiceUnavailable, "{e}");
                crashed += 1;
            }
            Err(e) => panic!("agent {agent}, call {i} ({tool}): {e}"),
        }
    }
    (ok, cancelled, crashed)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_keep_alive(Duration::from_millis(200))
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn sixteen_agents_times_500_calls_leave_nothing_behind() {
    // As the `airlock` binary does: without it glibc's moving mmap threshold fragments
    // the heap with large results, and the resident set measures glibc, not Airlock.
    assert!(airlock_host::alloc::pin_mmap_threshold());
    let ws = Workspace::new(&format!(
        "[mcp_servers.fx]\ncommand = {}\nargs = [{}]\nenv = {{ SERVICE_TOKEN = \"soak-secret-7f3a9c\" }}\ncancel_grace_secs = 2\n",
        toml_str(python().display().to_string()),
        toml_str(python_server("raw_server.py").display().to_string()),
    ));
    // Process-wide pools (the compiler's threads, the allocator) are made by a first
    // start, on a runtime of its own, before the baseline is taken.
    let first = runtime();
    first.block_on(async {
        Airlock::start(ws.load(), ws.options())
            .await
            .unwrap()
            .close()
            .await
    });
    drop(first);
    std::thread::sleep(Duration::from_millis(500));
    let (fds_before, threads_before, children_before) =
        (count("/proc/self/fd"), count("/proc/self/task"), children());
    let started = Instant::now();
    let runtime = runtime();
    let (warm_rss, end_rss, totals) = runtime.block_on(async {
        let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
        // Warm-up: every agent's session, the plugin instances, the allocator's pools.
        let warm: Vec<_> = (0..AGENTS)
            .map(|a| {
                let airlock = airlock.clone();
                tokio::spawn(async move {
                    for _ in 0..20 {
                        airlock
                            .calls()
                            .call_with(
                                "mcp__fx__big",
                                json!({"size": 1 << 20}),
                                CallOptions {
                                    agent: format!("agent-{a}"),
                                    ..Default::default()
                                },
                            )
                            .await
                            .unwrap();
                    }
                })
            })
            .collect();
        futures::future::join_all(warm).await;
        let warm_rss = rss_kib();
        let runs: Vec<_> = (0..AGENTS)
            .map(|a| tokio::spawn(agent_calls(airlock.clone(), a)))
            .collect();
        let mut totals = (0, 0, 0);
        for run in runs {
            let (ok, cancelled, crashed) = run.await.unwrap();
            totals = (totals.0 + ok, totals.1 + cancelled, totals.2 + crashed);
        }
        let end_rss = rss_kib();
        airlock.close().await;
        (warm_rss, end_rss, totals)
    });
    drop(runtime);
    let elapsed = started.elapsed();
    let deadline = Instant::now() + Duration::from_secs(10);
    let settled = || (count("/proc/self/fd"), count("/proc/self/task"), children());
    while settled() != (fds_before, threads_before, children_before) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let (fds_after, threads_after, children_after) = settled();
    println!(
        "soak: {} calls ({} ok, {} cancelled, {} crashed servers) in {:.1} s; RSS {} KiB after warm-up, {} KiB at the end ({:+.1}%); fds {fds_before} -> {fds_after}, threads {threads_before} -> {threads_after}, children {children_before} -> {children_after}",
        AGENTS * CALLS,
        totals.0,
        totals.1,
        totals.2,
        elapsed.as_secs_f64(),
        warm_rss,
        end_rss,
        (end_rss as f64 / warm_rss as f64 - 1.0) * 100.0
    );
    assert_eq!(totals.0 + totals.1 + totals.2, AGENTS * CALLS);
    assert_eq!(totals.2, AGENTS, "each agent's server crashed once");
    assert!(
        totals.1 >= AGENTS * 9,
        "cancellations happened: {}",
        totals.1
    );
    assert!(
        end_rss <= warm_rss + warm_rss / 4 + 32 * 1024,
        "RSS grew from {warm_rss} KiB to {end_rss} KiB"
    );
    assert_eq!(fds_after, fds_before, "file descriptors");
    assert_eq!(threads_after, threads_before, "threads");
    assert_eq!(children_after, children_before, "child processes");
}
