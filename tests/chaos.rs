//! Chaos: the registry's PostgreSQL goes away under Airlock (a real PostgreSQL and S3
//! server, started by the test command, reached through a relay the test cuts and
//! stalls). The library: every statement is bounded, the failure is typed, confirmed
//! tokens and grants outlive the outage and revoked ones do not, and the registry comes
//! back by itself. The gateway: a client's session outlives the outage, its calls keep
//! working on what was confirmed, a token never seen before is refused with 503 and
//! `registry_unavailable`, and the first calls after recovery work on the same session.
//! The chaos suite: two replicas under load while PostgreSQL restarts, S3 stalls, an
//! upstream dies mid-call and a replica is killed (see [`the_chaos_suite`]).

mod support;

use std::time::{Duration, Instant};

use airlock_host::config::{RegistryBounds, RegistryLocation};
use airlock_host::registry::{Registry, RegistryError, TokenRecord};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use support::{
    HttpGateway, Outage, Workspace, python_fixture_entry, remote_storage_tables, storage_services,
    storage_tag,
};

/// The test PostgreSQL's `host:port`, as written in its URL.
fn postgres_authority() -> String {
    let (postgres, _, _) = storage_services();
    postgres
        .rsplit('@')
        .next()
        .and_then(|rest| rest.split('/').next())
        .expect("the test PostgreSQL URL has user@host:port/db")
        .to_string()
}

/// A relay in front of the test PostgreSQL.
fn relay() -> Outage {
    Outage::start(postgres_authority().parse().unwrap())
}

/// `text` with the test PostgreSQL's address replaced by the relay's.
fn behind(outage: &Outage, text: &str) -> String {
    text.replace(
        &postgres_authority(),
        &format!("127.0.0.1:{}", outage.port()),
    )
}

/// Whether `e` is the typed outage error, naming the database.
fn is_outage(e: &RegistryError) -> bool {
    e.is_unavailable() && e.to_string().contains("cannot be reached")
}

/// The tests here cut, stall and restart the storage every suite shares: one at a time.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[test]
fn the_registry_bounds_an_outage_recalls_what_it_confirmed_and_comes_back() {
    let _serial = serial();
    let outage = relay();
    let (url, _, _) = storage_services();
    let dir = tempfile::tempdir().unwrap();
    let timeout = Duration::from_secs(1);
    let registry = Registry::open_at(
        dir.path(),
        &RegistryLocation::Postgres {
            url: behind(&outage, &url),
            schema: storage_tag(),
            bounds: RegistryBounds {
                timeout,
                outage_grace: Duration::from_secs(60),
            },
            token_key: None,
        },
    )
    .unwrap();
    let token = TokenRecord {
        id: "tok1".into(),
        agent: "alice".into(),
        fingerprint: "sha256:alice".into(),
        secret_ref: "ref".into(),
        created_at: 0,
    };
    registry.insert_token(&token).unwrap();
    registry.grant("alice", "github").unwrap();
    registry.grant("alice", "jira").unwrap();
    assert!(registry.is_granted("alice", "github").unwrap());
    assert!(registry.is_granted("alice", "jira").unwrap());
    assert_eq!(
        registry
            .token_by_fingerprint("sha256:alice")
            .unwrap()
            .unwrap()
            .agent,
        "alice"
    );
    registry.revoke("alice", "jira").unwrap();

    for (what, stall) in [("cut", false), ("stalled", true)] {
        if stall {
            outage.stall();
        } else {
            outage.cut();
        }
        // What the database confirmed still answers, at once or within one timeout.
        let started = Instant::now();
        assert!(registry.is_granted("alice", "github").unwrap(), "{what}");
        assert_eq!(
            registry
                .token_by_fingerprint("sha256:alice")
                .unwrap()
                .unwrap()
                .id,
            "tok1",
            "{what}"
        );
        assert!(
            started.elapsed() < timeout * 3,
            "{what}: {:?}",
            started.elapsed()
        );
        // Grant answers kept in memory stop once the listener misses the database: a
        // cut connection at once, a stalled one when a ping gets no answer (1 s here).
        let deaf = Instant::now() + timeout * 4;
        while registry.hears_changes() && Instant::now() < deaf {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!registry.hears_changes(), "{what}");
        let started = Instant::now();
        // What it refused, or never said, is a typed error, bounded.
        for refused in [
            registry.is_granted("alice", "jira").unwrap_err(),
            registry.is_granted("bob", "github").unwrap_err(),
            registry.token_by_fingerprint("sha256:bob").unwrap_err(),
            registry.all_grants().unwrap_err(),
        ] {
            assert!(is_outage(&refused), "{what}: {refused}");
            assert!(!refused.to_string().contains("password"), "{refused}");
        }
        assert!(
            started.elapsed() < timeout * 6,
            "{what}: {:?}",
            started.elapsed()
        );
        assert!(registry.reachable().is_err(), "{what}");

        outage.restore();
        // Back by itself, once the pause after the last failure (at most 2 s) is over.
        let back = Instant::now() + Duration::from_secs(10);
        while registry.reachable().is_err() && Instant::now() < back {
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(!registry.is_granted("bob", "github").unwrap(), "{what}");
        assert!(!registry.is_granted("alice", "jira").unwrap(), "{what}");
        assert!(registry.is_granted("alice", "github").unwrap(), "{what}");
    }

    // Revoked while the database answered: never recalled in the next outage.
    registry.revoke("alice", "github").unwrap();
    registry.delete_token("tok1").unwrap();
    outage.cut();
    assert!(is_outage(
        &registry.is_granted("alice", "github").unwrap_err()
    ));
    assert!(is_outage(
        &registry.token_by_fingerprint("sha256:alice").unwrap_err()
    ));
    outage.restore();
}

async fn client(gateway: &HttpGateway, token: &str) -> RunningService<RoleClient, ()> {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(gateway.url.clone()).auth_header(token),
    );
    ().serve(transport)
        .await
        .expect("the gateway accepts the client")
}

