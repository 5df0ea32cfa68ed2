//! How command results are printed: JSON exactly as DESIGN.md specifies, or text for
//! people.

use std::process::ExitCode;

use serde_json::{Value, json};

use crate::CatalogTool;
use crate::airlock::{CallOutput, ServiceReport, ServiceStatus};
use crate::error::{CallError, ErrorCode};

/// Prints a call's outcome; the exit code is 0 exactly when the call is ok.
pub fn call(as_json: bool, outcome: Result<CallOutput, CallError>) -> ExitCode {
    let ok = matches!(&outcome, Ok(out) if !out.is_error);
    if as_json {
        println!("{}", crate::call_json(&outcome));
    } else {
        match &outcome {
            Ok(out) => {
                if let Some(warning) = &out.warning {
                    eprintln!("warning: {warning}");
                }
                if out.is_error {
                    eprintln!("tool_error: the server reported a failure:");
                }
                println!("{}", out.preview);
                for block in &out.content {
                    if let crate::mcp::ContentBlock::Image(image) = block {
                        println!(
                            "[image {} — {} base64 chars]",
                            image.mime_type,
                            image.data.len()
                        );
                    }
                }
                let r = &out.retained;
                eprintln!(
                    "-- {}/{}: {} bytes, {}, {}{}",
                    out.service,
                    out.raw_tool,
                    r.size,
                    r.digest,
                    if r.complete {
                        "complete"
                    } else {
                        "preview only"
                    },
                    if r.redacted { ", redacted" } else { "" }
                );
                for m in &out.redactions {
                    eprintln!("   redacted {} × {} in {}", m.count, m.rule, m.location);
                }
                match (&r.output_id, &r.not_retained_reason) {
                    (Some(id), _) if !r.complete => eprintln!(
                        "   read the rest: airlock output {} {id} --offset {}",
                        out.service,
                        out.preview.len()
                    ),
                    (Some(id), _) => eprintln!("   output id: {id}"),
                    (None, Some(reason)) => eprintln!("   {reason}"),
                    _ => {}
                }
            }
            Err(e) => eprintln!("{}: {}", e.code, e.message),
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Prints an error for a call that never started.
pub fn call_error(as_json: bool, code: ErrorCode, message: &str) {
    if as_json {
        println!(
            "{}",
            json!({"ok": false, "error": code, "message": message})
        );
    } else {
        eprintln!("{code}: {message}");
    }
}

/// Prints the tool list (`airlock tools`).
pub fn tools(as_json: bool, tools: &[&CatalogTool], status: &[ServiceReport]) {
    let failed: Vec<Value> = status
        .iter()
        .filter_map(|s| match &s.status {
            ServiceStatus::Failed { reason } => {
                Some(json!({"service": s.service, "reason": reason}))
            }
            _ => None,
        })
        .collect();
    if as_json {
        let list: Vec<Value> = tools
            .iter()
            .map(|t| json!({"name": t.name, "service": t.service, "tool": t.raw_name, "description": t.description, "input_schema": t.input_schema, "incompatible": t.incompatible}))
            .collect();
        println!("{}", json!({"tools": list, "failed_services": failed}));
        return;
    }
    for t in tools {
        let desc = t
            .description
            .as_deref()
            .unwrap_or("")
            .lines()
            .next()
            .unwrap_or("");
        match &t.incompatible {
            Some(why) => println!("{:<48} {desc}  [incompatible: {why}]", t.name),
            None => println!("{:<48} {desc}", t.name),
        }
    }
    if tools.is_empty() {
        println!("(no tools)");
    }
    for f in failed {
        eprintln!(
            "warning: service \"{}\" failed: {}",
            f["service"].as_str().unwrap_or(""),
            f["reason"].as_str().unwrap_or("")
        );
    }
}

/// Prints service states (`airlock status`).
pub fn status(as_json: bool, status: &[ServiceReport]) {
    if as_json {
        println!("{}", json!({"services": status}));
        return;
    }
    if status.is_empty() {
        println!(
            "No MCP servers configured. Add them to ./airlock.toml or the user config (see README), e.g.:\n\n[mcp_servers.fs]\ncommand = \"npx\"\nargs = [\"-y\", \"@modelcontextprotocol/server-filesystem\", \"/tmp\"]"
        );
    }
    for s in status {
        let state = match &s.status {
            ServiceStatus::Disabled => "disabled".to_string(),
            ServiceStatus::Untested { reason, .. } => format!("untested      {reason}"),
            ServiceStatus::Disconnected { tools } => format!("disconnected  {tools} tools"),
            ServiceStatus::Connecting { tools } => format!("connecting    {tools} tools"),
            ServiceStatus::Connected { tools, sessions } => {
                format!("connected     {tools} tools, {sessions} session(s)")
            }
            ServiceStatus::Failed { reason } => format!("failed        {reason}"),
        };
        let server = s
            .server
            .as_ref()
            .map(|i| {
                // A 2026-07-28 server need not say its version (or even its name).
                let who = [i.name.as_str(), i.version.as_str()]
                    .into_iter()
                    .filter(|s| !s.is_empty())
                    .collect::<Vec<_>>()
                    .join(" ");
                let who = if who.is_empty() {
                    "unnamed".to_string()
                } else {
                    who
                };
                format!("  ({who}, MCP {})", i.protocol_version)
            })
            .unwrap_or_default();
        let breaker = match s.limits.retry_in_ms {
            Some(ms) if s.limits.breaker == "open" => format!(
                "  [breaker open after {} failures; next try in {:.1} s]",
                s.limits.failures,
                ms as f64 / 1000.0
            ),
            _ => String::new(),
        };
        println!("{:<20} {state}{server}{breaker}", s.service);
    }
}

/// Prints a JSON result (resources, prompts) or its error; exit 0 exactly on success.
pub fn value(as_json: bool, outcome: Result<Value, CallError>) -> ExitCode {
    match outcome {
        Ok(v) => {
            if as_json {
                println!("{v}");
            } else {
                println!("{}", serde_json::to_string_pretty(&v).expect("json"));
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            call_error(as_json, e.code, &e.message);
            ExitCode::FAILURE
        }
    }
}
