//! The `airlock` command line: argument parsing and one function per command. Every
//! command accepts `--config FILE` (repeatable), `--data-dir DIR` and `--json`.

mod import_cmd;
mod plugin_cmd;
mod render;
mod servers_cmd;

pub use render::call_json as render_call_json;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use serde_json::{Value, json};

use crate::config::{Config, ConfigSources, process_env};
use crate::error::ErrorCode;
use crate::results::COMPACT_PREVIEW;
use crate::{Airlock, AirlockOptions};

/// Airlock: a WASM-sandboxed plugin host for MCP bridges.
#[derive(Debug, Parser)]
#[command(name = "airlock", version, about, long_about = None)]
pub struct Cli {
    /// A config file to read (TOML or JSON), after the user and project files. Repeatable.
    #[arg(long = "config", global = true, value_name = "FILE")]
    pub config: Vec<PathBuf>,
    /// Where Airlock keeps its state (default: the platform data folder, or $AIRLOCK_DATA_DIR).
    #[arg(long, global = true, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Print machine-readable JSON.
    #[arg(long, global = true)]
    pub json: bool,
    /// A folder to offer servers as a root. Repeatable (default: the current folder).
    #[arg(long = "root", global = true, value_name = "DIR")]
    pub roots: Vec<PathBuf>,
    /// The agent acting (each agent has its own session per service).
    #[arg(long, global = true, default_value = crate::DEFAULT_AGENT)]
    pub agent: String,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Walk through Airlock end to end on a bundled demo server.
    Demo,
    /// List every tool with its qualified name.
    Tools {
        /// Only tools matching these words (service, namespace, tool name, description).
        #[arg(long)]
        search: Option<String>,
    },
    /// Call a tool by its qualified name.
    Call {
        /// The qualified tool name (see `airlock tools`).
        tool: String,
        /// The arguments, a JSON object.
        #[arg(long, default_value = "{}")]
        args: String,
        /// Timeout in seconds (default: the server's tool_timeout_secs).
        #[arg(long)]
        timeout: Option<f64>,
        /// Use the compact preview (4 KiB) instead of 48 KiB.
        #[arg(long)]
        compact: bool,
        /// With --json, print events (progress, session changes) as JSON lines before
        /// the result.
        #[arg(long)]
        events: bool,
    },
    /// List resources (of one service, or all).
    Resources {
        /// Only this service.
        service: Option<String>,
    },
    /// Read a resource.
    ReadResource {
        /// The service.
        service: String,
        /// The resource URI.
        uri: String,
    },
    /// List prompts (of one service, or all).
    Prompts {
        /// Only this service.
        service: Option<String>,
    },
    /// Get a prompt.
    GetPrompt {
        /// The service.
        service: String,
        /// The prompt name.
        name: String,
        /// The prompt arguments, a JSON object of strings.
        #[arg(long, default_value = "{}")]
        args: String,
    },
    /// Read a page of a retained output.
    Output {
        /// The service that produced it.
        service: String,
        /// The output id from the call.
        output_id: String,
        /// Byte offset to start at (from `next_offset`).
        #[arg(long, default_value_t = 0)]
        offset: usize,
    },
    /// Show every configured server's state.
    Status,
    /// Manage servers kept in Airlock's registry (add, list, test, auth…).
    Servers {
        /// What to do.
        #[command(subcommand)]
        command: servers_cmd::ServersCommand,
    },
    /// Preview (and with --apply, import) servers defined in other MCP clients.
    Import(import_cmd::ImportArgs),
    /// Inspect and replay plugins.
    Plugin {
        /// What to do.
        #[command(subcommand)]
        command: PluginCommand,
    },
    /// Run the bundled demo MCP server on stdin/stdout (used by `airlock demo`).
    #[command(hide = true)]
    DemoServer,
}

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

/// Runs the CLI; returns the process exit code.
pub async fn run(cli: Cli) -> ExitCode {
    match dispatch(&cli).await {
        Ok(code) => code,
        Err(message) => {
            if cli.json {
                println!(
                    "{}",
                    json!({"ok": false, "error": "usage", "message": message})
                );
            } else {
                eprintln!("airlock: {message}");
            }
            ExitCode::from(2)
        }
    }
}

/// The data directory: `--data-dir`, `$AIRLOCK_DATA_DIR`, or the platform default.
pub fn data_dir(cli: &Cli) -> PathBuf {
    cli.data_dir
        .clone()
        .or_else(|| std::env::var_os("AIRLOCK_DATA_DIR").map(PathBuf::from))
        .or_else(|| {
            directories::ProjectDirs::from("", "", "airlock").map(|d| d.data_dir().to_path_buf())
        })
        .unwrap_or_else(|| PathBuf::from(".airlock"))
}

fn project_dir() -> Result<PathBuf, String> {
    std::env::current_dir().map_err(|e| format!("cannot read the current folder: {e}"))
}

fn config_sources(cli: &Cli) -> Result<ConfigSources, String> {
    Ok(ConfigSources::discover(&project_dir()?, cli.config.clone()))
}

fn open_servers(cli: &Cli) -> Result<crate::servers::Servers, String> {
    crate::servers::Servers::open(&data_dir(cli), &project_dir()?).map_err(|e| e.to_string())
}

/// The config files merged with the registry's services.
fn load_config(cli: &Cli) -> Result<Config, String> {
    open_servers(cli)?
        .load_config(&config_sources(cli)?, &process_env)
        .map_err(|e| e.to_string())
}

