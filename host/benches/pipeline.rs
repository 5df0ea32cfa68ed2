//! The adapter pipeline in the WebAssembly sandbox against the same plugin code compiled
//! natively, both run on the benchmark's own thread and measured in the same run:
//!
//! - P1/P3: content conversion + redaction of a 4 KiB, 1 MiB and 32 MiB result
//!   (`content_redaction_*`); how a call leaves its runtime worker to run the plugins
//!   (`block_in_place`) is measured on its own against a hop to the blocking pool
//!   (`blocking_hop`).
//! - P4/P5: naming 1,000 and 10,000 tools (`naming_*`), the native side making the same
//!   checks the host makes on the plugin's answer.
//! - P6: loading a plugin from the compiled-artifact cache against compiling it cold
//!   (`plugin_load`).
//! - Policy: one `builtin:policy` decision that allows a call, after checking every
//!   rule kind (`policy_allow`).
//!
//! `scripts/bench-ratios.sh` prints the ratios from criterion's estimates.

use std::collections::HashSet;
use std::sync::Arc;

use airlock_guest as guest;
use airlock_host::config::{PluginRef, SandboxLimits};
use airlock_host::plugin::{self, PluginRuntime, Secret, ServiceInfo, Stage, convert};
use airlock_host::secrets::KnownSecrets;
use airlock_plugin_standard::naming::{NamingPolicy, Style};
use airlock_plugin_standard::redaction::RedactionPolicy;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::{Value, json};

const SECRET: &str = "tok_0123456789abcdef0123";

fn catalog(n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| json!({"name": format!("tool.number_{i}"), "description": format!("Does thing {i}"), "inputSchema": {"type": "object", "properties": {"x": {"type": "string"}}}}))
        .collect()
}

/// A result of about `size` bytes: text lines with a secret and a token every 64 lines.
fn result(size: usize) -> Value {
    let mut text = String::with_capacity(size + 128);
    let mut i = 0;
    while text.len() < size {
        if i % 64 == 0 {
            text.push_str(&format!(
                "line {i}: key={SECRET} and ghp_{}\n",
                "B".repeat(36)
            ));
        } else {
            text.push_str(&format!(
                "line {i}: the quick brown fox jumps over the lazy dog\n"
            ));
        }
        i += 1;
    }
    json!({"content": [{"type": "text", "text": text}, {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}]})
}

fn guest_tool(v: &Value) -> guest::Tool {
    guest::Tool {
        name: v["name"].as_str().unwrap().into(),
        title: None,
        description: v["description"].as_str().map(Into::into),
        input_schema: Some(v["inputSchema"].to_string()),
        output_schema: None,
        annotations: None,
        meta: None,
    }
}

fn guest_result(v: &Value) -> guest::ToolResult {
    let content = v["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| match b["type"].as_str().unwrap() {
            "text" => guest::ContentBlock::Text(guest::TextBlock {
                text: b["text"].as_str().unwrap().into(),
                annotations: None,
                meta: None,
            }),
            _ => guest::ContentBlock::Image(guest::MediaBlock {
                data: b["data"].as_str().unwrap().into(),
                mime_type: b["mimeType"].as_str().unwrap().into(),
                annotations: None,
                meta: None,
            }),
        })
        .collect();
    guest::ToolResult {
        content,
        structured_content: None,
        is_error: false,
        meta: None,
    }
}

/// The checks the host makes on a naming plugin's answer (`plugin::qualify_now`), on the
/// native side: as many names as tools, each valid and unique, raw names in order.
fn check_names(named: &[guest::NamedTool], tools: &[guest::Tool]) {
    assert_eq!(named.len(), tools.len());
    let mut seen = HashSet::with_capacity(named.len());
    for (tool, raw) in named.iter().zip(tools) {
        assert!(plugin::is_valid_name(&tool.name) && seen.insert(tool.name.as_str()));
        assert_eq!(tool.raw_name, raw.name);
    }
}

