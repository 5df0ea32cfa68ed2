//! `airlock serve`: the gateway, over stdio (the default) or streamable HTTP
//! (`--http ADDR`), and `airlock serve tokens add|list|remove` for its bearer tokens.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail};
use clap::{Args, Subcommand, ValueEnum};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::Cli;
use super::common::{config_sources, data_dir, open_servers, options};
use crate::config::{Config, process_env};
use crate::gateway::tokens::TokenBook;
use crate::gateway::{HttpOptions, ServeOptions, ToolSurface};
use crate::{AccessMode, Airlock};
use crate::{COMPACT_PREVIEW, DEFAULT_PREVIEW};

/// Which tools clients see.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ToolsArg {
    /// Every tool of every service, plus Airlock's own.
    All,
    /// Only airlock_search_tools, airlock_describe_tool, airlock_call_tool and
    /// airlock_output.
    Meta,
}

/// Who may use which service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AccessArg {
    /// Every agent may use every enabled service.
    Open,
    /// An agent sees and calls only the services granted to it (`airlock grants`).
    Grants,
}

/// `airlock serve` arguments.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Serve streamable HTTP at ADDR (endpoint /mcp) instead of stdio; loopback only
    /// unless --allow-remote.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<SocketAddr>,
    /// Allow a non-loopback --http address (bearer tokens are then required).
    #[arg(long)]
    pub allow_remote: bool,
    /// Require a bearer token on loopback too (for /mcp and the /console login).
    #[arg(long)]
    pub require_token: bool,
    /// The gateway's base URL as browsers reach it (https://airlock.example.com): an
    /// agent signing in to a per-agent service comes back to URL/oauth/callback.
    /// Default: the --http address on loopback, else the origin of [serve.auth] audience.
    #[arg(long, value_name = "URL", value_parser = public_url)]
    pub public_url: Option<String>,
    /// Host names accepted in Host and Origin headers when serving remotely. Repeatable.
    #[arg(long = "allowed-host", value_name = "HOST")]
    pub allowed_hosts: Vec<String>,
    /// Which tools clients see.
    #[arg(long, value_enum, default_value = "all")]
    pub tools: ToolsArg,
    /// Use the compact preview (4 KiB) instead of 48 KiB.
    #[arg(long)]
    pub compact: bool,
    /// Who may use which service.
    #[arg(long, value_enum, default_value = "open")]
    pub access: AccessArg,
    /// Most HTTP sessions at once.
    #[arg(long, default_value_t = 64)]
    pub max_sessions: usize,
    /// Seconds an idle HTTP session is kept.
    #[arg(long, default_value_t = 1800)]
    pub session_idle_secs: u64,
    /// Seconds between looks at the config files and the registry's change counters
    /// for servers added, removed, edited or tested, grants and run-time disables made
    /// elsewhere while serving (clients then get `list_changed`); 0 turns it off.
    /// SIGHUP reloads at once.
    #[arg(long, default_value_t = 0.5, value_parser = reload_secs)]
    pub reload_secs: f64,
    /// Manage the gateway's bearer tokens instead of serving.
    #[command(subcommand)]
    pub command: Option<ServeCommand>,
}

/// `airlock serve tokens …`
#[derive(Debug, Subcommand)]
pub enum ServeCommand {
    /// Bearer tokens for `airlock serve --http`; each names an agent.
    Tokens {
        /// What to do.
        #[command(subcommand)]
        command: TokensCommand,
    },
}

/// `airlock serve tokens add|list|remove`
#[derive(Debug, Subcommand)]
pub enum TokensCommand {
    /// Make a token for the agent named by --agent; it is printed once.
    Add,
    /// List the tokens (never their values).
    List,
    /// Remove a token by id, or every token of --agent.
    Remove {
        /// The token's id (from `list`); omit it to remove every token of --agent.
        id: Option<String>,
    },
}

