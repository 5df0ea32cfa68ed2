//! Beyond one machine: two `airlock serve --http` replicas on loopback sharing one
//! registry in PostgreSQL and one results store in S3 (moto), both started by the test
//! command (`scripts/storage-services.sh`). A result made through one replica pages
//! byte-exact through the other; a grant revoked through one is refused on the next call
//! through the other; a frozen namespace is shared; a session belongs to its replica;
//! an object deleted or corrupted behind Airlock's back is reported as such.

mod support;

use object_store::ObjectStoreExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use std::time::Duration;
use support::{
    HttpGateway, Workspace, held_within, host_registry, python_fixture_entry,
    remote_storage_tables, storage_services, storage_tag,
};

/// Two replicas' workspaces (own data directories, own config files) sharing storage:
/// the fixture server as `fx`, plus `extra_a` / `extra_b` lines in each one's entry.
fn replicas(extra_a: &str, extra_b: &str) -> (Workspace, Workspace, String) {
    let tag = storage_tag();
    let tables = remote_storage_tables(&tag);
    let a = Workspace::with_storage(&python_fixture_entry("fx", extra_a), &tables);
    let b = Workspace::with_storage(&python_fixture_entry("fx", extra_b), &tables);
    (a, b, tag)
}

/// Two replicas serving over HTTP with tokens required, and alice's client on each.
/// Fields drop in order: the clients, then the gateways, then their workspaces.
struct Pair {
    on_a: RunningService<RoleClient, ()>,
    on_b: RunningService<RoleClient, ()>,
    a: HttpGateway,
    b: HttpGateway,
    ws_b: Workspace,
    _ws_a: Workspace,
    /// The storage tag (the S3 prefix and PostgreSQL schema).
    tag: String,
    alice: String,
}

/// [`replicas`] with both gateways started and alice connected to each.
async fn serving_pair() -> Pair {
    let (ws_a, ws_b, tag) = replicas("", "");
    let alice = token(&ws_a, "alice");
    let a = HttpGateway::start(&ws_a, &["--require-token"]);
    let b = HttpGateway::start(&ws_b, &["--require-token"]);
    let on_a = client(&a, &alice).await;
    let on_b = client(&b, &alice).await;
    Pair {
        _ws_a: ws_a,
        ws_b,
        tag,
        alice,
        on_a,
        on_b,
        a,
        b,
    }
}

/// A token for `agent`, made through `ws` (kept in the shared registry).
fn token(ws: &Workspace, agent: &str) -> String {
    let (made, out) = ws.json(&["--agent", agent, "serve", "tokens", "add"], &[]);
    assert!(out.status.success(), "{made}");
    made["token"].as_str().unwrap().to_string()
}

async fn client(gateway: &HttpGateway, token: &str) -> RunningService<RoleClient, ()> {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(gateway.url.clone()).auth_header(token),
    );
    ().serve(transport)
        .await
        .expect("the replica accepts the client")
}

