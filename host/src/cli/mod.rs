//! The `airlock` command line: argument parsing and routing to one module per command
//! group. Every command accepts `--config FILE` (repeatable), `--data-dir DIR` and
//! `--json`.
//!
//! This module owns the argument types ([`Cli`], [`Command`]), [`run`] and the routing;
//! shared set-up is in `common`, the commands themselves in their own modules.
//!
//! Layer 8 (client of the facade). May import anything; nothing imports it.

mod calls;
mod common;
mod grants;
mod import;
mod listings;
pub mod logging;
mod plugin;
mod render;
mod scaffold;
mod secrets;
mod serve;
mod servers;

pub use crate::call_json as render_call_json;
pub use common::data_dir;
pub use plugin::PluginCommand;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::anyhow;
use clap::{Parser, Subcommand};
use serde_json::json;

/// How the binary writes its log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line (`timestamp`, `level`, `target`, `fields`, `span`).
    Json,
}

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
    /// How log records are written to stderr: `text`, or `json` (one object per line,
    /// with the current span's fields). Levels come from $AIRLOCK_LOG.
    #[arg(
        long,
        global = true,
        value_enum,
        env = "AIRLOCK_LOG_FORMAT",
        default_value = "text"
    )]
    pub log_format: LogFormat,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// The async runtime this command runs on: multi-threaded (plugins and blocking
    /// stores hand their worker to another thread while they run), with as many workers
    /// as cores, except for the stdio gateway (`airlock serve` without `--http`), which
    /// gets one. It serves one client whose messages arrive one at a time, and each
    /// message passes through several tasks (the client's transport, the call, the
    /// upstream transport, the reply): on one worker every hand-off is a queue push on
    /// that thread instead of a wake-up of another core's thread. `TOKIO_WORKER_THREADS`
    /// still decides when it is set.
    pub fn runtime(&self) -> std::io::Result<tokio::runtime::Runtime> {
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        builder.enable_all();
        let stdio_gateway = matches!(
            &self.command,
            Command::Serve(args) if args.http.is_none() && args.command.is_none()
        );
        if stdio_gateway && std::env::var_os("TOKIO_WORKER_THREADS").is_none() {
            builder.worker_threads(1);
        }
        builder.build()
    }
}

/// The commands.
// Parsed once per process, so the size of `Servers` does not matter; boxing it would
// change the public type of its field.
#[allow(clippy::large_enum_variant)]
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
        /// Save the whole output into this folder instead of printing a page.
        #[arg(long, value_name = "DIR")]
        save: Option<PathBuf>,
        /// With --save: ordered parts of at most BYTES each, plus an index (at most 512).
        #[arg(long, value_name = "BYTES", requires = "save")]
        part_size: Option<usize>,
    },
    /// Show every configured server's state.
    Status,
    /// Manage servers kept in Airlock's registry (add, list, test, auth…).
    Servers {
        /// What to do.
        #[command(subcommand)]
        command: servers::ServersCommand,
    },
    /// Preview (and with --apply, import) servers defined in other MCP clients.
    Import(import::ImportArgs),
    /// Serve Airlock as one MCP server in front of every service (stdio, or --http).
    Serve(serve::ServeArgs),
    /// Manage which services an agent may use in grants mode.
    Grants {
        /// What to do.
        #[command(subcommand)]
        command: grants::GrantsCommand,
    },
    /// Keep named values in the secret store (for `secret:NAME` settings).
    Secrets {
        /// What to do.
        #[command(subcommand)]
        command: secrets::SecretsCommand,
    },
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

/// Runs the CLI; returns the process exit code.
pub async fn run(cli: Cli) -> ExitCode {
    match dispatch(&cli).await {
        Ok(code) => code,
        Err(e) => {
            let message = error_message(&e);
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

/// An error as the CLI prints it: like `{:#}` (each context, then its cause, joined with
/// ": "), except that a cause already ending the message before it is not repeated.
/// Airlock's error types name their cause in their own message (`registry database:
/// {0}`, `cannot listen on {addr}: {source}`), and a `transparent` variant shows its
/// inner error's message; `{:#}` would print those causes twice.
pub fn error_message(error: &anyhow::Error) -> String {
    let mut message = String::new();
    let mut last = String::new();
    for (i, link) in error.chain().enumerate() {
        let text = link.to_string();
        if i > 0 {
            if last.ends_with(&text) {
                break;
            }
            message.push_str(": ");
        }
        message.push_str(&text);
        last = text;
    }
    message
}

/// Routes a command to the module that runs it.
async fn dispatch(cli: &Cli) -> anyhow::Result<ExitCode> {
    match &cli.command {
        Command::DemoServer => {
            crate::demo::server::serve_stdio()
                .await
                .map_err(|e| anyhow!("demo server: {e}"))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Demo => crate::demo::run_demo(&data_dir(cli), cli.json).await,
        Command::Plugin { command } => plugin::run(cli, command).await,
        Command::Servers { command } => servers::run(cli, command).await,
        Command::Import(args) => import::run(cli, args).await,
        Command::Serve(args) => serve::run(cli, args).await,
        Command::Grants { command } => grants::run(cli, command),
        Command::Secrets { command } => secrets::run(cli, command),
        Command::Tools { search } => listings::tools(cli, search.as_deref()).await,
        Command::Status => listings::status(cli).await,
        Command::Call {
            tool,
            args,
            timeout,
            compact,
            events,
        } => calls::call(cli, tool, args, *timeout, *compact, *events).await,
        Command::Resources { service } => listings::resources(cli, service.as_deref()).await,
        Command::ReadResource { service, uri } => listings::read_resource(cli, service, uri).await,
        Command::Prompts { service } => listings::prompts(cli, service.as_deref()).await,
        Command::GetPrompt {
            service,
            name,
            args,
        } => listings::get_prompt(cli, service, name, args).await,
        Command::Output {
            service,
            output_id,
            offset,
            save: Some(folder),
            part_size,
            ..
        } => {
            let _ = offset;
            calls::save_output(cli, service, output_id, folder, *part_size)
        }
        Command::Output {
            service,
            output_id,
            offset,
            save: None,
            ..
        } => calls::output(cli, service, output_id, *offset),
    }
}

#[cfg(test)]
mod tests {
    use super::error_message;
    use anyhow::Context;

    #[derive(Debug, thiserror::Error)]
    #[error("registry database: {0}")]
    struct Named(#[from] std::io::Error);

    #[derive(Debug, thiserror::Error)]
    #[error("cannot open the store")]
    struct Unnamed(#[source] std::io::Error);

    fn io() -> std::io::Error {
        std::io::Error::other("disk on fire")
    }

    #[test]
    fn contexts_and_causes_are_joined_like_alternate_display() {
        let e = Err::<(), _>(io())
            .context("data directory \"/x\"")
            .unwrap_err();
        assert_eq!(error_message(&e), format!("{e:#}"));
        assert_eq!(error_message(&e), "data directory \"/x\": disk on fire");
        let e = anyhow::Error::from(Unnamed(io())).context("results store");
        assert_eq!(
            error_message(&e),
            "results store: cannot open the store: disk on fire"
        );
    }

    #[test]
    fn a_cause_the_message_already_names_is_not_repeated() {
        let e = anyhow::Error::from(Named(io()));
        assert_eq!(error_message(&e), "registry database: disk on fire");
        let e = e.context("results store");
        assert_eq!(
            error_message(&e),
            "results store: registry database: disk on fire"
        );
        assert_eq!(error_message(&anyhow::anyhow!("plain")), "plain");
    }
}