fn options(cli: &Cli) -> Result<AirlockOptions, String> {
    let mut options = AirlockOptions::new(data_dir(cli));
    let roots = if cli.roots.is_empty() {
        vec![std::env::current_dir().map_err(|e| e.to_string())?]
    } else {
        cli.roots.clone()
    };
    for root in roots {
        let root =
            std::path::absolute(&root).map_err(|e| format!("--root {}: {e}", root.display()))?;
        options.roots.push(root.display().to_string());
    }
    Ok(options)
}

async fn start(cli: &Cli, config: Config, compact: bool) -> Result<Airlock, String> {
    let mut options = options(cli)?;
    if compact {
        options.result_limits.preview = COMPACT_PREVIEW;
    }
    Airlock::start(config, options)
        .await
        .map_err(|e| e.to_string())
}

async fn dispatch(cli: &Cli) -> Result<ExitCode, String> {
    match &cli.command {
        Command::DemoServer => {
            crate::demo::server::serve_stdio()
                .await
                .map_err(|e| format!("demo server: {e}"))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Demo => crate::demo::run_demo(cli).await,
        Command::Plugin { command } => plugin_cmd::run(cli, command).await,
        Command::Servers { command } => servers_cmd::run(cli, command).await,
        Command::Import(args) => import_cmd::run(cli, args).await,
        Command::Tools { search } => {
            let airlock = start(cli, load_config(cli)?, false).await?;
            let tools = match search {
                Some(q) => airlock.search_tools(q),
                None => airlock.tools(),
            };
            let tools: Vec<&crate::catalog::CatalogTool> = tools.iter().collect();
            render::tools(cli.json, &tools, &airlock.status());
            airlock.close().await;
            Ok(ExitCode::SUCCESS)
        }
        Command::Status => {
            let airlock = start(cli, load_config(cli)?, false).await?;
            render::status(cli.json, &airlock.status());
            airlock.close().await;
            Ok(ExitCode::SUCCESS)
        }
        Command::Call {
            tool,
            args,
            timeout,
            compact,
            events,
        } => {
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
                Some(t) if !(t.is_finite() && *t > 0.0) => {
                    return Err(format!(
                        "--timeout must be a positive number of seconds, got {t}"
                    ));
                }
                Some(t) => Some(Duration::from_secs_f64(*t)),
                None => None,
            };
            let airlock = start(cli, load_config(cli)?, *compact).await?;
            let printer = (*events && cli.json).then(|| {
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
            let outcome = airlock.call_with(tool, arguments, options).await;
            if let Some(printer) = printer {
                tokio::time::sleep(Duration::from_millis(20)).await;
                printer.abort();
            }
            airlock.close().await;
            Ok(render::call(cli.json, outcome))
        }
        Command::Resources { service } => {
            let airlock = start(cli, load_config(cli)?, false).await?;
            let outcome = airlock
                .list_resources(&cli.agent, service.as_deref())
                .await
                .map(|r| json!({"resources": r}));
            airlock.close().await;
            Ok(render::value(cli.json, outcome))
        }
        Command::ReadResource { service, uri } => {
            let airlock = start(cli, load_config(cli)?, false).await?;
            let outcome = airlock.read_resource(&cli.agent, service, uri).await;
            airlock.close().await;
            Ok(render::value(cli.json, outcome))
        }
        Command::Prompts { service } => {
            let airlock = start(cli, load_config(cli)?, false).await?;
            let outcome = airlock
                .list_prompts(&cli.agent, service.as_deref())
                .await
                .map(|p| json!({"prompts": p}));
            airlock.close().await;
            Ok(render::value(cli.json, outcome))
        }
        Command::GetPrompt {
            service,
            name,
            args,
        } => {
            let arguments: Value =
                serde_json::from_str(args).map_err(|e| format!("--args is not valid JSON: {e}"))?;
            let airlock = start(cli, load_config(cli)?, false).await?;
            let outcome = airlock
                .get_prompt(&cli.agent, service, name, arguments)
                .await;
            airlock.close().await;
            Ok(render::value(cli.json, outcome))
        }
        Command::Output {
            service,
            output_id,
            offset,
        } => {
            let options = options(cli)?;
            let data =
                cap_std::fs::Dir::open_ambient_dir(&options.data_dir, cap_std::ambient_authority())
                    .map_err(|e| {
                        format!("data directory \"{}\": {e}", options.data_dir.display())
                    })?;
            let store = crate::results::ResultStore::open(&data, options.result_limits)
                .map_err(|e| e.to_string())?;
            match store.read_for(
                &cli.agent,
                service,
                output_id,
                *offset,
                options.result_limits.preview,
            ) {
                Ok(page) => {
                    if cli.json {
                        println!(
                            "{}",
                            serde_json::to_string(&page).expect("a page serializes")
                        );
                    } else {
                        print!("{}", page.text);
                        if let Some(next) = page.next_offset {
                            eprintln!(
                                "\n-- more: airlock output {service} {output_id} --offset {next}"
                            );
                        }
                    }
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) => {
                    let code = match e {
                        crate::results::ReadError::NotOwner { .. } => {
                            ErrorCode::ServiceAccessDenied
                        }
                        _ => ErrorCode::InvalidArguments,
                    };
                    if cli.json {
                        println!(
                            "{}",
                            json!({"ok": false, "error": code, "message": e.to_string()})
                        );
                    } else {
                        eprintln!("airlock: {e}");
                    }
                    Ok(ExitCode::FAILURE)
                }
            }
        }
    }
}
