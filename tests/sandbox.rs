//! The plugin sandbox against hostile components built from source
//! (tests/plugins/): each gets a clear, typed error within its limit, the instance is
//! discarded, and the host keeps serving.

mod support;

use std::time::{Duration, Instant};

use airlock_host::config::{PluginRef, SandboxLimits};
use airlock_host::plugin::{
    PluginError, PluginRuntime, Stage, ToolResult, TrapKind, run_content, run_redaction,
};
use airlock_host::{Airlock, ErrorCode, ServiceStatus};
use serde_json::json;
use support::{Workspace, fixture_wasm, python_fixture_entry, toml_str};

fn limits() -> SandboxLimits {
    SandboxLimits {
        deadline: Duration::from_millis(300),
        memory_bytes: 32 << 20,
        stack_bytes: 256 << 10,
    }
}

fn sample() -> ToolResult {
    airlock_host::plugin::convert::result_from_mcp(
        &json!({"content": [{"type": "text", "text": "hello"}]}),
    )
}

async fn run_mode(
    rt: &std::sync::Arc<PluginRuntime>,
    mode: &str,
) -> Result<ToolResult, PluginError> {
    let plugin = rt.load(&PluginRef::File(fixture_wasm("hostile"))).unwrap();
    let bound = rt
        .bind(plugin, Stage::Content, "svc", &json!({"mode": mode}))
        .unwrap();
    run_content(&bound, sample()).await
}

fn trap_kind(result: Result<ToolResult, PluginError>) -> (TrapKind, String) {
    match result {
        Err(e @ PluginError::Trap { kind, .. }) => (kind, e.to_string()),
        other => panic!("expected a trap, got {other:?}"),
    }
}

#[tokio::test]
async fn an_infinite_loop_hits_the_cpu_deadline() {
    let rt = PluginRuntime::new(limits(), None).unwrap();
    let started = Instant::now();
    let (kind, message) = trap_kind(run_mode(&rt, "loop").await);
    assert_eq!(kind, TrapKind::Deadline);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "took {:?}",
        started.elapsed()
    );
    assert!(
        message.contains("hostile") && message.contains("content") && message.contains("deadline"),
        "{message}"
    );
    // The host carries on: a well-behaved binding of the same plugin works.
    let ok = run_mode(&rt, "ok").await.unwrap();
    assert!(
        matches!(&ok.content[0], airlock_host::plugin::ContentBlock::Text(t) if t.text == "HELLO")
    );
}

#[tokio::test]
async fn a_memory_bomb_hits_the_memory_cap() {
    let rt = PluginRuntime::new(limits(), None).unwrap();
    let (kind, message) = trap_kind(run_mode(&rt, "memory").await);
    assert_eq!(kind, TrapKind::MemoryLimit, "{message}");
    assert!(message.contains("memory"), "{message}");
}

#[tokio::test]
async fn deep_recursion_hits_the_stack_cap() {
    let rt = PluginRuntime::new(limits(), None).unwrap();
    let (kind, message) = trap_kind(run_mode(&rt, "recursion").await);
    assert_eq!(kind, TrapKind::StackOverflow, "{message}");
}

#[tokio::test]
async fn a_panic_is_a_typed_trap_and_the_next_call_gets_a_fresh_instance() {
    let rt = PluginRuntime::new(limits(), None).unwrap();
    let plugin = rt.load(&PluginRef::File(fixture_wasm("hostile"))).unwrap();
    let bound = rt
        .bind(plugin, Stage::Content, "svc", &json!({"mode": "panic"}))
        .unwrap();
    for _ in 0..2 {
        let (kind, message) = trap_kind(run_content(&bound, sample()).await);
        assert_eq!(kind, TrapKind::Panic, "{message}");
    }
}

#[tokio::test]
async fn files_environment_network_and_clock_are_denied() {
    let rt = PluginRuntime::new(limits(), None).unwrap();
    for (mode, expect) in [
        ("read_file", "filesystem denied"),
        ("read_env", "environment denied"),
        ("socket", "network denied"),
    ] {
        match run_mode(&rt, mode).await {
            Err(PluginError::Failed { message, .. }) => {
                assert!(message.contains(expect), "{mode}: {message}")
            }
            other => panic!("{mode}: expected a denial, got {other:?}"),
        }
    }
    let frozen = run_mode(&rt, "clock").await.unwrap();
    assert!(
        matches!(&frozen.content[0], airlock_host::plugin::ContentBlock::Text(t) if t.text == "clock: 0")
    );
}

