//! Retained results: a 5 MiB result kept whole, previewed and paged back exactly (its
//! digest checked), multibyte text cut on character boundaries, the preview size chosen
//! per agent, and a result over the retention limit not kept, with the call saying so.
//! An S3 store that checks signatures (moto with authentication on, a least-privilege
//! IAM key): the right key keeps and pages outputs, a wrong or unknown key is refused
//! at start-up, naming the store.

mod support;

use airlock_host::results::{COMPACT_PREVIEW, DEFAULT_PREVIEW, ResultLimits};
use airlock_host::{Airlock, AirlockOptions, CallOptions, ErrorCode};
use serde_json::json;
use sha2::{Digest, Sha256};
use support::{Workspace, free_port, python, python_fixture_entry, python_server, toml_str};

fn digest(bytes: &[u8]) -> String {
    format!(
        "sha256:{}",
        Sha256::digest(bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    )
}

async fn read_all(airlock: &Airlock, agent: &str, service: &str, id: &str) -> String {
    let (mut offset, mut text, mut pages) = (0, String::new(), 0);
    loop {
        let page = airlock
            .outputs()
            .read_as(agent, service, id, offset)
            .await
            .unwrap();
        assert!(page.text.len() <= DEFAULT_PREVIEW);
        text.push_str(&page.text);
        pages += 1;
        match page.next_offset {
            Some(n) => offset = n,
            None => {
                assert!(page.eof);
                break;
            }
        }
    }
    assert!(pages > 1);
    text
}

#[tokio::test]
async fn a_5_mib_result_is_kept_whole_previewed_and_paged_back_exactly() {
    let ws = Workspace::new(&python_fixture_entry("fx", ""));
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let size = 5 << 20;
    let out = airlock
        .calls()
        .call("mcp__fx__big_text", json!({"size": size}), None)
        .await
        .unwrap();
    assert_eq!(out.retained.size, size);
    assert!(!out.retained.complete);
    assert_eq!(
        out.preview.len(),
        DEFAULT_PREVIEW,
        "the largest preview that fits"
    );
    let id = out.retained.output_id.clone().unwrap();
    let text = read_all(&airlock, "default", "fx", &id).await;
    assert_eq!(text.len(), size);
    assert_eq!(digest(text.as_bytes()), out.retained.digest);
    airlock.close().await;
}

#[tokio::test]
async fn multibyte_text_is_cut_on_character_boundaries() {
    let ws = Workspace::new(&python_fixture_entry("fx", ""));
    let options = AirlockOptions {
        result_limits: ResultLimits {
            preview: COMPACT_PREVIEW,
            ..ResultLimits::default()
        },
        ..ws.options()
    };
    let airlock = Airlock::start(ws.load(), options).await.unwrap();
    // "✓" is 3 bytes: 4096 bytes hold 1365 of them (4095 bytes), never a partial one.
    let out = airlock
        .calls()
        .call(
            "mcp__fx__big_text",
            json!({"size": 5000, "char": "✓"}),
            None,
        )
        .await
        .unwrap();
    assert_eq!(out.preview.len(), 4095);
    assert!(out.preview.chars().all(|c| c == '✓'));
    let id = out.retained.output_id.clone().unwrap();
    let page = airlock
        .outputs()
        .read_as("default", "fx", &id, 4095)
        .await
        .unwrap();
    assert_eq!(page.text.len(), 4095);
    let err = airlock
        .outputs()
        .read_as("default", "fx", &id, 4096)
        .await
        .unwrap_err();
    assert_eq!(
        err.code,
        ErrorCode::InvalidArguments,
        "an offset inside a character is refused: {err}"
    );
    airlock.close().await;
}

#[tokio::test]
async fn the_preview_size_is_chosen_per_agent() {
    let ws = Workspace::new(&python_fixture_entry("fx", ""));
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let compact = CallOptions {
        agent: "small-model".into(),
        preview: Some(COMPACT_PREVIEW),
        ..Default::default()
    };
    let small = airlock
        .calls()
        .call_with("mcp__fx__big_text", json!({"size": 100_000}), compact)
        .await
        .unwrap();
    assert_eq!(small.preview.len(), COMPACT_PREVIEW);
    let full = airlock
        .calls()
        .call("mcp__fx__big_text", json!({"size": 100_000}), None)
        .await
        .unwrap();
    assert_eq!(full.preview.len(), DEFAULT_PREVIEW);
    assert!(!small.retained.complete && !full.retained.complete);
    airlock.close().await;
}

#[tokio::test]
async fn a_result_over_the_retention_limit_is_not_kept_and_the_call_says_so() {
    let ws = Workspace::new(&python_fixture_entry("fx", ""));
    let options = AirlockOptions {
        result_limits: ResultLimits {
            max_retained: 1 << 20,
            ..ResultLimits::default()
        },
        ..ws.options()
    };
    let airlock = Airlock::start(ws.load(), options).await.unwrap();
    let out = airlock
        .calls()
        .call("mcp__fx__big_text", json!({"size": 2 << 20}), None)
        .await
        .unwrap();
    assert!(out.retained.output_id.is_none());
    assert!(
        out.retained
            .not_retained_reason
            .as_deref()
            .unwrap()
            .contains("retention limit")
    );
    assert_eq!(out.retained.size, 2 << 20);
    assert_eq!(out.preview.len(), DEFAULT_PREVIEW);
    airlock.close().await;
    let stored: u64 = support::files_under(&ws.data().join("outputs"))
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len())
        .sum();
    assert!(
        stored < 1 << 20,
        "nothing that size was written ({stored} bytes)"
    );
}

