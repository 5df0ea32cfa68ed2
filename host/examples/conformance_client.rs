//! A small MCP client built on the `airlock-host` library, for the official conformance
//! suite (`@modelcontextprotocol/conformance`, client mode). The suite appends the test
//! server's URL to the command line and names the scenario in
//! `MCP_CONFORMANCE_SCENARIO`. The client connects (streamable HTTP, SSE fallback),
//! lists the tools and calls each with arguments derived from its schema.
//!
//! ```sh
//! npx @modelcontextprotocol/conformance@0.1.13 client --command target/debug/examples/conformance_client --scenario initialize
//! ```

use std::path::Path;
use std::process::ExitCode;

use airlock_host::config::{Config, process_env};
use airlock_host::{Airlock, AirlockOptions, ServiceStatus};
use serde_json::{Map, Value, json};

/// Arguments for a tool from its input schema: a plausible value per property.
fn arguments(schema: &Value) -> Value {
    let mut args = Map::new();
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, prop) in props {
            let value = match prop.get("type").and_then(Value::as_str) {
                Some("number") | Some("integer") => json!(1),
                Some("boolean") => json!(true),
                Some("array") => json!([]),
                Some("object") => json!({}),
                _ => json!("test"),
            };
            args.insert(name.clone(), value);
        }
    }
    Value::Object(args)
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("info"))
        .with_writer(std::io::stderr)
        .init();
    let Some(url) = std::env::args().nth(1) else {
        eprintln!("usage: conformance_client URL");
        return ExitCode::from(2);
    };
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    eprintln!("scenario {scenario:?} against {url}");
    let text = format!(
        "[mcp_servers.conformance]\ntype = \"http\"\nurl = \"{url}\"\nstartup_timeout_secs = 20\ntool_timeout_secs = 20\n"
    );
    let config = match Config::from_str(Path::new("<conformance>"), &text, &process_env) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let data = std::env::temp_dir().join(format!("airlock-conformance-{}", std::process::id()));
    let airlock = match Airlock::start(config, AirlockOptions::new(&data)).await {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let mut ok = true;
    for report in airlock.status() {
        println!("{}", serde_json::to_string(&report).unwrap_or_default());
        ok &= matches!(report.status, ServiceStatus::Connected { .. });
    }
    for tool in airlock.tools() {
        let args = arguments(&tool.input_schema);
        match airlock.call(&tool.name, args, None).await {
            Ok(out) => println!("{}: {}", tool.raw_name, out.preview),
            Err(e) => {
                println!("{}: {e}", tool.raw_name);
                ok = false;
            }
        }
    }
    airlock.close().await;
    let _ = std::fs::remove_dir_all(&data);
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
