//! The second-language plugin (`plugins/policy-js`, JavaScript built with jco
//! componentize) against the bundled Rust policy plugin (`builtin:policy`), in the same
//! run: loading it cold (compiling the component) and from the compiled cache
//! (`second_language_load`), and one allow decision with comparable rules — deny globs,
//! argument regexes, ask globs — on the benchmark's thread (`second_language_allow`).
//!
//! Needs the JavaScript plugin built: `scripts/build-js-plugin.sh` (the test command
//! and `scripts/bench-ratios.sh` run it).

use std::path::PathBuf;

use airlock_host::config::{PluginRef, SandboxLimits};
use airlock_host::plugin::{self, PluginRuntime, Stage};
use airlock_host::secrets::KnownSecrets;
use criterion::{Criterion, SamplingMode, criterion_group, criterion_main};
use serde_json::json;

fn js_plugin() -> PluginRef {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/js-plugins/policy-js.wasm");
    assert!(
        path.is_file(),
        "{} is missing: run scripts/build-js-plugin.sh",
        path.display()
    );
    PluginRef::File(path.canonicalize().unwrap())
}

fn bench_load(c: &mut Criterion) {
    let js = js_plugin();
    let rust = PluginRef::Builtin("policy".into());
    let cache = tempfile::tempdir().unwrap();
    let open_cache =
        || cap_std::fs::Dir::open_ambient_dir(cache.path(), cap_std::ambient_authority()).unwrap();
    let mut group = c.benchmark_group("second_language_load");
    // A cold load of the JavaScript plugin takes seconds: ten flat samples, one load each.
    group.sample_size(10).sampling_mode(SamplingMode::Flat);
    for (name, plugin) in [("js", &js), ("rust", &rust)] {
        // Fill the cache once.
        PluginRuntime::with_cache(SandboxLimits::default(), Some(open_cache()))
            .unwrap()
            .load(plugin)
            .unwrap();
        group.bench_function(format!("{name}_cached"), |b| {
            b.iter(|| {
                PluginRuntime::with_cache(SandboxLimits::default(), Some(open_cache()))
                    .unwrap()
                    .load(plugin)
                    .unwrap()
            })
        });
        group.bench_function(format!("{name}_cold"), |b| {
            b.iter(|| {
                PluginRuntime::with_cache(SandboxLimits::default(), None)
                    .unwrap()
                    .load(plugin)
                    .unwrap()
            })
        });
    }
    group.finish();
}

fn bench_allow(c: &mut Criterion) {
    let runtime = PluginRuntime::new(SandboxLimits::default(), None).unwrap();
    let js = runtime
        .bind(
            runtime.load(&js_plugin()).unwrap(),
            Stage::Policy,
            "bench",
            &json!({"deny": ["delete_*", "drop_*"], "deny_arguments": ["rm\\s+-rf", "\\bsudo\\b"], "ask": ["wipe_*"]}),
        )
        .unwrap();
    let rust = runtime
        .bind(
            runtime.load(&PluginRef::Builtin("policy".into())).unwrap(),
            Stage::Policy,
            "bench",
            &json!({"deny": ["delete_*", "drop_*"], "deny_arguments": ["rm\\s+-rf", "\\bsudo\\b"]}),
        )
        .unwrap();
    let call = plugin::Call {
        agent: "default".into(),
        service: "fs".into(),
        tool: "mcp__fs__read_text_file".into(),
        raw_tool: "read_text_file".into(),
        arguments: json!({"path": "/work/project/src/main.rs", "pattern": "fn main", "max": 20})
            .to_string(),
        annotations: Some(json!({"readOnlyHint": true}).to_string()),
        roots: vec!["file:///work/project".into()],
    };
    let scrub = KnownSecrets::new();
    for stage in [&js, &rust] {
        let verdict = plugin::check_call_now(stage, &call, &scrub).unwrap();
        assert!(
            matches!(verdict.decision, plugin::Decision::Allow),
            "{verdict:?}"
        );
    }
    let mut group = c.benchmark_group("second_language_allow");
    group.bench_function("js", |b| {
        b.iter(|| plugin::check_call_now(&js, &call, &scrub).unwrap())
    });
    group.bench_function("rust", |b| {
        b.iter(|| plugin::check_call_now(&rust, &call, &scrub).unwrap())
    });
    group.finish();
}

fn bench(c: &mut Criterion) {
    bench_allow(c);
    bench_load(c);
}

criterion_group!(benches, bench);
criterion_main!(benches);