/// A moto S3 server that checks every request's signature after the four unsigned
/// set-up requests of `s3_iam.py` (an IAM user allowed only to put and get objects of
/// bucket `results`, its key, the bucket). Returns the server, its endpoint and the key.
fn authenticating_s3() -> (support::Background, String, String, String) {
    let port = free_port();
    let moto = python().with_file_name("moto_server");
    let server = support::start_http_server(
        &moto.display().to_string(),
        &["-H", "127.0.0.1", "-p", &port.to_string()],
        &[("INITIAL_NO_AUTH_ACTION_COUNT", "4")],
        port,
    );
    let endpoint = format!("http://127.0.0.1:{port}");
    let out = std::process::Command::new(python())
        .arg(python_server("s3_iam.py"))
        .args([&endpoint, "results"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let key: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = key["access_key_id"].as_str().unwrap().to_string();
    let secret = key["secret_access_key"].as_str().unwrap().to_string();
    (server, endpoint, id, secret)
}

fn s3_results(endpoint: &str, id: &str, secret: &str) -> String {
    format!(
        "[results]\nstore = \"s3://results/team-a\"\nendpoint = {}\nregion = \"us-east-1\"\naccess_key_id = {}\nsecret_access_key = {}\n",
        toml_str(endpoint),
        toml_str(id),
        toml_str(secret)
    )
}

#[tokio::test]
async fn s3_credentials_are_checked_at_start_up() {
    let (_s3, endpoint, id, secret) = authenticating_s3();
    let fixture = python_fixture_entry("fx", "");

    // The right key: outputs are kept in the bucket and paged back exactly.
    let ws = Workspace::with_storage(&fixture, &s3_results(&endpoint, &id, &secret));
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let out = airlock
        .calls()
        .call("mcp__fx__big_text", json!({"size": 200_000}), None)
        .await
        .unwrap();
    let output_id = out.retained.output_id.clone().expect("kept");
    let text = read_all(&airlock, "default", "fx", output_id.as_str()).await;
    assert_eq!(digest(text.as_bytes()), out.retained.digest);
    let ready = airlock.readiness().await;
    assert!(ready.ready, "{}", serde_json::to_value(&ready).unwrap());

    // A wrong secret for that key, and a key the server does not know: refused before
    // any call, with the store named and the server's reason.
    for (id, secret, reason) in [
        (id.as_str(), "not-the-secret", "SignatureDoesNotMatch"),
        (
            "AKIAUNKNOWNKEY000000",
            secret.as_str(),
            "InvalidAccessKeyId",
        ),
    ] {
        let ws = Workspace::with_storage(&fixture, &s3_results(&endpoint, id, secret));
        let refused = match Airlock::start(ws.load(), ws.options()).await {
            Ok(_) => panic!("a wrong S3 key was accepted at start-up"),
            Err(e) => e.to_string(),
        };
        assert!(
            refused.contains("refused Airlock's credentials"),
            "{refused}"
        );
        assert!(refused.contains("s3://results/team-a"), "{refused}");
        assert!(refused.contains(reason), "{refused}");
        assert!(!refused.contains(secret), "{refused}");
        // The CLI says the same and fails.
        let out = ws.run(&["status"], &[]);
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("refused Airlock's credentials"), "{stderr}");
    }
}

/// The results index is mended against the store: an output kept without its row (a
/// crash between the two) is indexed again, and a row naming an output the store no
/// longer holds is removed; a second pass finds nothing to do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_index_is_mended_against_the_store() {
    let ws = Workspace::new(&python_fixture_entry("fx", ""));
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let mut ids = Vec::new();
    // A small output (a row of the small-outputs database, locally) and a large one.
    for size in [100, 200_000] {
        let out = airlock
            .calls()
            .call("mcp__fx__big_text", json!({"size": size}), None)
            .await
            .unwrap();
        ids.push(out.retained.output_id.clone().unwrap().as_str().to_string());
    }
    airlock.close().await;
    let count = |sql: &str| tokio::task::block_in_place(|| ws.registry_count(sql));
    assert_eq!(count("SELECT count(*) FROM results"), 2);

    let ghost = "f".repeat(32);
    tokio::task::block_in_place(|| {
        ws.registry_sql(&format!(
            "DELETE FROM results WHERE output_id = '{}'",
            ids[1]
        ));
        ws.registry_sql(&format!(
            "INSERT INTO results (output_id, service, agent, size, digest, complete, redacted)
             VALUES ('{ghost}', 'fx', 'default', 1, 'sha256:00', TRUE, FALSE)"
        ));
    });

    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let done = airlock.outputs().reindex().await.unwrap();
    assert_eq!((done.stored, done.indexed), (2, 2), "{done:?}");
    assert_eq!((done.added, done.removed), (1, 1), "{done:?}");
    assert_eq!(done.unattributed + done.unreadable, 0, "{done:?}");
    let mut listed: Vec<String> = tokio::task::block_in_place(|| ws.registry())
        .results("fx", "default")
        .unwrap()
        .into_iter()
        .map(|e| e.output_id)
        .collect();
    listed.sort();
    ids.sort();
    assert_eq!(listed, ids);
    let again = airlock.outputs().reindex().await.unwrap();
    assert_eq!((again.added, again.removed), (0, 0), "{again:?}");
    airlock.close().await;
}

