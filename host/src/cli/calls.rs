//! `airlock call` (one tool call, optionally with its events) and `airlock output`
//! (a page of a retained result).

use std::process::ExitCode;
use std::time::Duration;

use anyhow::bail;
use serde_json::{Value, json};

use super::Cli;
use super::common::{load_config, open_stores, start};
use super::render;
use crate::error::ErrorCode;

/// Runs `airlock call`.
pub(super) async fn call(
    cli: &Cli,
    tool: &str,
    args: &str,
    timeout: Option<f64>,
    compact: bool,
    events: bool,
) -> anyhow::Result<ExitCode> {
    let arguments: Value = match serde_json::from_str(args) {
        Ok(v) => v,
        Err(e) => {
            render::call_error(
                cli.json,
                ErrorCode::InvalidArguments,
                &format!("--args is not valid JSON: {e}"),
            );
            return Ok(ExitCode::FAILURE);
        }
    };
    let timeout = match timeout {
        Some(t) if !(t.is_finite() && t > 0.0) => {
            bail!("--timeout must be a positive number of seconds, got {t}");
        }
        Some(t) => Some(Duration::from_secs_f64(t)),
        None => None,
    };
    let airlock = start(cli, load_config(cli)?, compact).await?;
    let printer = (events && cli.json).then(|| {
        let mut rx = airlock.events();
        tokio::spawn(async move {
            while let Ok(event) = rx.recv().await {
                println!(
                    "{}",
                    serde_json::to_string(&event).expect("events serialize")
                );
            }
        })
    });
    let options = crate::CallOptions {
        agent: cli.agent.clone(),
        timeout,
        ..Default::default()
    };
    let outcome = airlock.calls().call_with(tool, arguments, options).await;
    if let Some(printer) = printer {
        tokio::time::sleep(Duration::from_millis(20)).await;
        printer.abort();
    }
    airlock.close().await;
    Ok(render::call(cli.json, outcome))
}

/// Runs `airlock output`.
/// Runs `airlock output SERVICE ID --save DIR [--part-size BYTES]`.
pub(super) fn save_output(
    cli: &Cli,
    service: &str,
    output_id: &str,
    folder: &std::path::Path,
    part_size: Option<usize>,
) -> anyhow::Result<ExitCode> {
    let stores = open_stores(cli)?;
    match stores.export_output(&cli.agent, service, output_id, folder, part_size) {
        Ok(export) => {
            if cli.json {
                println!("{}", json!({"ok": true, "export": export}));
            } else {
                for part in &export.parts {
                    println!(
                        "{}  {} bytes  {}",
                        folder.join(&part.file).display(),
                        part.size,
                        part.digest
                    );
                }
                if let Some(index) = &export.index {
                    println!(
                        "{}  (index of {} parts)",
                        index.display(),
                        export.parts.len()
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => Ok(refused(cli, &e)),
    }
}

/// Runs `airlock output SERVICE ID [--offset N]`.
pub(super) fn output(
    cli: &Cli,
    service: &str,
    output_id: &str,
    offset: usize,
) -> anyhow::Result<ExitCode> {
    let stores = open_stores(cli)?;
    match stores.read_output(&cli.agent, service, output_id, offset) {
        Ok(page) => {
            if cli.json {
                println!(
                    "{}",
                    serde_json::to_string(&page).expect("a page serializes")
                );
            } else {
                print!("{}", page.text);
                if let Some(next) = page.next_offset {
                    eprintln!("\n-- more: airlock output {service} {output_id} --offset {next}");
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => Ok(refused(cli, &e)),
    }
}

/// A read or export that failed: its code and message (as JSON with `--json`).
fn refused(cli: &Cli, e: &crate::CallError) -> ExitCode {
    if cli.json {
        println!(
            "{}",
            json!({"ok": false, "error": e.code, "message": e.message})
        );
    } else {
        eprintln!("airlock: {}", e.message);
    }
    ExitCode::FAILURE
}
