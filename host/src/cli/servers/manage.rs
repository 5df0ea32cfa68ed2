//! `airlock servers add`, `edit`, `remove`, `enable` and `disable`: the commands that
//! change a registry entry, and the drafts and edits built from their arguments.

use std::process::ExitCode;

use anyhow::bail;
use serde_json::json;

use super::values::{auth_changes, env_pairs, header_pairs};
use super::{AddArgs, EditArgs, print, scope_arg};
use crate::cli::Cli;
use crate::config::{Auth, Scope};
use crate::config::{ConfigSources, process_env};
use crate::servers::{Draft, DraftTransport, Edit, Servers};

/// Runs `airlock servers add`.
pub(super) fn add(cli: &Cli, servers: &Servers, args: &AddArgs) -> anyhow::Result<ExitCode> {
    let scope = Scope::parse(&args.scope)?;
    let draft = draft_from_args(args)?;
    let record = servers.add(Draft { scope, ..draft }, &process_env)?;
    print(cli, json!({"ok": true, "added": record.key}), || {
        println!(
            "Added server \"{}\" ({} scope). Run `airlock servers test {}` to offer its tools.",
            record.key.name, record.key.scope, record.key.name
        )
    });
    Ok(ExitCode::SUCCESS)
}

/// Runs `airlock servers edit`.
pub(super) fn edit(
    cli: &Cli,
    servers: &Servers,
    sources: &ConfigSources,
    args: &EditArgs,
) -> anyhow::Result<ExitCode> {
    let record = servers.locate(&args.name, scope_arg(&args.scope)?, sources)?;
    let edit = edit_from_args(args)?;
    let (next, stale) = servers.edit(&record, edit, &process_env)?;
    print(
        cli,
        json!({"ok": true, "edited": next.key, "catalog_stale": stale}),
        || {
            println!("Changed server \"{}\".", next.key.name);
            if stale {
                println!(
                    "Its launch changed: run `airlock servers test {}` to offer its tools again.",
                    next.key.name
                );
            }
        },
    );
    Ok(ExitCode::SUCCESS)
}

/// Runs `airlock servers remove`.
pub(super) fn remove(
    cli: &Cli,
    servers: &Servers,
    sources: &ConfigSources,
    name: &str,
    scope: &Option<String>,
) -> anyhow::Result<ExitCode> {
    let record = servers.locate(name, scope_arg(scope)?, sources)?;
    servers.remove(&record, &process_env)?;
    print(cli, json!({"ok": true, "removed": record.key}), || {
        println!("Removed server \"{name}\" ({} scope).", record.key.scope)
    });
    Ok(ExitCode::SUCCESS)
}

/// Runs `airlock servers enable` (`enable` true) or `disable`.
pub(super) fn set_enabled(
    cli: &Cli,
    servers: &Servers,
    sources: &ConfigSources,
    name: &str,
    scope: &Option<String>,
    enable: bool,
) -> anyhow::Result<ExitCode> {
    let record = servers.locate(name, scope_arg(scope)?, sources)?;
    servers.set_enabled(&record, enable, &process_env)?;
    let word = if enable { "enabled" } else { "disabled" };
    print(cli, json!({"ok": true, word: record.key}), || {
        println!("Server \"{name}\" {word}.");
        if enable {
            println!("Run `airlock servers test {name}` to offer its tools.");
        }
    });
    Ok(ExitCode::SUCCESS)
}

fn positive(flag: &str, v: Option<f64>) -> anyhow::Result<Option<f64>> {
    match v {
        Some(n) if !(n.is_finite() && n > 0.0) => {
            bail!("{flag} must be a positive number of seconds, got {n}")
        }
        other => Ok(other),
    }
}

fn draft_from_args(args: &AddArgs) -> anyhow::Result<Draft> {
    let transport = match args.transport.as_str() {
        "stdio" => {
            if !args.values.headers.is_empty() || !auth_changes(&args.auth)?.is_empty() {
                bail!("--header and the auth flags apply to --transport http");
            }
            let mut line = args.target.clone();
            if line.is_empty() {
                bail!(
                    "server \"{}\": give the command after `--`, e.g. `airlock servers add {} -- npx -y @modelcontextprotocol/server-everything`",
                    args.name,
                    args.name
                );
            }
            let command = line.remove(0);
            DraftTransport::Stdio {
                command,
                args: line,
                env: env_pairs(&args.values.env, &args.values.secrets)?,
            }
        }
        "http" => {
            if !args.values.env.is_empty() {
                bail!("--env applies to stdio servers");
            }
            let [url] = args.target.as_slice() else {
                bail!(
                    "server \"{}\": --transport http takes exactly one URL, got {}",
                    args.name,
                    args.target.len()
                );
            };
            DraftTransport::Http {
                url: url.clone(),
                headers: header_pairs(&args.values.headers, &args.values.secrets)?,
                auth: auth_changes(&args.auth)?.apply(&Auth::None)?,
            }
        }
        other => {
            bail!("--transport must be \"stdio\" or \"http\", got \"{other}\"");
        }
    };
    Ok(Draft {
        name: args.name.clone(),
        scope: Scope::User,
        label: args.label.clone(),
        description: args.description.clone(),
        transport,
        cwd: args.cwd.as_ref().map(|c| c.display().to_string()),
        enabled: !args.disabled,
        startup_timeout_secs: positive("--startup-timeout", args.startup_timeout)?,
        tool_timeout_secs: positive("--tool-timeout", args.tool_timeout)?,
        repair: Vec::new(),
        origin: "airlock servers add".into(),
    })
}

fn edit_from_args(args: &EditArgs) -> anyhow::Result<Edit> {
    Ok(Edit {
        label: args.label.clone(),
        description: args.description.clone(),
        command: (!args.command.is_empty()).then(|| args.command.clone()),
        url: args.url.clone(),
        auth: auth_changes(&args.auth)?,
        cwd: args.cwd.clone(),
        env: env_pairs(&args.values.env, &args.values.secrets)?,
        headers: header_pairs(&args.values.headers, &args.values.secrets)?,
        unset: args.unset.clone(),
        tool_timeout_secs: positive("--tool-timeout", args.tool_timeout)?,
        startup_timeout_secs: positive("--startup-timeout", args.startup_timeout)?,
        clear_repair: args.repaired,
    })
}