/// Runs `airlock serve`.
pub async fn run(cli: &Cli, args: &ServeArgs) -> anyhow::Result<ExitCode> {
    if let Some(ServeCommand::Tokens { command }) = &args.command {
        return tokens(cli, command);
    }
    let mut airlock_options = options(cli)?;
    let preview = if args.compact {
        COMPACT_PREVIEW
    } else {
        DEFAULT_PREVIEW
    };
    airlock_options.result_limits.preview = preview;
    if args.access == AccessArg::Grants {
        airlock_options.access.mode = AccessMode::Grants;
    }
    let serve = ServeOptions {
        agent: cli.agent.clone(),
        tools: match args.tools {
            ToolsArg::All => ToolSurface::All,
            ToolsArg::Meta => ToolSurface::Meta,
        },
        preview,
    };
    // Refuse a remote bind before anything starts.
    if let Some(addr) = args.http
        && !addr.ip().is_loopback()
        && !args.allow_remote
    {
        return Err(crate::gateway::HttpError::RemoteNotAllowed(addr).into());
    }
    let servers = Arc::new(open_servers(cli)?);
    let sources = config_sources(cli)?;
    let config = servers.load_config(&sources, &process_env)?;
    let airlock = Airlock::start(config, airlock_options).await?;
    let shutdown = CancellationToken::new();
    tokio::spawn(stop_on_signal(shutdown.clone()));
    tokio::spawn(reindex_results(airlock.clone(), shutdown.clone()));
    {
        // With looks off (0), SIGHUP still reloads.
        let every = (args.reload_secs > 0.0).then(|| Duration::from_secs_f64(args.reload_secs));
        let files = sources.files();
        let load = move || servers.load_config(&sources, &process_env);
        tokio::spawn(follow_changes(
            airlock.clone(),
            load,
            files,
            every,
            shutdown.clone(),
        ));
    }
    match args.http {
        None => crate::gateway::serve_stdio(airlock, serve, shutdown).await?,
        Some(addr) => {
            let mut http = HttpOptions::new(addr);
            http.allow_remote = args.allow_remote;
            http.require_token = args.require_token;
            http.allowed_hosts = args.allowed_hosts.clone();
            http.public_url = args.public_url.clone();
            http.max_sessions = args.max_sessions;
            http.session_idle = Duration::from_secs(args.session_idle_secs.max(1));
            http.auth = crate::config::load_serve_auth(&config_sources(cli)?, &process_env)?;
            let (bound, at) = tokio::sync::oneshot::channel();
            tokio::spawn(async move {
                if let Ok(at) = at.await {
                    eprintln!("airlock serve: listening on http://{at}/mcp");
                    eprintln!("airlock serve: operator console at http://{at}/console");
                }
            });
            crate::gateway::serve_http(airlock, serve, http, &data_dir(cli), shutdown, Some(bound))
                .await?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `--public-url`: an absolute http(s) URL without a query or fragment.
fn public_url(given: &str) -> anyhow::Result<String> {
    let url = reqwest::Url::parse(given)
        .map_err(|e| anyhow::anyhow!("\"{given}\" is not a URL ({e}); give the gateway's base URL, like https://airlock.example.com"))?;
    if !matches!(url.scheme(), "http" | "https")
        || url.query().is_some()
        || url.fragment().is_some()
    {
        bail!(
            "\"{given}\" must be an http or https URL without a query or fragment, like https://airlock.example.com"
        );
    }
    Ok(given.trim_end_matches('/').to_string())
}

/// `--reload-secs`: a finite, non-negative number of seconds.
fn reload_secs(given: &str) -> anyhow::Result<f64> {
    match given.parse::<f64>() {
        Ok(secs) if secs.is_finite() && secs >= 0.0 => Ok(secs),
        _ => bail!("\"{given}\" is not a number of seconds (0 or more; 0 turns reloading off)"),
    }
}

/// Takes in what changes while serving, until `shutdown`: every `every` (never when
/// `None`: SIGHUP only), the registry's
/// change counters are read ([`Airlock::take_in_changes`]: grants and run-time disables
/// made elsewhere apply at once) and the config files' sizes and times looked at. When
/// service definitions moved, a file changed, or SIGHUP arrived, the config is loaded
/// again (files and registry, on a blocking thread) and the running services reconciled
/// with it. A load that fails (a file mid-edit, the registry unreachable) keeps the
/// running services and is tried again each look; each distinct reason is logged once.
async fn follow_changes<F>(
    airlock: Airlock,
    load: F,
    files: Vec<std::path::PathBuf>,
    every: Option<Duration>,
    shutdown: CancellationToken,
) where
    F: Fn() -> Result<Config, crate::servers::ServersError> + Send + Sync + 'static,
{
    use tokio::signal::unix::{SignalKind, signal};
    let load = Arc::new(load);
    let mut hangup = signal(SignalKind::hangup()).ok();
    let mut stamps = file_stamps(&files).await;
    let mut last_error: Option<String> = None;
    let mut watch_error: Option<String> = None;
    // The first look records where the registry stands.
    let _ = airlock.take_in_changes().await;
    loop {
        let hung_up = async {
            match hangup.as_mut() {
                Some(hangup) => hangup.recv().await,
                None => std::future::pending().await,
            }
        };
        let tick = async {
            match every {
                Some(every) => tokio::time::sleep(every).await,
                None => std::future::pending().await,
            }
        };
        let forced = tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick => false,
            _ = hung_up => {
                tracing::info!("SIGHUP: loading the config again");
                true
            }
        };
        let moved = match airlock.take_in_changes().await {
            Ok(moved) => {
                watch_error = None;
                moved
            }
            Err(e) => {
                if watch_error.as_deref() != Some(e.message.as_str()) {
                    tracing::warn!("cannot read the registry's changes: {}", e.message);
                    watch_error = Some(e.message);
                }
                false
            }
        };
        let now = file_stamps(&files).await;
        let edited = now != stamps;
        if !(forced || moved || edited || last_error.is_some()) {
            continue;
        }
        let loading = load.clone();
        let loaded = match tokio::task::spawn_blocking(move || loading()).await {
            Ok(loaded) => loaded.map_err(anyhow::Error::from),
            Err(e) => Err(anyhow!("loading the config panicked: {e}")),
        };
        match loaded {
            Ok(config) => {
                stamps = now;
                if last_error.take().is_some() {
                    tracing::info!("the config loads again; reloading services");
                }
                airlock.services().reconcile(&config.servers).await;
            }
            Err(e) => {
                let reason = super::error_message(&e);
                if last_error.as_deref() != Some(reason.as_str()) {
                    tracing::warn!("cannot reload services (the running ones stay): {reason}");
                    last_error = Some(reason);
                }
            }
        }
    }
}

/// Each file's size and modification time (`None` while it does not exist).
async fn file_stamps(files: &[std::path::PathBuf]) -> Vec<Option<(u64, std::time::SystemTime)>> {
    let mut stamps = Vec::with_capacity(files.len());
    for file in files {
        stamps.push(
            tokio::fs::metadata(file)
                .await
                .ok()
                .map(|m| (m.len(), m.modified().unwrap_or(std::time::UNIX_EPOCH))),
        );
    }
    stamps
}

/// How often a serving gateway mends the results index against the store.
const REINDEX_EVERY: Duration = Duration::from_secs(6 * 3600);

/// Mends the results index against the store at start-up and every
/// [`REINDEX_EVERY`] ([`Airlock::reindex_results`]), until `shutdown`; what it mended
/// is logged.
async fn reindex_results(airlock: Airlock, shutdown: CancellationToken) {
    loop {
        match airlock.outputs().reindex().await {
            Ok(done) if done.added + done.removed + done.unattributed + done.unreadable > 0 => {
                tracing::info!(
                    stored = done.stored,
                    indexed = done.indexed,
                    added = done.added,
                    removed = done.removed,
                    unattributed = done.unattributed,
                    unreadable = done.unreadable,
                    "results index mended against the store"
                );
            }
            Ok(_) => {}
            Err(e) => tracing::warn!("cannot mend the results index: {}", e.message),
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(REINDEX_EVERY) => {}
        }
    }
}

/// Cancels `shutdown` on SIGTERM or SIGINT.
async fn stop_on_signal(shutdown: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    tracing::info!("airlock serve: stopping; closing every upstream session");
    shutdown.cancel();
}

fn tokens(cli: &Cli, command: &TokensCommand) -> anyhow::Result<ExitCode> {
    let book = TokenBook::open(&super::common::open_stores(cli)?)?;
    match command {
        TokensCommand::Add => {
            let (id, value) = book.add(&cli.agent)?;
            if cli.json {
                println!("{}", json!({"id": id, "agent": cli.agent, "token": value}));
            } else {
                println!("{value}");
                eprintln!(
                    "token {id} for agent \"{}\"; it is shown only now. Clients send it as `Authorization: Bearer TOKEN`.",
                    cli.agent
                );
            }
        }
        TokensCommand::List => {
            let list = book.list()?;
            if cli.json {
                println!("{}", json!({ "tokens": list }));
            } else if list.is_empty() {
                println!("(no tokens; make one with `airlock serve tokens add --agent NAME`)");
            } else {
                for t in list {
                    println!("{}  agent {}  created {}", t.id, t.agent, t.created_at);
                }
            }
        }
        TokensCommand::Remove { id: Some(id) } => {
            let removed = book.remove(id)?;
            if cli.json {
                println!("{}", json!({ "removed": [removed] }));
            } else {
                println!(
                    "removed token {} of agent \"{}\"",
                    removed.id, removed.agent
                );
            }
        }
        TokensCommand::Remove { id: None } => {
            let count = book.remove_agent(&cli.agent)?;
            if cli.json {
                println!("{}", json!({"agent": cli.agent, "removed": count}));
            } else {
                println!("removed {count} token(s) of agent \"{}\"", cli.agent);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
