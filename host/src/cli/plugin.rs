//! `airlock plugin new` (a project scaffold), `airlock plugin check` and `airlock plugin
//! run` (offline replay of one stage).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, anyhow, bail};
use clap::Subcommand;
use serde_json::{Value, json};

use super::Cli;
use super::common::data_dir;
use super::scaffold::{self, Lang, NewPlugin};
use crate::config::{PluginRef, SandboxLimits};
use crate::plugin::{self, PluginRuntime, Secret, ServiceInfo, Stage, convert};

/// `airlock plugin …`
#[derive(Debug, Subcommand)]
pub enum PluginCommand {
    /// Write a plugin project (Rust, JavaScript or Python) that builds and passes its
    /// own test with no edits.
    New {
        /// The plugin's name (lower-case letters, digits and '-'); also its folder's.
        name: String,
        /// The stage it serves: naming, content, redaction or policy.
        #[arg(long)]
        stage: String,
        /// The language.
        #[arg(long, value_enum, default_value = "rust")]
        lang: Lang,
        /// Where to write it (default: ./NAME; must not exist, or be empty).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// The `airlock-guest` SDK folder, for Rust (default: the checkout this binary
        /// was built from).
        #[arg(long)]
        sdk: Option<PathBuf>,
    },
    /// Load a component and report what it provides, or why it is refused.
    Check {
        /// A `.wasm` file or `builtin:NAME`.
        plugin: String,
    },
    /// Run one stage of a plugin on a JSON input, offline.
    Run {
        /// A `.wasm` file or `builtin:NAME`.
        plugin: String,
        /// naming, content, redaction or policy.
        #[arg(long)]
        stage: String,
        /// The input JSON file (`-` for stdin).
        #[arg(long)]
        input: PathBuf,
        /// The plugin's configuration, a JSON object.
        #[arg(long, default_value = "{}")]
        plugin_config: String,
        /// A golden file: the output this run must produce (a failure's output is
        /// `{"ok": false, "error": "adapter_error", "message": …}`). Differences are
        /// listed by JSON pointer and the exit status is 1.
        #[arg(long, value_name = "FILE")]
        expect: Option<PathBuf>,
    },
}

fn parse_stage(text: &str) -> anyhow::Result<Stage> {
    match text {
        "naming" => Ok(Stage::Naming),
        "content" => Ok(Stage::Content),
        "redaction" => Ok(Stage::Redaction),
        "policy" => Ok(Stage::Policy),
        other => bail!("--stage must be naming, content, redaction or policy, got \"{other}\""),
    }
}

fn runtime(cli: &Cli) -> anyhow::Result<std::sync::Arc<PluginRuntime>> {
    let data = data_dir(cli);
    std::fs::create_dir_all(&data)
        .with_context(|| format!("data directory \"{}\"", data.display()))?;
    let dir = cap_std::fs::Dir::open_ambient_dir(&data, cap_std::ambient_authority())?;
    Ok(PluginRuntime::new(SandboxLimits::default(), Some(&dir))?)
}

fn read_input(path: &Path) -> anyhow::Result<Value> {
    let text = if path == Path::new("-") {
        std::io::read_to_string(std::io::stdin()).context("cannot read stdin")?
    } else {
        std::fs::read_to_string(path)
            .with_context(|| format!("cannot read \"{}\"", path.display()))?
    };
    serde_json::from_str(&text).with_context(|| format!("\"{}\" is not valid JSON", path.display()))
}