/// With no Airlock running, `Stores` reads back what one kept, for the agent whose call
/// made it only, and changes the grants the next Airlock enforces.
#[tokio::test]
async fn the_stores_serve_outputs_and_grants_without_a_running_airlock() {
    let ws = Workspace::new(&python_fixture_entry("fx", ""));
    let config = ws.load();
    let storage = config.storage.clone();
    let airlock = Airlock::start(config, ws.options()).await.unwrap();
    let options = CallOptions {
        agent: "agent-a".into(),
        ..Default::default()
    };
    let out = airlock
        .calls()
        .call_with("mcp__fx__big_text", json!({"size": 80_000}), options)
        .await
        .unwrap();
    let id = out.retained.output_id.clone().unwrap();
    airlock.close().await;

    let limits = ws.options().result_limits;
    let stores = tokio::task::spawn_blocking(move || {
        let stores = airlock_host::Stores::new(&ws.data(), storage, limits).unwrap();
        let first = stores.read_output("agent-a", "fx", &id, 0).unwrap();
        let rest = stores
            .read_output("agent-a", "fx", &id, first.next_offset.unwrap())
            .unwrap();
        let other = stores.read_output("agent-b", "fx", &id, 0).unwrap_err();
        let granted = stores.grant("agent-b", "fx").unwrap();
        let again = stores.grant("agent-b", "fx").unwrap();
        let grants = stores.grants("agent-b").unwrap();
        (first, rest, other, granted, again, grants, ws)
    })
    .await
    .unwrap();
    let (first, rest, other, granted, again, grants, _ws) = stores;
    assert_eq!(first.text.len(), DEFAULT_PREVIEW);
    assert_eq!(
        first.text.len() + rest.text.len(),
        80_000,
        "the whole output"
    );
    assert!(rest.eof);
    assert_eq!(
        digest(format!("{}{}", first.text, rest.text).as_bytes()),
        out.retained.digest
    );
    assert_eq!(other.code, ErrorCode::ServiceAccessDenied, "{other}");
    assert!(granted && !again, "a second grant changes nothing");
    assert_eq!(grants, vec!["fx".to_string()]);
}