fn bench_naming(c: &mut Criterion, runtime: &Arc<PluginRuntime>) {
    let standard = runtime
        .load(&PluginRef::Builtin("standard".into()))
        .unwrap();
    let naming = runtime
        .bind(standard, Stage::Naming, "bench", &json!({}))
        .unwrap();
    let service = ServiceInfo {
        id: "bench".into(),
        label: None,
        description: None,
    };
    let guest_service = guest::ServiceInfo {
        id: "bench".into(),
        label: None,
        description: None,
    };
    let policy = NamingPolicy {
        style: Style::Mcp,
        description_prefix: false,
    };
    for count in [1000, 10_000] {
        let tools = catalog(count);
        let host_tools: Vec<_> = tools
            .iter()
            .map(|t| convert::tool_from_mcp(t).unwrap())
            .collect();
        let guest_tools: Vec<_> = tools.iter().map(guest_tool).collect();
        let mut group = c.benchmark_group(format!("naming_{count}_tools"));
        group.throughput(Throughput::Elements(count as u64));
        if count > 1000 {
            group.sample_size(20);
        }
        group.bench_function("wasm", |b| {
            b.iter(|| plugin::qualify_now(&naming, &service, "mcp__bench", &host_tools).unwrap())
        });
        group.bench_function("native", |b| {
            b.iter(|| {
                let named = policy.qualify(&guest_service, "mcp__bench", guest_tools.clone());
                check_names(&named, &guest_tools);
                named
            })
        });
        group.finish();
    }
}

fn bench_content_redaction(c: &mut Criterion, runtime: &Arc<PluginRuntime>) {
    let standard = runtime
        .load(&PluginRef::Builtin("standard".into()))
        .unwrap();
    let content = runtime
        .bind(standard.clone(), Stage::Content, "bench", &json!({}))
        .unwrap();
    let redaction = runtime
        .bind(standard, Stage::Redaction, "bench", &json!({}))
        .unwrap();
    let redaction_policy = RedactionPolicy::from_config(&guest::Config::default()).unwrap();
    let secrets = vec![Secret {
        name: "API_TOKEN".into(),
        value: SECRET.into(),
    }];
    let scrub: KnownSecrets = [("API_TOKEN".to_string(), SECRET.to_string())]
        .into_iter()
        .collect();
    let guest_secrets = vec![guest::Secret {
        name: "API_TOKEN".into(),
        value: SECRET.into(),
    }];
    let wasm = |result: plugin::ToolResult| {
        let converted = plugin::convert_now(&content, result, &scrub).unwrap();
        plugin::redact_now(&redaction, converted, &secrets, &scrub).unwrap()
    };
    for (label, size) in [("4KiB", 4 << 10), ("1MiB", 1 << 20), ("32MiB", 32 << 20)] {
        let raw = result(size);
        let host_result = convert::result_from_mcp(&raw);
        let native_result = guest_result(&raw);
        // Both sides must do the same work: compare their outputs once before timing.
        let wasm_out = wasm(host_result.clone());
        let native_out = redaction_policy
            .redact(
                airlock_plugin_standard::content::convert(native_result.clone()),
                &guest_secrets,
            )
            .unwrap();
        let wasm_text = convert::result_text(&wasm_out.result);
        let native_text = match &native_out.result.content[0] {
            guest::ContentBlock::Text(t) => t.text.clone(),
            _ => unreachable!("the first block is text"),
        };
        assert_eq!(wasm_text, native_text, "wasm and native redaction disagree");
        assert_eq!(wasm_out.marks.len(), native_out.marks.len());
        assert!(
            wasm_text.contains("[REDACTED:secret:API_TOKEN]")
                && wasm_text.contains("[REDACTED:pattern:github_token]")
        );
        let mut group = c.benchmark_group(format!("content_redaction_{label}"));
        group.throughput(Throughput::Bytes(size as u64));
        if size > 64 << 10 {
            group.sample_size(10);
        }
        group.bench_function(BenchmarkId::from_parameter("wasm"), |b| {
            b.iter(|| wasm(host_result.clone()))
        });
        group.bench_function(BenchmarkId::from_parameter("native"), |b| {
            b.iter(|| {
                let converted = airlock_plugin_standard::content::convert(native_result.clone());
                redaction_policy.redact(converted, &guest_secrets).unwrap()
            })
        });
        group.finish();
    }
}

/// How a call, running in a task on a runtime worker, gets where plugins may block: in
/// place (`block_in_place`, what calls do) against a hop to the blocking pool and back
/// (`spawn_blocking`, what they did). Each is timed inside one long-lived task on a
/// worker, as a call would be, with one yield back to the scheduler per step on both
/// sides (a call awaits between its plugin sections), so neither pays a task spawn or a
/// `block_on` per step.
fn bench_hop(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("blocking_hop");
    group.bench_function("block_in_place", |b| {
        b.iter_custom(|iters| {
            rt.block_on(rt.spawn(async move {
                let started = std::time::Instant::now();
                for _ in 0..iters {
                    std::hint::black_box(tokio::task::block_in_place(|| 1u8));
                    tokio::task::yield_now().await;
                }
                started.elapsed()
            }))
            .unwrap()
        })
    });
    group.bench_function("spawn_blocking", |b| {
        b.iter_custom(|iters| {
            rt.block_on(rt.spawn(async move {
                let started = std::time::Instant::now();
                for _ in 0..iters {
                    std::hint::black_box(tokio::task::spawn_blocking(|| 1u8).await.unwrap());
                    tokio::task::yield_now().await;
                }
                started.elapsed()
            }))
            .unwrap()
        })
    });
    group.finish();
}

