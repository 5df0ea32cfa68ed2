//! Set-up shared by the commands: the data directory, config discovery and loading,
//! the registry-backed servers, Airlock options and start-up.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;

use anyhow::Context;

use super::Cli;
use crate::config::{Config, ConfigSources, process_env};
use crate::{Airlock, AirlockOptions, Approval, COMPACT_PREVIEW, RememberArguments, Stores};

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

pub(super) fn project_dir() -> anyhow::Result<PathBuf> {
    std::env::current_dir().context("cannot read the current folder")
}

pub(super) fn config_sources(cli: &Cli) -> anyhow::Result<ConfigSources> {
    Ok(ConfigSources::discover(&project_dir()?, cli.config.clone()))
}

/// Where the registry and retained results live, from the config files alone.
pub(super) fn storage(cli: &Cli) -> anyhow::Result<crate::config::Storage> {
    let storage = crate::config::Storage::load(&config_sources(cli)?, &process_env)?;
    crate::secrets::register_log_secrets(&storage.known_secrets());
    Ok(storage)
}

pub(super) fn open_servers(cli: &Cli) -> anyhow::Result<crate::servers::Servers> {
    open_servers_for(cli, &project_dir()?)
}

/// The registry-backed servers, for commands run in `project`.
pub(super) fn open_servers_for(
    cli: &Cli,
    project: &std::path::Path,
) -> anyhow::Result<crate::servers::Servers> {
    Ok(crate::servers::Servers::open_at(
        &data_dir(cli),
        project,
        &storage(cli)?.registry,
    )?)
}

/// The registry and results store the config names, opened when first used (for
/// `airlock output`, `airlock grants` and `airlock serve tokens`).
pub(super) fn open_stores(cli: &Cli) -> anyhow::Result<Stores> {
    // Only the data directory and the default limits: no roots, no plugin cache.
    let options = AirlockOptions::new(data_dir(cli));
    Ok(Stores::new(
        &options.data_dir,
        storage(cli)?,
        options.result_limits,
    )?)
}

/// The config files merged with the registry's services.
pub(super) fn load_config(cli: &Cli) -> anyhow::Result<Config> {
    Ok(open_servers(cli)?.load_config(&config_sources(cli)?, &process_env)?)
}

pub(super) fn options(cli: &Cli) -> anyhow::Result<AirlockOptions> {
    let mut options = AirlockOptions::new(data_dir(cli));
    options.plugin_cache = std::env::var_os("AIRLOCK_PLUGIN_CACHE").map(PathBuf::from);
    let roots = if cli.roots.is_empty() {
        vec![std::env::current_dir()?]
    } else {
        cli.roots.clone()
    };
    for root in roots {
        let root =
            std::path::absolute(&root).with_context(|| format!("--root {}", root.display()))?;
        options.roots.push(root.display().to_string());
    }
    Ok(options)
}

pub(super) async fn start(cli: &Cli, config: Config, compact: bool) -> anyhow::Result<Airlock> {
    let mut options = options(cli)?;
    if compact {
        options.result_limits.preview = COMPACT_PREVIEW;
    }
    // A policy's question becomes a prompt when a person is at the terminal; otherwise
    // the call is denied with the question in the message.
    if std::io::stdin().is_terminal() {
        options.approver = Some(std::sync::Arc::new(prompt));
    }
    Ok(Airlock::start(config, options).await?)
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
