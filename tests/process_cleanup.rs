//! No orphans: closing Airlock ends every server process it started, including the
//! grandchildren a server spawned (a real Python SDK server over stdio); a client killed
//! mid-call, or SIGTERM to `airlock serve`, leaves no upstream process behind.

mod support;

use std::time::{Duration, Instant};

use airlock_host::Airlock;
use rmcp::serve_client;
use serde_json::json;
use support::{HttpGateway, Workspace, call, gateway_workspace, secret_entry, text_of};

#[tokio::test]
async fn no_process_survives_close_including_grandchildren() {
    let ws = Workspace::new(&secret_entry("fx", ""));
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let out = airlock
        .calls()
        .call("mcp__fx__spawn_grandchild", json!({}), None)
        .await
        .unwrap();
    let grandchild: u32 = out.preview.trim().parse().unwrap();
    assert!(
        !support::process_gone(grandchild),
        "the grandchild runs while the session is open"
    );
    airlock.close().await;
    let deadline = Instant::now() + Duration::from_secs(5);
    while !support::process_gone(grandchild) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        support::process_gone(grandchild),
        "grandchild {grandchild} survived close"
    );
}

/// Every process whose parent chain reaches `root`.
fn descendants(root: u32) -> Vec<u32> {
    let mut parents = std::collections::HashMap::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let rest = stat.rsplit(')').next().unwrap_or("");
        let ppid: u32 = rest
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        parents.insert(pid, ppid);
    }
    let mut found = Vec::new();
    for &pid in parents.keys() {
        let mut p = pid;
        while let Some(&parent) = parents.get(&p) {
            if parent == root {
                found.push(pid);
                break;
            }
            if parent <= 1 {
                break;
            }
            p = parent;
        }
    }
    found
}

fn wait_all_gone(pids: &[u32]) -> Vec<u32> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let alive: Vec<u32> = pids
            .iter()
            .copied()
            .filter(|p| !support::process_gone(*p))
            .collect();
        if alive.is_empty() || Instant::now() > deadline {
            return alive;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_killed_mid_call_leaves_no_upstream_process() {
    let raw_log = tempfile::NamedTempFile::new().unwrap();
    let ws = gateway_workspace(raw_log.path(), None);
    let mut child = support::stdio_gateway(&ws, &["serve"]);
    let serve_pid = child.id().unwrap();
    let transport = rmcp::transport::async_rw::AsyncRwTransport::new_client(
        child.stdout.take().unwrap(),
        child.stdin.take().unwrap(),
    );
    let client = serve_client((), transport).await.unwrap();
    let spawned = client
        .call_tool(call("mcp__fx__spawn_grandchild", json!({})))
        .await
        .unwrap();
    let grandchild: u32 = text_of(&spawned).trim().parse().unwrap();
    let peer = client.peer().clone();
    let pending = tokio::spawn(async move {
        peer.call_tool_once(call("mcp__fx__sleepy", json!({"seconds": 60})))
            .await
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut upstream = descendants(serve_pid);
    upstream.push(grandchild);
    assert!(
        upstream.len() >= 4,
        "servers and the grandchild run: {upstream:?}"
    );
    // The client dies: its pipes close mid-call.
    drop(client);
    pending.abort();
    let exited = tokio::time::timeout(Duration::from_secs(20), child.wait()).await;
    assert!(exited.is_ok(), "airlock serve exits when its client dies");
    let alive = wait_all_gone(&upstream);
    assert!(alive.is_empty(), "left behind: {alive:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_closes_every_upstream_process() {
    let raw_log = tempfile::NamedTempFile::new().unwrap();
    let ws = gateway_workspace(raw_log.path(), None);
    let mut gateway = HttpGateway::start(&ws, &[]);
    let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(gateway.url.clone());
    let client = serve_client((), transport).await.unwrap();
    let spawned = client
        .call_tool(call("mcp__fx__spawn_grandchild", json!({})))
        .await
        .unwrap();
    let grandchild: u32 = text_of(&spawned).trim().parse().unwrap();
    let mut upstream = descendants(gateway.pid());
    upstream.push(grandchild);
    assert!(
        upstream.len() >= 4,
        "servers and the grandchild run: {upstream:?}"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(gateway.pid() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while gateway.try_wait().is_none() {
        assert!(Instant::now() < deadline, "airlock serve exits on SIGTERM");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let alive = wait_all_gone(&upstream);
    assert!(alive.is_empty(), "left behind after SIGTERM: {alive:?}");
    drop(client);
}