/// Loading the bundled plugin from the compiled-artifact cache (a fresh runtime each
/// time, as at start-up) against compiling it from its bytes.
fn bench_load(c: &mut Criterion) {
    let cache = tempfile::tempdir().unwrap();
    let open_cache =
        || cap_std::fs::Dir::open_ambient_dir(cache.path(), cap_std::ambient_authority()).unwrap();
    let standard = PluginRef::Builtin("standard".into());
    // Fill the cache once.
    PluginRuntime::with_cache(SandboxLimits::default(), Some(open_cache()))
        .unwrap()
        .load(&standard)
        .unwrap();
    let mut group = c.benchmark_group("plugin_load");
    group.sample_size(10);
    group.bench_function("cached", |b| {
        b.iter(|| {
            PluginRuntime::with_cache(SandboxLimits::default(), Some(open_cache()))
                .unwrap()
                .load(&standard)
                .unwrap()
        })
    });
    group.bench_function("cold", |b| {
        b.iter(|| {
            PluginRuntime::with_cache(SandboxLimits::default(), None)
                .unwrap()
                .load(&standard)
                .unwrap()
        })
    });
    group.finish();
}

fn bench(c: &mut Criterion) {
    let runtime: Arc<PluginRuntime> = PluginRuntime::new(SandboxLimits::default(), None).unwrap();
    bench_content_redaction(c, &runtime);
    bench_naming(c, &runtime);
    bench_policy(c, &runtime);
    bench_hop(c);
    bench_load(c);
}

/// An allow decision of `builtin:policy` with every rule kind configured (size cap,
/// deny and allow globs, argument patterns, paths confined to roots, destructive
/// approval), wasm against the same rules native, on the benchmark's thread.
fn bench_policy(c: &mut Criterion, runtime: &Arc<PluginRuntime>) {
    let rules = json!({
        "max_argument_bytes": 65536,
        "deny": ["delete_*", "drop_*"],
        "allow": ["read_*", "list_*", "search_*"],
        "deny_arguments": [{"name": "rm", "regex": "rm\\s+-rf"}, "\\bsudo\\b"],
        "confine_paths": true,
        "ask_destructive": true,
    });
    let stage = runtime
        .bind(
            runtime.load(&PluginRef::Builtin("policy".into())).unwrap(),
            Stage::Policy,
            "bench",
            &rules,
        )
        .unwrap();
    let arguments = json!({"path": "/work/project/src/main.rs", "pattern": "fn main", "max": 20});
    let call = plugin::Call {
        agent: "default".into(),
        service: "fs".into(),
        tool: "mcp__fs__read_text_file".into(),
        raw_tool: "read_text_file".into(),
        arguments: arguments.to_string(),
        annotations: Some(json!({"readOnlyHint": true}).to_string()),
        roots: vec!["file:///work/project".into()],
    };
    let native_rules = airlock_plugin_policy::Rules::from_config(
        &guest::Config::from_value(rules.clone()).unwrap(),
    )
    .unwrap();
    let native_call = guest::Call {
        agent: call.agent.clone(),
        service: call.service.clone(),
        tool: call.tool.clone(),
        raw_tool: call.raw_tool.clone(),
        arguments: call.arguments.clone(),
        annotations: call.annotations.clone(),
        roots: call.roots.clone(),
    };
    let scrub = KnownSecrets::new();
    // Both sides must decide the same: allow, by the default rule.
    let wasm = plugin::check_call_now(&stage, &call, &scrub).unwrap();
    let native = native_rules.decide(&native_call);
    assert!(matches!(wasm.decision, plugin::Decision::Allow), "{wasm:?}");
    assert!(matches!(native.decision, guest::Decision::Allow));
    assert_eq!(wasm.rule, native.rule);
    let mut group = c.benchmark_group("policy_allow");
    group.bench_function("wasm", |b| {
        b.iter(|| plugin::check_call_now(&stage, &call, &scrub).unwrap())
    });
    group.bench_function("native", |b| b.iter(|| native_rules.decide(&native_call)));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