/// The tool names `client` is offered.
async fn tool_names(client: &RunningService<RoleClient, ()>) -> Vec<String> {
    let tools = client.list_all_tools().await.unwrap();
    tools.iter().map(|t| t.name.to_string()).collect()
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

/// A text of `lines` numbered lines, every byte position distinct enough that a page
/// out of place would show.
fn varied_text(lines: usize) -> String {
    (0..lines)
        .map(|i| format!("line {i:06} ✓ {}\n", "abcdefghij".repeat(i % 7 + 1)))
        .collect()
}

/// Calls `echo` with `text` through `client`; returns the output id.
async fn retain(client: &RunningService<RoleClient, ()>, text: &str) -> String {
    let made = client
        .call_tool(call("mcp__fx__echo", json!({ "text": text })))
        .await
        .unwrap();
    let meta = serde_json::to_value(&made.meta).unwrap();
    assert_eq!(meta["complete"], false, "{meta}");
    meta["output_id"].as_str().unwrap().to_string()
}

/// Pages output `id` of `fx` through `client` to its end.
async fn page_all(client: &RunningService<RoleClient, ()>, id: &str) -> Result<String, String> {
    let (mut offset, mut text) = (0u64, String::new());
    loop {
        let page = client
            .call_tool(call(
                "airlock_output",
                json!({"service": "fx", "output_id": id, "offset": offset}),
            ))
            .await
            .unwrap();
        if page.is_error == Some(true) {
            return Err(text_of(&page));
        }
        let s = page.structured_content.clone().unwrap();
        text.push_str(s["text"].as_str().unwrap());
        if s["eof"] == true {
            return Ok(text);
        }
        offset = s["next_offset"].as_u64().unwrap();
    }
}

/// The test bucket, reached directly (behind Airlock's back), and the key of output
/// `id`'s text object (the fixture service `fx`).
fn text_object(tag: &str, id: &str) -> (object_store::aws::AmazonS3, object_store::path::Path) {
    let (_, endpoint, bucket) = storage_services();
    let store = object_store::aws::AmazonS3Builder::new()
        .with_endpoint(endpoint)
        .with_allow_http(true)
        .with_bucket_name(bucket)
        .with_region("us-east-1")
        .with_access_key_id("airlock-test")
        .with_secret_access_key("airlock-test-secret")
        .build()
        .unwrap();
    let digest = airlock_host::digest::sha256(b"fx");
    let hex = digest.trim_start_matches("sha256:");
    let key = format!("{tag}/fx-{}/{id}.txt", &hex[..8]);
    (store, object_store::path::Path::from(key))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_made_on_one_replica_pages_byte_exact_on_the_other() {
    let pair = serving_pair().await;
    let (on_a, on_b, alice) = (&pair.on_a, &pair.on_b, &pair.alice);

    let text = varied_text(12_000);
    assert!(text.len() > 300_000);
    let id = retain(on_a, &text).await;
    let paged = page_all(on_b, &id).await.expect("B pages A's output");
    assert!(
        paged == text,
        "the pages through B rejoin to the text made on A"
    );

    // Another agent's token, recognised by both replicas, may not read alice's output.
    let bob = token(&pair.ws_b, "bob");
    let bob_on_a = client(&pair.a, &bob).await;
    let refused = page_all(&bob_on_a, &id).await.unwrap_err();
    assert!(refused.contains("belongs to another agent"), "{refused}");

    // A session belongs to its replica: B answers A's session id with 404 Not Found,
    // the spec's "session not found", so a client re-initializes.
    let http = reqwest::Client::new();
    let init = http
        .post(&pair.a.url)
        .bearer_auth(alice)
        .header("Accept", "application/json, text/event-stream")
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "probe", "version": "1"}}}),
        )
        .send()
        .await
        .unwrap();
    let session = init.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    let elsewhere = http
        .post(&pair.b.url)
        .bearer_auth(alice)
        .header("Accept", "application/json, text/event-stream")
        .header("Mcp-Session-Id", &session)
        .json(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    assert_eq!(elsewhere.status().as_u16(), 404);

    bob_on_a.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_revoked_through_one_replica_is_refused_on_the_next_call_through_the_other() {
    let (ws_a, ws_b, _) = replicas("", "");
    let alice = token(&ws_a, "alice");
    let (granted, out) = ws_a.json(&["--agent", "alice", "grants", "add", "fx"], &[]);
    assert!(out.status.success(), "{granted}");
    let a = HttpGateway::start(&ws_a, &["--access", "grants", "--require-token"]);
    let b = HttpGateway::start(&ws_b, &["--access", "grants", "--require-token"]);
    let on_a = client(&a, &alice).await;
    let ok = on_a
        .call_tool(call("mcp__fx__echo", json!({"text": "first"})))
        .await
        .unwrap();
    assert_eq!(text_of(&ok), "first");

    // Revoked through B's configuration (its data directory, the shared registry).
    let (revoked, out) = ws_b.json(&["--agent", "alice", "grants", "remove", "fx"], &[]);
    assert!(out.status.success(), "{revoked}");
    let refused = on_a
        .call_tool(call("mcp__fx__echo", json!({"text": "second"})))
        .await
        .unwrap();
    assert_eq!(refused.is_error, Some(true), "{refused:?}");
    let meta = serde_json::to_value(&refused.meta).unwrap();
    assert_eq!(meta["error"], "service_access_denied", "{meta}");
    on_a.cancel().await.unwrap();
    drop(b);
}

/// On PostgreSQL a host keeps grant answers in memory while it hears every host's
/// changes: a revocation or a grant made by another host is heard within milliseconds,
/// and a host whose listening connection is lost forgets everything it kept, so a
/// change it could not hear is never answered from memory once it listens again.
#[test]
fn grant_answers_kept_in_memory_follow_every_hosts_changes() {
    use airlock_host::registry::pg_listen;
    let (url, _, _) = storage_services();
    let (dir, tag) = (tempfile::tempdir().unwrap(), storage_tag());
    let (here, there) = (
        host_registry(&url, &tag, dir.path()),
        host_registry(&url, &tag, dir.path()),
    );
    let name = pg_listen::application_name(&tag);
    let listeners = format!("SELECT pid FROM pg_stat_activity WHERE application_name = '{name}'");
    let listening_pids = || -> Vec<i32> {
        support::with_postgres(&url, async |client| {
            let rows = client.query(&listeners, &[]).await.unwrap();
            rows.iter().map(|row| row.get(0)).collect()
        })
    };
    // A host that has checked no grant (a one-shot command) opens no listening connection.
    there.grant("alice", "svc").unwrap();
    assert!(listening_pids().is_empty());
    assert!(!here.hears_changes());
    // The first check starts listening.
    assert!(here.is_granted("alice", "svc").unwrap());
    assert!(!there.is_granted("bob", "svc").unwrap());
    let listening = held_within(Duration::from_secs(10), || {
        here.hears_changes() && there.hears_changes()
    });
    assert!(listening.is_some(), "both hosts listen for changes");

    assert!(here.is_granted("alice", "svc").unwrap());
    assert!(!here.is_granted("alice", "other").unwrap());
    assert!(there.revoke("alice", "svc").unwrap());
    let revoked = held_within(Duration::from_secs(2), || {
        !here.is_granted("alice", "svc").unwrap()
    })
    .expect("a revocation made by another host is heard");
    there.grant("alice", "other").unwrap();
    let granted = held_within(Duration::from_secs(2), || {
        here.is_granted("alice", "other").unwrap()
    })
    .expect("a grant made by another host is heard");
    eprintln!("heard another host's revocation after {revoked:?}, its grant after {granted:?}");
    assert!(revoked < Duration::from_millis(500), "{revoked:?}");

    // The grant's own notification may arrive after the poll that saw it (which then
    // was not kept); once it has surely arrived (it takes about a millisecond), the
    // answer asked again is kept.
    std::thread::sleep(Duration::from_millis(300));
    assert!(here.is_granted("alice", "other").unwrap());
    // A revocation made behind the hosts' backs (triggers off: no notification is
    // sent) is not heard: the answer comes from memory, no round trip.
    support::unannounced(
        &url,
        &format!("DELETE FROM \"{tag}\".grants WHERE agent = 'alice' AND service = 'other'"),
    );
    assert!(here.is_granted("alice", "other").unwrap(), "kept in memory");
    // The listening connections of this schema's hosts are cut.
    let cut = listening_pids();
    support::with_postgres(&url, async |client| {
        for pid in &cut {
            client
                .execute("SELECT pg_terminate_backend($1)", &[pid])
                .await
                .unwrap();
        }
    });
    assert_eq!(cut.len(), 2, "one listening connection per host");
    // Both hosts listen again by themselves, on new connections. A new connection is
    // in pg_stat_activity before its LISTEN is answered, so hearing is waited for too.
    let relistened = held_within(Duration::from_secs(10), || {
        let now = listening_pids();
        let fresh = now.len() == 2 && now.iter().all(|pid| !cut.contains(pid));
        fresh && here.hears_changes() && there.hears_changes()
    });
    assert!(relistened.is_some(), "the hosts listen again by themselves");
    // A host that lost its listener forgets what it kept: the database is asked again.
    assert!(!here.is_granted("alice", "other").unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_frozen_on_one_replica_is_the_same_on_the_other() {
    let naming = "adapter_config = { naming = { style = \"namespace\" } }\n";
    let (ws_a, ws_b, _) = replicas(
        &format!("label = \"Alpha\"\n{naming}"),
        &format!("label = \"Beta\"\n{naming}"),
    );
    let alice = token(&ws_a, "alice");
    let a = HttpGateway::start(&ws_a, &["--require-token"]);
    let on_a = client(&a, &alice).await;
    let names_a = tool_names(&on_a).await;
    assert!(names_a.contains(&"alpha__echo".to_string()), "{names_a:?}");
    let b = HttpGateway::start(&ws_b, &["--require-token"]);
    let on_b = client(&b, &alice).await;
    let names_b = tool_names(&on_b).await;
    assert_eq!(
        names_a, names_b,
        "B's label would name it \"beta\"; the namespace A froze wins"
    );
    on_a.cancel().await.unwrap();
    on_b.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_deleted_or_corrupted_behind_airlocks_back_are_reported() {
    let pair = serving_pair().await;
    let (on_a, on_b, tag) = (&pair.on_a, &pair.on_b, &pair.tag);
    // Corrupted: the text object replaced by bytes of the same length, one changed.
    let text = varied_text(6_000);
    let id = retain(on_a, &text).await;
    let mut changed = text.clone().into_bytes();
    changed[100_000] ^= 0x01;
    let (bucket, key) = text_object(tag, &id);
    bucket.put(&key, changed.into()).await.unwrap();
    // The first page's blocks are intact; the page holding byte 100,000 is not.
    let error = page_all(on_b, &id).await.unwrap_err();
    assert!(error.contains("fails its digest check"), "{error}");
    assert!(error.contains("block 1"), "{error}");
    assert!(!error.contains("airlock-test-secret"), "{error}");

    // Deleted: the text object removed; its record is still there.
    let id = retain(on_a, &text).await;
    let (bucket, key) = text_object(tag, &id);
    bucket.delete(&key).await.unwrap();
    let error = page_all(on_b, &id).await.unwrap_err();
    assert!(error.contains("is missing from s3://"), "{error}");

    // Both replicas still serve: the errors were answers, not crashes.
    let ok = on_b
        .call_tool(call("mcp__fx__echo", json!({"text": "still here"})))
        .await
        .unwrap();
    assert_eq!(text_of(&ok), "still here");
}

/// The registry's tables on PostgreSQL answer as on SQLite: the same calls on both
/// engines, side by side (grants, remembered approvals with their globs, tokens, import
/// previews, catalogs, the results index).
#[test]
fn the_registry_answers_the_same_on_postgresql_and_sqlite() {
    use airlock_host::config::RegistryLocation;
    use airlock_host::registry::{ApprovalScope, Registry, ResultEntry, TokenRecord, glob_literal};
    let (url, _, _) = storage_services();
    let dir = tempfile::tempdir().unwrap();
    let engines = [
        Registry::open_at(dir.path(), &RegistryLocation::Local).unwrap(),
        Registry::open_at(
            dir.path(),
            &RegistryLocation::Postgres {
                url,
                schema: storage_tag(),
                bounds: Default::default(),
                token_key: None,
            },
        )
        .unwrap(),
    ];
    let answers: Vec<Value> = engines
        .iter()
        .map(|reg| {
            assert!(reg.grant("a", "s").unwrap());
            assert!(!reg.grant("a", "s").unwrap());
            reg.grant("b", "t").unwrap();
            assert!(reg.revoke("b", "t").unwrap());
            let scope = |tool: &'static str, arguments: &'static str| ApprovalScope {
                agent: "a",
                service: "s",
                tool,
                arguments,
                plugin: "builtin:policy",
                rule: "ask",
            };
            let literal: &'static str =
                Box::leak(glob_literal(r#"{"p":"a*b?[c]\\d"}"#).into_boxed_str());
            reg.remember_approval(&scope(literal, "*"), None).unwrap();
            reg.remember_approval(&scope("drop_*", "[^x]*"), Some(1_000))
                .unwrap();
            let hits: Vec<Option<i64>> = [
                (r#"{"p":"a*b?[c]\\d"}"#, "{}", 0),
                (r#"{"p":"aXb?[c]\\d"}"#, "{}", 0),
                ("drop_table", "{}", 999),
                ("drop_table", "x{}", 999),
                ("drop_table", "{}", 1_000),
            ]
            .iter()
            .map(|(tool, args, now)| {
                reg.matching_approval(&scope(tool, args), *now)
                    .unwrap()
                    .map(|g| g.id)
            })
            .collect();
            reg.insert_token(&TokenRecord {
                id: "tk".into(),
                agent: "a".into(),
                fingerprint: "sha256:f".into(),
                secret_ref: "secret:1".into(),
                created_at: 0,
            })
            .unwrap();
            let token = reg
                .token_by_fingerprint("sha256:f")
                .unwrap()
                .map(|t| t.agent);
            let removed = reg.delete_token("tk").unwrap().map(|t| t.id);
            let preview = reg
                .save_import_preview(
                    &json!({"from": null}),
                    &[("x".to_string(), "d".to_string())].into(),
                )
                .unwrap();
            let latest = reg.latest_import_preview().unwrap().unwrap();
            let entry = |id: &str| ResultEntry {
                output_id: id.into(),
                service: "s".into(),
                agent: "a".into(),
                size: 5,
                digest: "sha256:x".into(),
                complete: false,
                redacted: true,
            };
            reg.index_results(&[entry("o1"), entry("o2")]).unwrap();
            let results: Vec<String> = reg
                .results("s", "a")
                .unwrap()
                .into_iter()
                .map(|r| r.output_id)
                .collect();
            assert!(reg.now().unwrap() > 1_700_000_000);
            assert_eq!(reg.freeze_namespace("s", "s").unwrap(), "s");
            assert_eq!(reg.freeze_namespace("s", "other").unwrap(), "s");
            assert!(
                reg.freeze_namespace("t", "s").is_err(),
                "one service per namespace"
            );
            json!({
                "grants": reg.all_grants().unwrap(),
                "hits": hits,
                "token": token,
                "removed": removed,
                "preview": [latest.id == preview, latest.entries],
                "results": results,
                "namespaces": reg.namespaces_except("t").unwrap(),
            })
        })
        .collect();
    assert_eq!(answers[0], answers[1], "SQLite and PostgreSQL disagree");
    assert_eq!(
        answers[0]["hits"],
        json!([1, null, 2, null, null]),
        "{}",
        answers[0]
    );
}

/// `[results] secret_access_key = "secret:NAME"` reads the key from the secret store:
/// missing, the command names the entry and how to add it; added with
/// `airlock secrets set` (the value on standard input), calls keep their results in S3
/// and `airlock output` pages them back.
#[test]
fn the_s3_secret_key_can_live_in_the_secret_store() {
    use std::io::Write;
    let tables = remote_storage_tables(&storage_tag()).replace(
        "secret_access_key = \"airlock-test-secret\"",
        "secret_access_key = \"secret:s3-results\"",
    );
    assert!(tables.contains("secret:s3-results"));
    let ws = Workspace::with_storage(&python_fixture_entry("fx", ""), &tables);
    let text = "y".repeat(100_000);
    let args = json!({ "size": 100_000, "char": "y" }).to_string();

    let (missing, out) = ws.json(&["call", "mcp__fx__big_text", "--args", &args], &[]);
    assert!(!out.status.success(), "{missing}");
    let message = missing["message"].as_str().unwrap();
    assert!(
        message.contains("\"s3-results\"") && message.contains("airlock secrets set s3-results"),
        "{message}"
    );

    let mut set = std::process::Command::new(support::airlock_bin())
        .args([
            "--data-dir",
            ws.data().to_str().unwrap(),
            "secrets",
            "set",
            "s3-results",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    set.stdin
        .take()
        .unwrap()
        .write_all(b"airlock-test-secret\n")
        .unwrap();
    let set = set.wait_with_output().unwrap();
    assert!(set.status.success());
    assert!(!String::from_utf8_lossy(&set.stdout).contains("airlock-test-secret"));

    let (called, out) = ws.json(&["call", "mcp__fx__big_text", "--args", &args], &[]);
    assert!(out.status.success(), "{called}");
    let id = called["output_id"].as_str().unwrap().to_string();
    let (mut offset, mut paged) = (0u64, String::new());
    loop {
        let (page, out) = ws.json(&["output", "fx", &id, "--offset", &offset.to_string()], &[]);
        assert!(out.status.success(), "{page}");
        paged.push_str(page["text"].as_str().unwrap());
        match page["next_offset"].as_u64() {
            Some(next) => offset = next,
            None => break,
        }
    }
    assert!(paged == text, "the pages rejoin to the text");
}
