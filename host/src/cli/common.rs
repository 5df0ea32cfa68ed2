//! Set-up shared by the commands: the data directory, config discovery and loading,
//! the registry-backed servers, Airlock options and start-up.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;

use super::Cli;
use crate::config::{Config, ConfigSources, process_env};
use crate::results::COMPACT_PREVIEW;
use crate::{Airlock, AirlockOptions, Approval, RememberArguments};

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

pub(super) fn project_dir() -> Result<PathBuf, String> {
    std::env::current_dir().map_err(|e| format!("cannot read the current folder: {e}"))
}

pub(super) fn config_sources(cli: &Cli) -> Result<ConfigSources, String> {
    Ok(ConfigSources::discover(&project_dir()?, cli.config.clone()))
}

/// Where the registry and retained results live, from the config files alone.
pub(super) fn storage(cli: &Cli) -> Result<crate::config::Storage, String> {
    let storage = crate::config::Storage::load(&config_sources(cli)?, &process_env)
        .map_err(|e| e.to_string())?;
    crate::secrets::register_log_secrets(&storage.known_secrets());
    Ok(storage)
}

pub(super) fn open_servers(cli: &Cli) -> Result<crate::servers::Servers, String> {
    open_servers_for(cli, &project_dir()?)
}

/// The registry-backed servers, for commands run in `project`.
pub(super) fn open_servers_for(
    cli: &Cli,
    project: &std::path::Path,
) -> Result<crate::servers::Servers, String> {
    crate::servers::Servers::open_at(&data_dir(cli), project, &storage(cli)?.registry)
        .map_err(|e| e.to_string())
}

/// The registry the config names.
pub(super) fn open_registry(cli: &Cli) -> Result<crate::registry::Registry, String> {
    let dir = data_dir(cli);
    std::fs::create_dir_all(&dir)
        .map_err(|e| format!("data directory \"{}\": {e}", dir.display()))?;
    crate::registry::Registry::open_at(&dir, &storage(cli)?.registry).map_err(|e| e.to_string())
}

/// The results store the config names (for `airlock output`).
pub(super) fn open_results(cli: &Cli) -> Result<crate::results::ResultStore, String> {
    let options = options(cli)?;
    std::fs::create_dir_all(&options.data_dir)
        .map_err(|e| format!("data directory \"{}\": {e}", options.data_dir.display()))?;
    let storage = storage(cli)?;
    let secret_key = match &storage.results {
        crate::config::ResultsLocation::S3(s3) => {
            let store =
                crate::secrets::SecretStore::open(&options.data_dir).map_err(|e| e.to_string())?;
            crate::airlock::resolve_secret(
                &store,
                "results.secret_access_key",
                s3.secret_access_key.as_deref(),
            )?
        }
        crate::config::ResultsLocation::Local => None,
    };
    crate::results::ResultStore::open_at(
        &options.data_dir,
        &storage.results,
        secret_key,
        options.result_limits,
        None,
    )
    .map_err(|e| format!("results store: {e}"))
}

/// The config files merged with the registry's services.
pub(super) fn load_config(cli: &Cli) -> Result<Config, String> {
    open_servers(cli)?
        .load_config(&config_sources(cli)?, &process_env)
        .map_err(|e| e.to_string())
}

pub(super) fn options(cli: &Cli) -> Result<AirlockOptions, String> {
    let mut options = AirlockOptions::new(data_dir(cli));
    options.plugin_cache = std::env::var_os("AIRLOCK_PLUGIN_CACHE").map(PathBuf::from);
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

pub(super) async fn start(cli: &Cli, config: Config, compact: bool) -> Result<Airlock, String> {
    let mut options = options(cli)?;
    if compact {
        options.result_limits.preview = COMPACT_PREVIEW;
    }
    // A policy's question becomes a prompt when a person is at the terminal; otherwise
    // the call is denied with the question in the message.
    if std::io::stdin().is_terminal() {
        options.approver = Some(std::sync::Arc::new(prompt));
    }
    Airlock::start(config, options)
        .await
        .map_err(|e| e.to_string())
}

/// Asks the person at the terminal (on stderr, reading stdin) whether a call may run,
/// and whether to remember the answer (`airlock grants list` shows what is remembered).
fn prompt(request: &crate::ApprovalRequest) -> Approval {
    let mut err = std::io::stderr().lock();
    let _ = write!(
        err,
        "\n{}\n  tool {} on service {} (policy {}, rule {})\n\
         Allow this call? [y]es once, [a]lways with these arguments, \
         always for this [t]ool, [N]o: ",
        request.question, request.raw_tool, request.service, request.plugin, request.rule
    );
    let _ = err.flush();
    let mut answer = String::new();
    if std::io::stdin().lock().read_line(&mut answer).is_err() {
        return Approval::Decline;
    }
    let remember = |arguments| Approval::Remember {
        arguments,
        expires_in: None,
    };
    match answer.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Approval::Once,
        "a" | "always" => remember(RememberArguments::Same),
        "t" | "tool" => remember(RememberArguments::Any),
        _ => Approval::Decline,
    }
}
