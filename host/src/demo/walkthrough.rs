//! The `airlock demo` walk-through.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::config::{Config, PluginRef};
use crate::{Airlock, AirlockOptions};

/// The bundled demo configuration.
pub const DEMO_CONFIG: &str = include_str!("../../assets/demo.toml");

/// The fake credential the demo server is given (unless `DEMO_API_TOKEN` is set).
const DEMO_TOKEN: &str = "demo_tok_5f1c9e2a7b3d4e6f8a0b";

fn demo_config() -> anyhow::Result<Config> {
    let exe = std::env::current_exe().context("cannot find the airlock binary")?;
    let env = move |name: &str| match name {
        "AIRLOCK_EXE" => Some(exe.display().to_string()),
        "DEMO_API_TOKEN" => Some(std::env::var(name).unwrap_or_else(|_| DEMO_TOKEN.to_string())),
        other => std::env::var(other).ok(),
    };
    Ok(Config::from_str(
        Path::new("<bundled demo.toml>"),
        DEMO_CONFIG,
        &env,
    )?)
}

struct Step {
    title: String,
    outcome: Value,
}

async fn call(airlock: &Airlock, tool: &str, args: Value) -> Value {
    crate::call_json(&airlock.calls().call(tool, args, None).await)
}

fn print_call(title: &str, v: &Value) {
    println!("\n== {title}");
    if v["ok"] == json!(false) && v.get("output_id").is_none() {
        println!("   error {}: {}", v["error"], v["message"]);
        return;
    }
    for block in v["content"].as_array().into_iter().flatten() {
        match block["type"].as_str() {
            Some("text") => {
                for line in block["text"].as_str().unwrap_or("").lines() {
                    println!("   | {line}");
                }
            }
            Some("image") => println!(
                "   | <image {} kept with its data: {} base64 chars>",
                block["mimeType"].as_str().unwrap_or("?"),
                block["data"].as_str().map_or(0, str::len)
            ),
            _ => println!("   | {block}"),
        }
    }
    println!(
        "   -> ok={} output_id={} size={} complete={} redacted={}",
        v["ok"], v["output_id"], v["size"], v["complete"], v["redacted"]
    );
    for r in v["redactions"].as_array().into_iter().flatten() {
        println!(
            "      redacted {} x {} in {}",
            r["count"],
            r["rule"].as_str().unwrap_or(""),
            r["location"].as_str().unwrap_or("")
        );
    }
}

/// Runs the demo: catalog, a redacted secret, an image and resources converted, then the
/// same calls with the content plugin swapped to `builtin:text-only` by config alone.
/// `data_dir` holds the demo's state; `as_json` prints one JSON object instead of text.
pub async fn run_demo(data_dir: &Path, as_json: bool) -> anyhow::Result<ExitCode> {
    let config = demo_config()?;
    let options = AirlockOptions::new(data_dir);
    let mut steps: Vec<Step> = Vec::new();

    let airlock = Airlock::start(config.clone(), options.clone()).await?;
    let status = airlock.services().status();
    let catalog: Vec<Value> = airlock
        .catalog()
        .tools()
        .iter()
        .map(|t| json!({"name": t.name, "service": t.service, "tool": t.raw_name}))
        .collect();
    if !as_json {
        println!(
            "Airlock demo: the bundled demo MCP server runs as a child process; its results go through"
        );
        println!("WebAssembly plugins (naming, content, redaction) chosen in the config.");
        for s in &status {
            println!(
                "\nservice {}: {}",
                s.service,
                serde_json::to_string(&s.status).unwrap_or_default()
            );
        }
        println!("\n== The catalog (qualified names from the `standard` naming plugin)");
        for t in &catalog {
            println!(
                "   {:<32} -> {} / {}",
                t["name"].as_str().unwrap_or(""),
                t["service"].as_str().unwrap_or(""),
                t["tool"].as_str().unwrap_or("")
            );
        }
    }
    let ok = status
        .iter()
        .all(|s| matches!(s.status, crate::ServiceStatus::Connected { .. }));
    if !ok {
        airlock.close().await;
        let reason = serde_json::to_string(&status.iter().map(|s| &s.status).collect::<Vec<_>>())
            .unwrap_or_default();
        bail!("the demo server did not start: {reason}");
    }
    for (title, tool) in [
        (
            "A call whose output contains a secret (the server echoes DEMO_API_TOKEN): redacted and marked",
            "mcp__demo__show_config",
        ),
        (
            "An image, converted losslessly by `builtin:standard` (data and MIME type kept)",
            "mcp__demo__render_chart",
        ),
        (
            "Embedded resources and a resource link, converted by `builtin:standard`",
            "mcp__demo__read_docs",
        ),
        (
            "A tool that fails: ok=false, error=tool_error, the server's message kept",
            "mcp__demo__fail",
        ),
    ] {
        let outcome = call(&airlock, tool, json!({})).await;
        steps.push(Step {
            title: title.to_string(),
            outcome,
        });
    }
    airlock.close().await;

    // The same host binary, one config line changed: content = "builtin:text-only".
    let mut swapped = config;
    for server in swapped.servers.values_mut() {
        server.adapters.content = PluginRef::Builtin("text-only".into());
    }
    let airlock = Airlock::start(swapped, options).await?;
    for (title, tool) in [
        (
            "The same image with content = \"builtin:text-only\"",
            "mcp__demo__render_chart",
        ),
        (
            "The same resources with content = \"builtin:text-only\"",
            "mcp__demo__read_docs",
        ),
    ] {
        let outcome = call(&airlock, tool, json!({})).await;
        steps.push(Step {
            title: title.to_string(),
            outcome,
        });
    }
    airlock.close().await;

    if as_json {
        let steps: Vec<Value> = steps
            .iter()
            .map(|s| json!({"title": s.title, "result": s.outcome}))
            .collect();
        println!(
            "{}",
            json!({"ok": true, "catalog": catalog, "steps": steps})
        );
    } else {
        for step in &steps {
            print_call(&step.title, &step.outcome);
        }
        println!(
            "\nNext: `airlock tools`, `airlock call TOOL --args '{{..}}'` with your own airlock.toml (see README)."
        );
    }
    Ok(ExitCode::SUCCESS)
}