/// Runs a `plugin` subcommand.
pub async fn run(cli: &Cli, command: &PluginCommand) -> anyhow::Result<ExitCode> {
    let cwd = std::env::current_dir()?;
    match command {
        PluginCommand::New {
            name,
            stage,
            lang,
            dir,
            sdk,
        } => {
            let stage = parse_stage(stage)?;
            let dir = dir.clone().unwrap_or_else(|| cwd.join(name));
            let (files, next) = scaffold::create(&NewPlugin {
                name,
                stage,
                lang: *lang,
                dir: &dir,
                sdk: sdk.as_deref(),
            })?;
            if cli.json {
                println!(
                    "{}",
                    json!({"ok": true, "dir": dir, "files": files, "next": next})
                );
            } else {
                println!(
                    "wrote a {} plugin \"{name}\" in {}:",
                    stage.name(),
                    dir.display()
                );
                for file in &files {
                    println!("  {}", file.display());
                }
                println!("next, in that folder:");
                for command in &next {
                    println!("  {command}");
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        PluginCommand::Check { plugin } => {
            let reference = PluginRef::parse(plugin, &cwd)?;
            let rt = runtime(cli)?;
            match rt.load(&reference) {
                Ok(loaded) => {
                    let stages: Vec<&str> = loaded.info.stages.iter().map(|s| s.name()).collect();
                    if cli.json {
                        println!(
                            "{}",
                            json!({
                                "ok": true,
                                "plugin": loaded.reference,
                                "name": loaded.info.name,
                                "version": loaded.info.version,
                                "stages": stages,
                                "contract": loaded.contract,
                                "supported": plugin::SUPPORTED_CONTRACT,
                                "imports": loaded.imports,
                                "size": loaded.size,
                                "sha256": loaded.sha256,
                            })
                        );
                    } else {
                        println!(
                            "{}: loads. Plugin \"{}\" {}",
                            loaded.reference, loaded.info.name, loaded.info.version
                        );
                        println!(
                            "  contract  airlock:adapter@{} (this host loads {})",
                            loaded.contract,
                            plugin::SUPPORTED_CONTRACT
                        );
                        println!("  stages    {}", stages.join(", "));
                        println!(
                            "  imports   {}",
                            if loaded.imports.is_empty() {
                                "none".to_string()
                            } else {
                                loaded.imports.join(", ")
                            }
                        );
                        println!("  size      {} bytes", loaded.size);
                        println!("  sha256    {}", loaded.sha256);
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
            expect,
        } => {
            let stage = parse_stage(stage)?;
            let reference = PluginRef::parse(plugin, &cwd)?;
            let config: Value =
                serde_json::from_str(plugin_config).context("--plugin-config is not valid JSON")?;
            let input = read_input(input)?;
            let rt = runtime(cli)?;
            let outcome = replay(&rt, &reference, stage, &config, &input).await;
            if let Some(golden) = expect {
                let expected = read_input(golden)?;
                let actual = match outcome {
                    Ok(out) => out,
                    Err(e) => {
                        let message = super::error_message(&e);
                        json!({"ok": false, "error": "adapter_error", "message": message})
                    }
                };
                let mut differences = Vec::new();
                differ("", &expected, &actual, &mut differences);
                return Ok(report_expectation(cli, golden, &actual, &differences));
            }
            match outcome {
                Ok(out) => {
                    println!("{}", serde_json::to_string_pretty(&out).expect("json"));
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) => {
                    let message = super::error_message(&e);
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

/// The JSON pointers at which `actual` differs from `expected`, with both values.
fn differ(at: &str, expected: &Value, actual: &Value, out: &mut Vec<(String, Value, Value)>) {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            let keys: std::collections::BTreeSet<&String> = e.keys().chain(a.keys()).collect();
            for k in keys {
                let path = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                match (e.get(k), a.get(k)) {
                    (Some(ev), Some(av)) => differ(&path, ev, av, out),
                    (ev, av) => out.push((
                        path,
                        ev.cloned().unwrap_or(Value::Null),
                        av.cloned().unwrap_or(Value::Null),
                    )),
                }
            }
        }
        (Value::Array(e), Value::Array(a)) if e.len() == a.len() => {
            for (i, (ev, av)) in e.iter().zip(a).enumerate() {
                differ(&format!("{at}/{i}"), ev, av, out);
            }
        }
        _ if expected == actual => {}
        _ => out.push((at.to_string(), expected.clone(), actual.clone())),
    }
}

/// Prints whether a replay matched its golden file; exit status 0 when it did.
fn report_expectation(
    cli: &Cli,
    golden: &Path,
    actual: &Value,
    differences: &[(String, Value, Value)],
) -> ExitCode {
    let shown = |v: &Value| {
        let text = v.to_string();
        match text.char_indices().nth(200) {
            Some((cut, _)) => format!("{}…", &text[..cut]),
            None => text,
        }
    };
    if cli.json {
        let listed: Vec<Value> = differences
            .iter()
            .map(|(at, e, a)| json!({"at": at, "expected": e, "actual": a}))
            .collect();
        println!(
            "{}",
            json!({"ok": differences.is_empty(), "expect": golden.display().to_string(), "differences": listed, "output": actual})
        );
    } else if differences.is_empty() {
        println!("ok: the output matches {}", golden.display());
    } else {
        eprintln!(
            "the output differs from {} at {} place(s):",
            golden.display(),
            differences.len()
        );
        for (at, e, a) in differences.iter().take(20) {
            let at = if at.is_empty() {
                "(the whole output)"
            } else {
                at
            };
            eprintln!(
                "  {at}\n    expected {}\n    actual   {}",
                shown(e),
                shown(a)
            );
        }
        if differences.len() > 20 {
            eprintln!("  … and {} more", differences.len() - 20);
        }
    }
    if differences.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Runs one stage offline. Inputs:
/// - naming: `{"service": {"id", "label"?, "description"?}, "tools": [MCP tools], "taken"?: [..]}`
/// - content: an MCP `CallToolResult`
/// - redaction: `{"result": CallToolResult, "secrets": [{"name", "value"}]}`
/// - policy: `{"call": {"tool", "arguments", "annotations"?, "service"?, "agent"?, "roots"?},
///   "result"?: CallToolResult}`: the decisions on the call (and on the result, when
///   given)
pub async fn replay(
    rt: &std::sync::Arc<PluginRuntime>,
    reference: &PluginRef,
    stage: Stage,
    config: &Value,
    input: &Value,
) -> anyhow::Result<Value> {
    let loaded = rt.load(reference)?;
    let bound = rt.bind(loaded, stage, "(replay)", config)?;
    match stage {
        Stage::Naming => {
            let svc = &input["service"];
            let service = ServiceInfo {
                id: svc["id"]
                    .as_str()
                    .context("input.service.id (a string) is required")?
                    .to_string(),
                label: svc["label"].as_str().map(str::to_string),
                description: svc["description"].as_str().map(str::to_string),
            };
            let tools = input["tools"]
                .as_array()
                .context("input.tools (an array of MCP tools) is required")?;
            let tools = tools
                .iter()
                .map(|t| {
                    convert::tool_from_mcp(t).ok_or_else(|| anyhow!("a tool without a name: {t}"))
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            let taken: Vec<String> = input["taken"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            let ns = plugin::run_namespace(&bound, service.clone(), taken).await?;
            let named = plugin::run_qualify(&bound, service, ns.clone(), tools).await?;
            Ok(json!({
                "namespace": ns,
                "tools": named.iter().map(|t| json!({"name": t.name, "raw_name": t.raw_name, "description": t.description, "input_schema": serde_json::from_str::<Value>(&t.input_schema).unwrap_or(Value::Null)})).collect::<Vec<_>>(),
            }))
        }
        Stage::Content => {
            let result = convert::result_from_mcp(input);
            let out = plugin::run_content(&bound, result).await?;
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
            let out = plugin::run_redaction(&bound, result, secrets).await?;
            Ok(json!({
                "result": convert::result_to_mcp(&out.result),
                "marks": out.marks.iter().map(|m| json!({"location": m.location, "rule": m.rule, "count": m.count})).collect::<Vec<_>>(),
            }))
        }
        Stage::Policy => replay_policy(bound, input).await,
    }
}

/// Replays a policy on a recorded call (and result): every decision, and the verdict.
async fn replay_policy(
    bound: std::sync::Arc<plugin::StageInstance>,
    input: &Value,
) -> anyhow::Result<Value> {
    let c = &input["call"];
    let text = |key: &str, default: &str| c[key].as_str().unwrap_or(default).to_string();
    let tool = c["tool"]
        .as_str()
        .context("input.call.tool (the server's tool name) is required")?;
    if !c["arguments"].is_object() && !c["arguments"].is_null() {
        bail!("input.call.arguments must be a JSON object");
    }
    let call = plugin::Call {
        agent: text("agent", crate::DEFAULT_AGENT),
        service: text("service", "replay"),
        tool: text("qualified_tool", tool),
        raw_tool: tool.to_string(),
        arguments: if c["arguments"].is_null() {
            "{}".into()
        } else {
            c["arguments"].to_string()
        },
        annotations: c
            .get("annotations")
            .filter(|a| !a.is_null())
            .map(Value::to_string),
        roots: c["roots"]
            .as_array()
            .map(|r| {
                r.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default(),
    };
    let chain = plugin::PolicyChain::single(bound);
    let known = crate::secrets::KnownSecrets::new();
    let mut records = Vec::new();
    let verdict = match chain.check_call(&call, 0, &known, &mut records).await {
        plugin::CallVerdict::Run(arguments) => json!({
            "run": true,
            "arguments": serde_json::from_str::<Value>(&arguments).unwrap_or(Value::Null),
        }),
        plugin::CallVerdict::Denied(message) => json!({"run": false, "denied": message}),
        plugin::CallVerdict::Ask { question, .. } => json!({"run": false, "ask": question}),
    };
    let mut out = json!({"decisions": records, "verdict": verdict});
    if let Some(result) = input.get("result").filter(|r| !r.is_null()) {
        let mut records = Vec::new();
        let outcome = chain
            .check_result(
                &call,
                &convert::result_from_mcp(result),
                &known,
                &mut records,
            )
            .await;
        out["result_decisions"] = json!(records);
        out["result_verdict"] = match outcome {
            plugin::ResultOutcome::Release => json!({"release": true}),
            plugin::ResultOutcome::Withheld(message) => json!({"withheld": message}),
            plugin::ResultOutcome::Replaced(r) => json!({"replaced": convert::result_to_mcp(&r)}),
        };
    }
    Ok(out)
}
