//! No orphans: closing Airlock ends every server process it started, including the
//! grandchildren a server spawned (a real Python SDK server over stdio).

mod support;

use std::time::{Duration, Instant};

use airlock_host::Airlock;
use serde_json::json;
use support::{Workspace, secret_entry};

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
