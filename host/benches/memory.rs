//! P7: host memory per idle session and per warm plugin instance, from the process's
//! resident set (`/proc/self/status`), each as the growth over a baseline measured in
//! the same run divided by how many were added:
//!
//! - per plugin instance: 64 more bindings of the bundled plugin's content stage, each
//!   with one warm instance that has converted a 4 KiB result;
//! - per idle session: 32 more agents, each with its own open session to the demo
//!   server (a real child process; its memory is not the host's and is not counted).
//!
//! Writes `target/criterion/memory/figures.json`, which `scripts/bench-ratios.sh` prints.

use airlock_host::config::{Config, PluginRef, SandboxLimits, process_env};
use airlock_host::plugin::{PluginRuntime, Stage, convert};
use airlock_host::secrets::KnownSecrets;
use airlock_host::{Airlock, AirlockOptions, CallOptions};
use serde_json::json;

const AIRLOCK: &str = env!("CARGO_BIN_EXE_airlock");

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status")
}

fn per_instance_kib() -> f64 {
    const COUNT: usize = 64;
    let runtime = PluginRuntime::new(SandboxLimits::default(), None).unwrap();
    let standard = runtime
        .load(&PluginRef::Builtin("standard".into()))
        .unwrap();
    let result =
        convert::result_from_mcp(&json!({"content": [{"type": "text", "text": "x".repeat(4096)}]}));
    let bind_one = || {
        let stage = runtime
            .bind(standard.clone(), Stage::Content, "bench", &json!({}))
            .unwrap();
        airlock_host::plugin::convert_now(&stage, result.clone(), &KnownSecrets::new()).unwrap();
        stage
    };
    // Warm the allocator and the first instance, then measure.
    let mut stages = vec![bind_one()];
    let before = rss_kib();
    for _ in 0..COUNT {
        stages.push(bind_one());
    }
    let after = rss_kib();
    assert_eq!(stages.iter().map(|s| s.pooled()).sum::<usize>(), COUNT + 1);
    (after - before) as f64 / COUNT as f64
}

fn per_session_kib() -> f64 {
    const COUNT: usize = 32;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let work = tempfile::tempdir().unwrap();
    let text = format!(
        "[mcp_servers.demo]\ntype = \"stdio\"\ncommand = {AIRLOCK:?}\nargs = [\"demo-server\"]\n"
    );
    let config = Config::from_str(&work.path().join("airlock.toml"), &text, &process_env).unwrap();
    let mut options = AirlockOptions::new(work.path().join("data"));
    options.max_sessions = COUNT * 2;
    let airlock = rt.block_on(Airlock::start(config, options)).unwrap();
    let open = |agent: String| {
        let out = rt
            .block_on(airlock.calls().call_with(
                "mcp__demo__echo",
                json!({"text": "hello"}),
                CallOptions {
                    agent,
                    ..Default::default()
                },
            ))
            .unwrap();
        assert!(!out.is_error);
    };
    for i in 0..4 {
        open(format!("warm-{i}"));
    }
    rt.block_on(airlock.outputs().flush());
    let before = rss_kib();
    for i in 0..COUNT {
        open(format!("agent-{i}"));
    }
    rt.block_on(airlock.outputs().flush());
    let after = rss_kib();
    rt.block_on(airlock.close());
    (after - before) as f64 / COUNT as f64
}

fn main() {
    // `cargo bench` passes `--bench`; any other argument is a filter criterion would take.
    let instance = per_instance_kib();
    let session = per_session_kib();
    let figures = json!({
        "per_plugin_instance_kib": instance,
        "per_idle_session_kib": session,
    });
    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/criterion/memory");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("figures.json"), figures.to_string()).unwrap();
    println!("memory: {figures}");
}