#[test]
fn a_component_importing_something_else_is_refused_at_load() {
    let rt = PluginRuntime::new(limits(), None).unwrap();
    let path = fixture_wasm("foreign-import");
    match rt.load(&PluginRef::File(path.clone())) {
        Err(e @ PluginError::ForbiddenImport { .. }) => {
            let m = e.to_string();
            assert!(
                m.contains("evil:fixture/exfil") && m.contains(&path.display().to_string()),
                "{m}"
            );
        }
        other => panic!("expected ForbiddenImport, got {:?}", other.map(|_| ())),
    }
}

#[test]
fn an_unsupported_contract_version_is_refused_at_load() {
    let rt = PluginRuntime::new(limits(), None).unwrap();
    match rt.load(&PluginRef::File(fixture_wasm("future-contract"))) {
        Err(e @ PluginError::UnsupportedContract { .. }) => {
            let m = e.to_string();
            assert!(
                m.contains("0.3.0") && m.contains("0.2.x") && m.contains("0.1.x"),
                "{m}"
            );
        }
        other => panic!("expected UnsupportedContract, got {:?}", other.map(|_| ())),
    }
}

#[tokio::test]
async fn a_rejected_configuration_names_plugin_stage_and_service() {
    let rt = PluginRuntime::new(limits(), None).unwrap();
    let plugin = rt.load(&PluginRef::File(fixture_wasm("hostile"))).unwrap();
    let err = rt
        .bind(
            plugin.clone(),
            Stage::Content,
            "svc-a",
            &json!({"mode": "reject"}),
        )
        .err()
        .unwrap();
    let m = err.to_string();
    assert!(
        m.contains("rejected") && m.contains("content") && m.contains("svc-a"),
        "{m}"
    );
    let err = rt
        .bind(plugin, Stage::Naming, "svc-a", &json!({}))
        .err()
        .unwrap();
    assert!(matches!(err, PluginError::MissingStage { .. }), "{err}");
}

#[tokio::test]
async fn a_failing_redaction_stage_never_lets_the_result_out() {
    let hostile = fixture_wasm("hostile");
    let rt = PluginRuntime::new(limits(), None).unwrap();
    let plugin = rt.load(&PluginRef::File(hostile.clone())).unwrap();
    let bound = rt
        .bind(plugin, Stage::Redaction, "svc", &json!({"mode": "fail"}))
        .unwrap();
    assert!(matches!(
        run_redaction(&bound, sample(), vec![]).await,
        Err(PluginError::Failed { .. })
    ));

    // Through the host: the call fails with adapter_error and nothing is retained,
    // while another service keeps working.
    let secret = "leaky-secret-value-123456";
    let config = format!(
        "{}\n{}",
        python_fixture_entry(
            "guarded",
            &format!(
                "env = {{ SERVICE_TOKEN = {} }}\nadapters = {{ redaction = [\"builtin:standard\", {}] }}\nadapter_config = {{ redaction = [{{}}, {{ mode = \"panic\" }}] }}",
                toml_str(secret),
                toml_str(hostile.display().to_string())
            )
        ),
        python_fixture_entry("plain", "")
    );
    let ws = Workspace::new(&config);
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    assert!(
        airlock
            .services()
            .status()
            .iter()
            .all(|s| matches!(s.status, ServiceStatus::Connected { .. }))
    );
    let err = airlock
        .calls()
        .call("mcp__guarded__leak_secret", json!({}), None)
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::AdapterError);
    assert!(
        err.message.contains("panicked") && err.message.contains("redaction"),
        "{}",
        err.message
    );
    assert!(!err.message.contains(secret));
    let ok = airlock
        .calls()
        .call("mcp__plain__echo", json!({"text": "fine"}), None)
        .await
        .unwrap();
    assert_eq!(ok.preview, "fine");
    airlock.close().await;
    for file in support::files_under(&ws.data()) {
        let Some(bytes) = support::file_bytes(&file) else {
            continue;
        };
        assert!(
            !String::from_utf8_lossy(&bytes).contains(secret),
            "{}",
            file.display()
        );
    }
}

