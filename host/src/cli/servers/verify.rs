//! `airlock servers test`: connect to one server, negotiate, list its tools (running
//! none), save them as the tested catalog, and close.

use std::process::ExitCode;

use anyhow::{Context, bail};
use serde_json::json;

use super::print;
use crate::cli::Cli;
use crate::cli::common::options;
use crate::config::{ConfigSources, process_env};
use crate::servers::Servers;

/// Runs `airlock servers test`.
pub(super) async fn test(
    cli: &Cli,
    servers: &Servers,
    sources: &ConfigSources,
    name: &str,
) -> anyhow::Result<ExitCode> {
    let config = servers.load_config(sources, &process_env)?;
    let server = config
        .servers
        .get(name)
        .with_context(|| format!("no server named \"{name}\""))?
        .clone();
    if !server.enabled {
        bail!(
            "server \"{name}\" is disabled; enable it first with `airlock servers enable {name}`"
        );
    }
    let mut options = options(cli)?;
    options.max_sessions = 1;
    match crate::Airlock::test_service(server, config.storage.clone(), options).await {
        Ok(report) => {
            print(cli, json!({"ok": true, "test": report}), || {
                let s = &report.server;
                println!("verified: yes");
                println!("protocol: {}", s.protocol_version);
                let title = s
                    .title
                    .as_deref()
                    .map(|t| format!(" \"{t}\""))
                    .unwrap_or_default();
                let transport = serde_json::to_value(s.transport).unwrap_or_default();
                println!(
                    "server:   {} {}{title} over {}",
                    s.name,
                    s.version,
                    transport.as_str().unwrap_or("?")
                );
                println!(
                    "tools:    {} (saved as the tested catalog; none was run)",
                    report.tools.len()
                );
                for t in &report.tools {
                    let desc = t["description"]
                        .as_str()
                        .unwrap_or("")
                        .lines()
                        .next()
                        .unwrap_or("");
                    println!("  {:<28} {desc}", t["name"].as_str().unwrap_or("?"));
                }
            });
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            print(
                cli,
                json!({"ok": false, "verified": false, "error": "service_unavailable", "message": e.to_string()}),
                || {
                    println!("verified: no");
                    eprintln!("airlock: {e}");
                },
            );
            Ok(ExitCode::FAILURE)
        }
    }
}
