//! `airlock secrets set|remove NAME`: named entries in the secret store, for settings
//! that name one as `secret:NAME` (`[results] secret_access_key`). The value is read from
//! standard input, never from the command line, and never printed.

use std::io::Read;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Subcommand;
use serde_json::json;

use super::Cli;
use super::common::data_dir;
use crate::secrets::SecretStore;

/// What `airlock secrets` does.
#[derive(Debug, Subcommand)]
pub enum SecretsCommand {
    /// Store a value (read from standard input; one trailing newline is dropped).
    Set {
        /// The entry's name: 1 to 64 of letters, digits, '_', '-' and '.'.
        name: String,
    },
    /// Remove an entry.
    Remove {
        /// The entry's name.
        name: String,
    },
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
}

/// Runs `airlock secrets`.
pub fn run(cli: &Cli, command: &SecretsCommand) -> anyhow::Result<ExitCode> {
    let (SecretsCommand::Set { name } | SecretsCommand::Remove { name }) = command;
    if !valid_name(name) {
        bail!("invalid secret name {name:?}: use 1 to 64 letters, digits, '_', '-' or '.'");
    }
    let dir = data_dir(cli);
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("data directory \"{}\"", dir.display()))?;
    let store = SecretStore::open(&dir)?;
    let key = format!("secret:{name}");
    let done = match command {
        SecretsCommand::Set { .. } => {
            let mut value = String::new();
            std::io::stdin()
                .read_to_string(&mut value)
                .context("reading the value from standard input")?;
            let value = value
                .strip_suffix('\n')
                .map(|v| v.strip_suffix('\r').unwrap_or(v))
                .unwrap_or(&value);
            if value.is_empty() {
                bail!(
                    "no value on standard input; pipe it in: printf %s \"$VALUE\" | airlock secrets set NAME"
                );
            }
            crate::secrets::validate_secret(name, value)?;
            store.put(&key, value)?;
            true
        }
        SecretsCommand::Remove { .. } => store.delete(&key)?,
    };
    if cli.json {
        println!("{}", json!({"ok": true, "name": name, "changed": done}));
    } else if done {
        println!("{key}");
    } else {
        println!("no secret named \"{name}\"");
    }
    Ok(ExitCode::SUCCESS)
}