/// A content plugin sees results before redaction: what it logs or prints is scrubbed
/// of the service's secrets, and rmcp's protocol traces never reach the log, even when
/// `AIRLOCK_LOG` asks for them.
#[test]
fn secrets_stay_out_of_the_log_at_every_level() {
    let hostile = fixture_wasm("hostile");
    let secret = "trace-secret-value-9931";
    let ws = Workspace::new(&python_fixture_entry(
        "chatty",
        &format!(
            "env = {{ SERVICE_TOKEN = {} }}\nadapters = {{ content = {} }}\nadapter_config = {{ content = {{ mode = \"log\" }} }}",
            toml_str(secret),
            toml_str(hostile.display().to_string())
        ),
    ));
    let out = ws.run(
        &["--json", "call", "mcp__chatty__leak_secret"],
        &[("AIRLOCK_LOG", "airlock_host=trace,rmcp=trace")],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stderr.contains("saw: connected with token="),
        "the plugin's log is kept: {stderr}"
    );
    assert!(
        stderr.contains("printed: connected with token="),
        "{stderr}"
    );
    assert!(!stderr.contains(secret), "a secret reached the log");
    assert!(!stdout.contains(secret));
}

#[test]
fn compiled_plugins_are_cached_on_disk_for_warm_starts() {
    let dir = tempfile::tempdir().unwrap();
    let data =
        cap_std::fs::Dir::open_ambient_dir(dir.path(), cap_std::ambient_authority()).unwrap();
    let cold = Instant::now();
    let rt = PluginRuntime::new(SandboxLimits::default(), Some(&data)).unwrap();
    rt.load(&PluginRef::Builtin("standard".into())).unwrap();
    let cold = cold.elapsed();
    let cached: Vec<_> = support::files_under(&dir.path().join("plugin-cache"));
    assert_eq!(cached.len(), 1, "{cached:?}");
    drop(rt);
    let warm = Instant::now();
    let rt = PluginRuntime::new(SandboxLimits::default(), Some(&data)).unwrap();
    rt.load(&PluginRef::Builtin("standard".into())).unwrap();
    let warm = warm.elapsed();
    // Not a benchmark: just evidence the artifact was reused rather than recompiled.
    assert!(
        warm < cold,
        "warm start {warm:?} should beat cold compile {cold:?}"
    );
}

/// Eight calls whose content plugin spins until its deadline, at once on two cores, do
/// not hold up calls on another service: plugins run off the async runtime's workers, so
/// the unrelated calls all finish while every runaway call is still spinning. Then each
/// runaway call fails with the deadline named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runaway_plugins_do_not_delay_calls_on_other_services() {
    let hostile = fixture_wasm("hostile");
    let runaway = |name: &str| {
        support::demo_entry(
            name,
            &format!(
                "adapters = {{ content = {} }}\nadapter_config = {{ content = {{ mode = \"loop\" }} }}",
                toml_str(hostile.display().to_string())
            ),
        )
    };
    let ws = Workspace::new(&format!(
        "[sandbox]\ndeadline_ms = 8000\n\n{}{}{}",
        runaway("spin_a"),
        runaway("spin_b"),
        support::demo_entry("calm", ""),
    ));
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let spinning: Vec<_> = (0..8)
        .map(|i| {
            let airlock = airlock.clone();
            let tool = if i % 2 == 0 {
                "mcp__spin_a__echo"
            } else {
                "mcp__spin_b__echo"
            };
            tokio::spawn(async move {
                airlock
                    .calls()
                    .call(tool, json!({"text": "spin"}), None)
                    .await
            })
        })
        .collect();
    // The echo round trips take milliseconds; give the runaway calls time to reach
    // their plugins (what is asserted below is an order, not a duration).
    tokio::time::sleep(Duration::from_millis(500)).await;
    for i in 0..8 {
        let out = airlock
            .calls()
            .call(
                "mcp__calm__echo",
                json!({"text": format!("calm {i}")}),
                None,
            )
            .await
            .unwrap();
        assert_eq!(out.preview, format!("calm {i}"));
    }
    assert!(
        spinning.iter().all(|call| !call.is_finished()),
        "every unrelated call finished while the runaway plugins were still spinning"
    );
    for call in spinning {
        let err = call.await.unwrap().unwrap_err();
        assert_eq!(err.code, ErrorCode::AdapterError, "{err}");
        assert!(err.message.contains("deadline"), "{err}");
    }
    airlock.close().await;
}