fn call(name: &str, args: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(name.to_string()).with_arguments(args.as_object().unwrap().clone())
}

fn text_of(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("")
}

/// `call`'s answer, or a panic after 20 s: a client that lost its session waits forever.
async fn bounded<T>(call: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), call)
        .await
        .expect("the gateway answered the call within 20 s")
}

/// An `initialize` POST with `token`: the status, the `Retry-After` header and the body.
async fn initialize(gateway: &HttpGateway, token: &str) -> (u16, Option<String>, String) {
    let response = reqwest::Client::new()
        .post(&gateway.url)
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .json(&json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "chaos", "version": "1"}}
        }))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let retry = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    (status, retry, response.text().await.unwrap_or_default())
}

fn token_of(ws: &Workspace, agent: &str) -> (String, String) {
    let (made, out) = ws.json(&["--agent", agent, "serve", "tokens", "add"], &[]);
    assert!(out.status.success(), "{made}");
    (
        made["id"].as_str().unwrap().to_string(),
        made["token"].as_str().unwrap().to_string(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::await_holding_lock)] // the guard serializes the suite's tests on purpose
async fn a_registry_outage_costs_only_the_calls_that_need_it() {
    let _serial = serial();
    let outage = relay();
    let tables = behind(&outage, &remote_storage_tables(&storage_tag()))
        .replace("[registry]\n", "[registry]\ntimeout_secs = 1\n");
    let ws = Workspace::with_storage(&python_fixture_entry("fx", ""), &tables);
    let (_, alice_token) = token_of(&ws, "alice");
    // Bob and Dave hold tokens the gateway has not seen when the registry goes down.
    let (_, bob_token) = token_of(&ws, "bob");
    let (_, dave_token) = token_of(&ws, "dave");
    let (carol_id, carol_token) = token_of(&ws, "carol");
    for agent in ["alice", "bob", "carol", "dave"] {
        let (granted, out) = ws.json(&["--agent", agent, "grants", "add", "fx"], &[]);
        assert!(out.status.success(), "{granted}");
    }
    let gateway = HttpGateway::start(&ws, &["--require-token", "--access", "grants"]);
    let alice = client(&gateway, &alice_token).await;
    let echoed = alice
        .call_tool(call("mcp__fx__echo", json!({"text": "before"})))
        .await
        .unwrap();
    assert_eq!(text_of(&echoed), "before");
    // Carol's token is seen, then removed: the gateway learns of it on her next request.
    assert_eq!(initialize(&gateway, &carol_token).await.0, 200);
    let (removed, out) = ws.json(&["serve", "tokens", "remove", &carol_id], &[]);
    assert!(out.status.success(), "{removed}");
    assert_eq!(initialize(&gateway, &carol_token).await.0, 401);

    for (what, stall, unseen) in [("cut", false, &bob_token), ("stalled", true, &dave_token)] {
        if stall {
            outage.stall();
        } else {
            outage.cut();
        }
        let started = Instant::now();
        let during = bounded(alice.call_tool(call("mcp__fx__echo", json!({"text": "during"}))))
            .await
            .unwrap_or_else(|e| panic!("registry {what}: the session was dropped: {e}"));
        assert_eq!(text_of(&during), "during", "registry {what}: {during:?}");
        assert!(
            started.elapsed() < Duration::from_secs(8),
            "registry {what}: {:?}",
            started.elapsed()
        );
        // A token this gateway never saw cannot be checked now.
        let (status, retry, body) = initialize(&gateway, unseen).await;
        assert_eq!(status, 503, "registry {what}: {body}");
        assert_eq!(retry.as_deref(), Some("2"));
        assert!(body.contains("registry_unavailable"), "{body}");
        // Carol's was seen removed: refused, outage or not.
        let (status, _, body) = initialize(&gateway, &carol_token).await;
        assert_ne!(
            status, 200,
            "registry {what}: a removed token got in: {body}"
        );

        outage.restore();
        let after = bounded(alice.call_tool(call("mcp__fx__echo", json!({"text": "after"}))))
            .await
            .unwrap_or_else(|e| panic!("registry back after {what}: the session is gone: {e}"));
        assert_eq!(text_of(&after), "after", "{after:?}");
        // It gets in once the registry answers again (after its pause, at most 2 s).
        let back = Instant::now() + Duration::from_secs(10);
        let mut status = 0;
        while status != 200 && Instant::now() < back {
            status = initialize(&gateway, unseen).await.0;
            if status != 200 {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        assert_eq!(status, 200, "registry back after {what}: still refused");
    }
    alice.cancel().await.unwrap();
    let logged = gateway.stderr_lines().join("\n");
    for token in [&alice_token, &bob_token, &carol_token, &dave_token] {
        assert!(!logged.contains(token.as_str()), "a token reached the log");
    }
}

/// Restarts the test PostgreSQL for real (`pg_ctl restart -m fast`), as its owner.
fn restart_postgres() {
    let dir = std::env::var("AIRLOCK_TEST_STORAGE_DIR").expect("run by scripts/test.sh");
    let bin = std::env::var("AIRLOCK_TEST_PG_BIN").expect("run by scripts/test.sh");
    let pg_ctl = format!("{bin}/pg_ctl");
    let root = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").unwrap()) == 0;
    let mut command = if root {
        let mut c = std::process::Command::new("setpriv");
        c.args([
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
            "--",
            &pg_ctl,
        ]);
        c
    } else {
        std::process::Command::new(&pg_ctl)
    };
    let out = command
        .args([
            "-D",
            &format!("{dir}/pg/data"),
            "-l",
            &format!("{dir}/pg/server.log"),
        ])
        .args(["-m", "fast", "-w", "restart"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A process's open file descriptors, threads and child processes.
fn resources(pid: u32) -> (usize, usize, usize) {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let threads = status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let children = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .map(|task| {
            let task = task.unwrap().path();
            std::fs::read_to_string(task.join("children"))
                .unwrap_or_default()
                .split_whitespace()
                .count()
        })
        .sum();
    (fds, threads, children)
}

/// How one call of the load ended.
#[derive(Debug, Clone)]
enum Outcome {
    /// A result, retained: its output id, the size the text must have, and whether the
    /// preview held it whole (`complete`).
    Kept(String, usize, bool),
    /// A typed refusal or failure (`_meta.error`).
    Typed(String),
    /// The connection to the replica went (its process was killed).
    Lost,
}

/// The chaos suite, bounded: two replicas on PostgreSQL and an S3-compatible
/// server, 8 clients calling continuously, while PostgreSQL restarts, S3 stalls for 5 s,
/// an upstream server dies mid-call and one replica is killed with SIGKILL. Afterwards
/// every call either kept a byte-exact output or failed with a typed error (or went
/// with the killed replica), the index and the store agree once mended, no session on
/// the surviving replica was dropped, and its descriptors, threads and child processes
/// are back to where they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::await_holding_lock)] // the guard serializes the suite's tests on purpose
async fn the_chaos_suite() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let _serial = serial();
    let (_, endpoint, _) = storage_services();
    let s3 = Outage::start(
        endpoint
            .trim_start_matches("http://")
            .parse()
            .expect("the test S3 endpoint is host:port"),
    );
    let tag = storage_tag();
    let tables = remote_storage_tables(&tag)
        .replace(&endpoint, &format!("http://127.0.0.1:{}", s3.port()))
        .replace("[registry]\n", "[registry]\ntimeout_secs = 2\n");
    let ws_a = Workspace::with_storage(&python_fixture_entry("fx", ""), &tables);
    let ws_b = Workspace::with_storage(&python_fixture_entry("fx", ""), &tables);
    let a = HttpGateway::start(&ws_a, &[]);
    let b = HttpGateway::start(&ws_b, &[]);
    let connect = async |gateway: &HttpGateway| {
        ().serve(StreamableHttpClientTransport::from_uri(gateway.url.clone()))
            .await
            .unwrap()
    };
    let mut clients = Vec::new();
    for i in 0..8 {
        let on_b = i % 2 == 1;
        let client = connect(if on_b { &b } else { &a }).await;
        let warm = client
            .call_tool(call("mcp__fx__echo", json!({"text": "warm"})))
            .await
            .unwrap();
        assert_eq!(text_of(&warm), "warm");
        clients.push((on_b, Arc::new(client)));
    }
    let baseline = resources(b.pid());

    // The load: each client calls until told to stop; a client of the killed replica
    // stops at its first lost connection.
    let stop = Arc::new(AtomicBool::new(false));
    // A call in flight on the replica when it is killed is lost with it (rmcp's client
    // would keep trying to reach it); a call on the survivor must answer.
    let a_killed = tokio_util::sync::CancellationToken::new();
    let mut load = Vec::new();
    for (n, (on_b, client)) in clients.iter().enumerate() {
        let (client, stop, on_b, a_killed) =
            (client.clone(), stop.clone(), *on_b, a_killed.clone());
        load.push(tokio::spawn(async move {
            let mut outcomes = Vec::new();
            let mut i = 0usize;
            while !stop.load(Ordering::SeqCst) {
                let size = 1_000 + (n * 7_919 + i * 104_729) % 150_000;
                i += 1;
                let answer = async {
                    let request =
                        client.call_tool(call("mcp__fx__big_text", json!({"size": size})));
                    if on_b {
                        tokio::time::timeout(Duration::from_secs(30), request)
                            .await
                            .unwrap_or_else(|_| panic!("a call on the surviving replica hung"))
                            .ok()
                    } else {
                        tokio::select! {
                            answer = request => answer.ok(),
                            _ = a_killed.cancelled() => None,
                        }
                    }
                };
                let outcome = match answer.await {
                    None => Outcome::Lost,
                    Some(result) => {
                        let meta = serde_json::to_value(&result.meta).unwrap();
                        match (result.is_error, meta["output_id"].as_str()) {
                            (Some(false) | None, Some(id)) => {
                                Outcome::Kept(id.to_string(), size, meta["complete"] == true)
                            }
                            _ => Outcome::Typed(
                                meta["error"].as_str().unwrap_or("untyped").to_string(),
                            ),
                        }
                    }
                };
                let lost = matches!(outcome, Outcome::Lost);
                outcomes.push(outcome);
                if lost && !on_b {
                    break;
                }
            }
            (on_b, outcomes)
        }));
    }

    // The chaos, on a timeline.
    tokio::time::sleep(Duration::from_secs(1)).await;
    tokio::task::block_in_place(restart_postgres);
    tokio::time::sleep(Duration::from_secs(1)).await;
    s3.stall();
    tokio::time::sleep(Duration::from_secs(5)).await;
    s3.restore();
    tokio::time::sleep(Duration::from_secs(1)).await;
    // The upstream server of replica B dies in the middle of a call.
    let died = clients[1]
        .1
        .call_tool(call("mcp__fx__die", json!({})))
        .await
        .unwrap();
    let died = serde_json::to_value(&died.meta).unwrap();
    assert_eq!(died["error"], "service_unavailable", "{died}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(a.pid() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    a_killed.cancel();
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::SeqCst);

    let mut kept = Vec::new();
    let mut failed: std::collections::BTreeMap<String, usize> = Default::default();
    let (mut lost, mut calls) = (0, 0);
    for (n, task) in load.into_iter().enumerate() {
        let (on_b, outcomes) = tokio::time::timeout(Duration::from_secs(20), task)
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "client {n} (on {}) hung",
                    if n % 2 == 1 { "B" } else { "A" }
                )
            })
            .unwrap();
        for outcome in outcomes {
            calls += 1;
            match outcome {
                Outcome::Kept(id, size, complete) => kept.push((id, size, complete, on_b)),
                Outcome::Typed(code) => *failed.entry(code).or_default() += 1,
                Outcome::Lost => {
                    assert!(!on_b, "a session on the surviving replica was dropped");
                    lost += 1;
                }
            }
        }
    }
    assert!(!failed.contains_key("untyped"), "{failed:?}");
    assert!(
        kept.len() > 50,
        "too little got through: {} of {calls}",
        kept.len()
    );

    // The surviving replica's clients keep their sessions.
    for (_, client) in clients.iter().filter(|(on_b, _)| *on_b) {
        let after = bounded(client.call_tool(call("mcp__fx__echo", json!({"text": "after"}))))
            .await
            .unwrap();
        assert_eq!(text_of(&after), "after");
    }
    let sessions_dropped = 0;

    // Every kept output pages back byte-exact, whichever replica made it; then the index
    // is mended and agrees with the store.
    let reader_ws = Workspace::with_storage(&python_fixture_entry("fx", ""), &tables);
    let reader = airlock_host::Airlock::start(reader_ws.load(), reader_ws.options())
        .await
        .unwrap();
    // In a shared store an id is handed out only once its output is kept: every one
    // pages back, including those the killed replica made.
    for (id, size, complete, on_b) in &kept {
        let (mut offset, mut text) = (0, String::new());
        loop {
            let page = tokio::task::block_in_place(|| {
                reader.outputs().read_as("default", "fx", id, offset)
            })
            .await
            .unwrap_or_else(|e| panic!("output {id} (complete: {complete}, on B: {on_b}): {e}"));
            text.push_str(&page.text);
            match page.next_offset {
                Some(next) => offset = next,
                None => break,
            }
        }
        assert!(
            text.len() == *size && text.bytes().all(|b| b == b'x'),
            "output {id}"
        );
    }
    let mended = reader.outputs().reindex().await.unwrap();
    let again = reader.outputs().reindex().await.unwrap();
    assert_eq!((again.added, again.removed), (0, 0), "{again:?}");
    assert_eq!(again.stored, again.indexed, "{again:?}");
    assert_eq!(again.unattributed + again.unreadable, 0, "{again:?}");
    reader.close().await;

    // The surviving replica's resources settle back (idle blocking threads and upstream
    // connections are let go within seconds).
    let deadline = Instant::now() + Duration::from_secs(20);
    let settled = loop {
        let now = resources(b.pid());
        let back = now.0 <= baseline.0 + 2 && now.1 <= baseline.1 + 2 && now.2 == baseline.2;
        if back || Instant::now() > deadline {
            break now;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    eprintln!(
        "chaos: {calls} calls, {} kept and paged byte-exact, failed by code {failed:?}, {lost} lost in flight with the killed replica, {sessions_dropped} sessions dropped on the survivor; index mended: {} added, {} removed ({} stored = {} indexed); survivor fds/threads/children {baseline:?} at baseline, {settled:?} after",
        kept.len(),
        mended.added,
        mended.removed,
        again.stored,
        again.indexed,
    );
    assert!(
        settled.0 <= baseline.0 + 2 && settled.1 <= baseline.1 + 2 && settled.2 == baseline.2,
        "resources {settled:?} never settled back to {baseline:?}"
    );
    drop(clients);
}
