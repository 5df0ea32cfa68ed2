//! `airlock servers add`, `edit`, `remove`, `enable` and `disable`: the commands that
//! change a registry entry, and the drafts and edits built from their arguments.

use std::process::ExitCode;

use serde_json::json;

use super::values::{auth_changes, env_pairs, header_pairs};
use super::{AddArgs, EditArgs, fail, print, scope_arg};
use crate::cli::Cli;
use crate::config::{Auth, Scope};
use crate::config::{ConfigSources, process_env};
use crate::servers::{Draft, DraftTransport, Edit, Servers};

/// Runs `airlock servers add`.
pub(super) fn add(cli: &Cli, servers: &Servers, args: &AddArgs) -> Result<ExitCode, String> {
    let scope = Scope::parse(&args.scope).map_err(|e| e.to_string())?;
    let draft = draft_from_args(args)?;
    let record = servers
        .add(Draft { scope, ..draft }, &process_env)
        .map_err(fail)?;
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
) -> Result<ExitCode, String> {
    let record = servers
        .locate(&args.name, scope_arg(&args.scope)?, sources)
        .map_err(fail)?;
    let edit = edit_from_args(args)?;
    let (next, stale) = servers.edit(&record, edit, &process_env).map_err(fail)?;
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
) -> Result<ExitCode, String> {
    let record = servers
        .locate(name, scope_arg(scope)?, sources)
        .map_err(fail)?;
    servers.remove(&record, &process_env).map_err(fail)?;
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
) -> Result<ExitCode, String> {
    let record = servers
        .locate(name, scope_arg(scope)?, sources)
        .map_err(fail)?;
    servers
        .set_enabled(&record, enable, &process_env)
        .map_err(fail)?;
    let word = if enable { "enabled" } else { "disabled" };
    print(cli, json!({"ok": true, word: record.key}), || {
        println!("Server \"{name}\" {word}.");
        if enable {
            println!("Run `airlock servers test {name}` to offer its tools.");
        }
    });
    Ok(ExitCode::SUCCESS)
}

fn positive(flag: &str, v: Option<f64>) -> Result<Option<f64>, String> {
    match v {
        Some(n) if !(n.is_finite() && n > 0.0) => Err(format!(
            "{flag} must be a positive number of seconds, got {n}"
        )),
        other => Ok(other),
    }
}

fn draft_from_args(args: &AddArgs) -> Result<Draft, String> {
    let transport = match args.transport.as_str() {
        "stdio" => {
            if !args.values.headers.is_empty() || !auth_changes(&args.auth)?.is_empty() {
                return Err("--header and the auth flags apply to --transport http".into());
            }
            let mut line = args.target.clone();
            if line.is_empty() {
                return Err(format!(
                    "server \"{}\": give the command after `--`, e.g. `airlock servers add {} -- npx -y @modelcontextprotocol/server-everything`",
                    args.name, args.name
                ));
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
                return Err("--env applies to stdio servers".into());
            }
            let [url] = args.target.as_slice() else {
                return Err(format!(
                    "server \"{}\": --transport http takes exactly one URL, got {}",
                    args.name,
                    args.target.len()
                ));
            };
            DraftTransport::Http {
                url: url.clone(),
                headers: header_pairs(&args.values.headers, &args.values.secrets)?,
                auth: auth_changes(&args.auth)?
                    .apply(&Auth::None)
                    .map_err(|e| e.to_string())?,
            }
        }
        other => {
            return Err(format!(
                "--transport must be \"stdio\" or \"http\", got \"{other}\""
            ));
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

fn edit_from_args(args: &EditArgs) -> Result<Edit, String> {
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
