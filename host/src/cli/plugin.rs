//! `airlock plugin check` and `airlock plugin run` (offline replay of one stage).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;
use serde_json::{Value, json};

use super::Cli;
use super::common::data_dir;
use crate::config::{PluginRef, SandboxLimits};
use crate::plugin::{self, PluginRuntime, Secret, ServiceInfo, Stage, convert};

/// `airlock plugin …`
#[derive(Debug, Subcommand)]
pub enum PluginCommand {
    /// Load a component and report what it provides, or why it is refused.
    Check {
        /// A `.wasm` file or `builtin:NAME`.
        plugin: String,
    },
    /// Run one stage of a plugin on a JSON input, offline.
    Run {
        /// A `.wasm` file or `builtin:NAME`.
        plugin: String,
        /// naming, content or redaction.
        #[arg(long)]
        stage: String,
        /// The input JSON file (`-` for stdin).
        #[arg(long)]
        input: PathBuf,
        /// The plugin's configuration, a JSON object.
        #[arg(long, default_value = "{}")]
        plugin_config: String,
    },
}

fn parse_stage(text: &str) -> Result<Stage, String> {
    match text {
        "naming" => Ok(Stage::Naming),
        "content" => Ok(Stage::Content),
        "redaction" => Ok(Stage::Redaction),
        other => Err(format!(
            "--stage must be naming, content or redaction, got \"{other}\""
        )),
    }
}

fn runtime(cli: &Cli) -> Result<std::sync::Arc<PluginRuntime>, String> {
    let data = data_dir(cli);
    std::fs::create_dir_all(&data)
        .map_err(|e| format!("data directory \"{}\": {e}", data.display()))?;
    let dir = cap_std::fs::Dir::open_ambient_dir(&data, cap_std::ambient_authority())
        .map_err(|e| e.to_string())?;
    PluginRuntime::new(SandboxLimits::default(), Some(&dir)).map_err(|e| e.to_string())
}

fn read_input(path: &Path) -> Result<Value, String> {
    let text = if path == Path::new("-") {
        std::io::read_to_string(std::io::stdin()).map_err(|e| format!("cannot read stdin: {e}"))?
    } else {
        std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read \"{}\": {e}", path.display()))?
    };
    serde_json::from_str(&text)
        .map_err(|e| format!("\"{}\" is not valid JSON: {e}", path.display()))
}

/// Runs a `plugin` subcommand.
pub async fn run(cli: &Cli, command: &PluginCommand) -> Result<ExitCode, String> {
    let cwd = std::env::current_dir().map_err(|e| e.to_string())?;
    match command {
        PluginCommand::Check { plugin } => {
            let reference = PluginRef::parse(plugin, &cwd)?;
            let rt = runtime(cli)?;
            match rt.load(&reference) {
                Ok(loaded) => {
                    let stages: Vec<&str> = loaded.info.stages.iter().map(|s| s.name()).collect();
                    if cli.json {
                        println!(
                            "{}",
                            json!({"ok": true, "plugin": loaded.reference, "name": loaded.info.name, "version": loaded.info.version, "stages": stages, "contract": plugin::SUPPORTED_CONTRACT})
                        );
                    } else {
                        println!(
                            "{}: plugin \"{}\" {} — stages: {}",
                            loaded.reference,
                            loaded.info.name,
                            loaded.info.version,
                            stages.join(", ")
                        );
                    }
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) => {
                    if cli.json {
                        println!(
                            "{}",
                            json!({"ok": false, "error": "adapter_error", "message": e.to_string()})
                        );
                    } else {
                        eprintln!("refused: {e}");
                    }
                    Ok(ExitCode::FAILURE)
                }
            }
        }
        PluginCommand::Run {
            plugin,
            stage,
            input,
            plugin_config,
        } => {
            let stage = parse_stage(stage)?;
            let reference = PluginRef::parse(plugin, &cwd)?;
            let config: Value = serde_json::from_str(plugin_config)
                .map_err(|e| format!("--plugin-config is not valid JSON: {e}"))?;
            let input = read_input(input)?;
            let rt = runtime(cli)?;
            let outcome = replay(&rt, &reference, stage, &config, &input).await;
            match outcome {
                Ok(out) => {
                    println!("{}", serde_json::to_string_pretty(&out).expect("json"));
                    Ok(ExitCode::SUCCESS)
                }
                Err(message) => {
                    if cli.json {
                        println!(
                            "{}",
                            json!({"ok": false, "error": "adapter_error", "message": message})
                        );
                    } else {
                        eprintln!("adapter_error: {message}");
                    }
                    Ok(ExitCode::FAILURE)
                }
            }
        }
    }
}

/// Runs one stage offline. Inputs:
/// - naming: `{"service": {"id", "label"?, "description"?}, "tools": [MCP tools], "taken"?: [..]}`
/// - content: an MCP `CallToolResult`
/// - redaction: `{"result": CallToolResult, "secrets": [{"name", "value"}]}`
pub async fn replay(
    rt: &std::sync::Arc<PluginRuntime>,
    reference: &PluginRef,
    stage: Stage,
    config: &Value,
    input: &Value,
) -> Result<Value, String> {
    let loaded = rt.load(reference).map_err(|e| e.to_string())?;
    let bound = rt
        .bind(loaded, stage, "(replay)", config)
        .map_err(|e| e.to_string())?;
    match stage {
        Stage::Naming => {
            let svc = &input["service"];
            let service = ServiceInfo {
                id: svc["id"]
                    .as_str()
                    .ok_or("input.service.id (a string) is required")?
                    .to_string(),
                label: svc["label"].as_str().map(str::to_string),
                description: svc["description"].as_str().map(str::to_string),
            };
            let tools = input["tools"]
                .as_array()
                .ok_or("input.tools (an array of MCP tools) is required")?;
            let tools = tools
                .iter()
                .map(|t| {
                    convert::tool_from_mcp(t).ok_or_else(|| format!("a tool without a name: {t}"))
                })
                .collect::<Result<Vec<_>, _>>()?;
            let taken: Vec<String> = input["taken"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            let ns = plugin::run_namespace(&bound, service.clone(), taken)
                .await
                .map_err(|e| e.to_string())?;
            let named = plugin::run_qualify(&bound, service, ns.clone(), tools)
                .await
                .map_err(|e| e.to_string())?;
            Ok(json!({
                "namespace": ns,
                "tools": named.iter().map(|t| json!({"name": t.name, "raw_name": t.raw_name, "description": t.description, "input_schema": serde_json::from_str::<Value>(&t.input_schema).unwrap_or(Value::Null)})).collect::<Vec<_>>(),
            }))
        }
        Stage::Content => {
            let result = convert::result_from_mcp(input);
            let out = plugin::run_content(&bound, result)
                .await
                .map_err(|e| e.to_string())?;
            Ok(convert::result_to_mcp(&out))
        }
        Stage::Redaction => {
            let result = convert::result_from_mcp(&input["result"]);
            let secrets = input["secrets"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|s| {
                            Some(Secret {
                                name: s["name"].as_str()?.into(),
                                value: s["value"].as_str()?.into(),
                            })
                        })
                        .collect()
                })
                .unwrap_or_default();
            let out = plugin::run_redaction(&bound, result, secrets)
                .await
                .map_err(|e| e.to_string())?;
            Ok(json!({
                "result": convert::result_to_mcp(&out.result),
                "marks": out.marks.iter().map(|m| json!({"location": m.location, "rule": m.rule, "count": m.count})).collect::<Vec<_>>(),
            }))
        }
    }
}
