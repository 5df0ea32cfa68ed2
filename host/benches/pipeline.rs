//! The adapter pipeline in the WebAssembly sandbox against the same plugin logic
//! compiled natively, measured in the same run: naming a 1,000-tool catalog, and content
//! conversion + redaction of a 4 KiB and a 1 MiB result. `scripts/bench-ratios.sh`
//! prints the wasm/native ratios from criterion's estimates.

use std::sync::Arc;

use airlock_guest as guest;
use airlock_host::config::{PluginRef, SandboxLimits};
use airlock_host::plugin::{self, PluginRuntime, Secret, ServiceInfo, Stage, convert};
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

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let runtime: Arc<PluginRuntime> = PluginRuntime::new(SandboxLimits::default(), None).unwrap();
    let standard = runtime
        .load(&PluginRef::Builtin("standard".into()))
        .unwrap();
    let naming = runtime
        .bind(standard.clone(), Stage::Naming, "bench", &json!({}))
        .unwrap();
    let content = runtime
        .bind(standard.clone(), Stage::Content, "bench", &json!({}))
        .unwrap();
    let redaction = runtime
        .bind(standard, Stage::Redaction, "bench", &json!({}))
        .unwrap();

    let tools = catalog(1000);
    let host_tools: Vec<_> = tools
        .iter()
        .map(|t| convert::tool_from_mcp(t).unwrap())
        .collect();
    let guest_tools: Vec<_> = tools.iter().map(guest_tool).collect();
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

    let mut group = c.benchmark_group("naming_1000_tools");
    group.throughput(Throughput::Elements(1000));
    group.bench_function("wasm", |b| {
        b.iter(|| {
            rt.block_on(plugin::run_qualify(
                &naming,
                service.clone(),
                "mcp__bench".into(),
                host_tools.clone(),
            ))
            .unwrap()
        })
    });
    group.bench_function("native", |b| {
        b.iter(|| policy.qualify(&guest_service, "mcp__bench", guest_tools.clone()))
    });
    group.finish();

    let redaction_policy = RedactionPolicy::from_config(&guest::Config::default()).unwrap();
    let secrets = vec![Secret {
        name: "API_TOKEN".into(),
        value: SECRET.into(),
    }];
    let guest_secrets = vec![guest::Secret {
        name: "API_TOKEN".into(),
        value: SECRET.into(),
    }];
    for (label, size) in [("4KiB", 4 << 10), ("1MiB", 1 << 20)] {
        let raw = result(size);
        let host_result = convert::result_from_mcp(&raw);
        let native_result = guest_result(&raw);
        // Both sides must do the same work: compare their outputs once before timing.
        let wasm_out = rt.block_on(async {
            let converted = plugin::run_content(&content, host_result.clone())
                .await
                .unwrap();
            plugin::run_redaction(&redaction, converted, secrets.clone())
                .await
                .unwrap()
        });
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
            group.sample_size(20);
        }
        group.bench_function(BenchmarkId::from_parameter("wasm"), |b| {
            b.iter(|| {
                rt.block_on(async {
                    let converted = plugin::run_content(&content, host_result.clone())
                        .await
                        .unwrap();
                    plugin::run_redaction(&redaction, converted, secrets.clone())
                        .await
                        .unwrap()
                })
            })
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

criterion_group!(benches, bench);
criterion_main!(benches);
