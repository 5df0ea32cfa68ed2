//! `airlock servers …`: add, edit, list, get, remove, enable, disable, test, auth, logout.
//!
//! This module owns the subcommand and argument types and routes each subcommand to the
//! module that runs it: `manage` (add, edit, remove, enable, disable), `show` (list,
//! get), `verify` (test), `auth` (auth, logout); `values` parses env and header pairs.

mod auth;
mod manage;
mod show;
mod values;
mod verify;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;

use super::Cli;
use super::common::{config_sources, open_servers};
use crate::config::Scope;

/// `airlock servers …`
#[derive(Debug, Subcommand)]
pub enum ServersCommand {
    /// Add a server: `add NAME [options] -- COMMAND ARGS…` or
    /// `add NAME --transport http URL [--header "K: V"]…`.
    Add(AddArgs),
    /// Change a server added with `airlock servers` (a blank secret value keeps the
    /// stored one).
    Edit(EditArgs),
    /// List every server with its source and catalog state.
    List,
    /// Show one server's definition (secrets masked) and tested catalog.
    Get {
        /// The server.
        name: String,
        /// user or project (needed when the name exists in both).
        #[arg(long)]
        scope: Option<String>,
    },
    /// Remove a server, its tested catalog and its secrets.
    Remove {
        /// The server.
        name: String,
        /// user or project (needed when the name exists in both).
        #[arg(long)]
        scope: Option<String>,
    },
    /// Enable a server (test it again to offer its tools).
    Enable {
        /// The server.
        name: String,
        /// user or project (needed when the name exists in both).
        #[arg(long)]
        scope: Option<String>,
    },
    /// Disable a server (its tested catalog becomes stale).
    Disable {
        /// The server.
        name: String,
        /// user or project (needed when the name exists in both).
        #[arg(long)]
        scope: Option<String>,
    },
    /// Connect, negotiate, list and save the tools (running none), and close.
    Test {
        /// The server.
        name: String,
    },
    /// Authorize Airlock with an OAuth server (opens a browser; $AIRLOCK_BROWSER
    /// overrides which program).
    Auth {
        /// The server (an http server with auth = "oauth").
        name: String,
        /// How long to wait for the browser to come back, in seconds.
        #[arg(long, default_value_t = 300)]
        wait: u64,
    },
    /// Forget a server's OAuth tokens.
    Logout {
        /// The server.
        name: String,
    },
}

/// `airlock servers add` arguments.
#[derive(Debug, clap::Args)]
pub struct AddArgs {
    /// The server's name (letters, digits, '_' and '-').
    pub name: String,
    /// For stdio: `-- COMMAND ARGS…` (everything after `--` is kept verbatim); for http:
    /// the URL.
    pub target: Vec<String>,
    /// user (every folder) or project (this folder only).
    #[arg(long, default_value = "user")]
    pub scope: String,
    /// stdio or http.
    #[arg(long, default_value = "stdio")]
    pub transport: String,
    /// Env vars, headers and which are secret.
    #[command(flatten)]
    pub values: ValueArgs,
    /// Working directory (absolute).
    #[arg(long)]
    pub cwd: Option<PathBuf>,
    /// A human label.
    #[arg(long)]
    pub label: Option<String>,
    /// A description for agents.
    #[arg(long)]
    pub description: Option<String>,
    /// How the server authenticates Airlock (http).
    #[command(flatten)]
    pub auth: AuthArgs,
    /// Per-call timeout in seconds.
    #[arg(long)]
    pub tool_timeout: Option<f64>,
    /// Connection + handshake timeout in seconds.
    #[arg(long)]
    pub startup_timeout: Option<f64>,
    /// Add it disabled.
    #[arg(long)]
    pub disabled: bool,
}

/// Env vars and headers given on the command line, shared by `add` and `edit`.
#[derive(Debug, clap::Args)]
pub struct ValueArgs {
    /// An environment variable, `K=V` (or `K` to take the value from this environment).
    /// Credential-like names are stored as secrets. Repeatable.
    #[arg(long = "env", value_name = "K=V")]
    pub env: Vec<String>,
    /// A header, `"Name: value"` (http). Credential-like names are secrets. Repeatable.
    #[arg(long = "header", value_name = "NAME: VALUE")]
    pub headers: Vec<String>,
    /// Also treat this env var or header as secret. Repeatable.
    #[arg(long = "secret", value_name = "NAME")]
    pub secrets: Vec<String>,
}

/// Auth flags (http servers), shared by `add` and `edit`. Secret values never go on the
/// command line: the client secret is read from an environment variable and the private
/// key from a file, then kept in the secret store.
#[derive(Debug, clap::Args)]
pub struct AuthArgs {
    /// `oauth` (authorization code, `airlock servers auth NAME`), `client_credentials`
    /// (machine to machine, no browser) or `none`.
    #[arg(long, value_name = "KIND")]
    pub auth: Option<String>,
    /// A pre-registered client's id (oauth), or the client-credentials client's id.
    #[arg(long, value_name = "ID")]
    pub client_id: Option<String>,
    /// Read the client secret from this environment variable.
    #[arg(long, value_name = "VAR")]
    pub client_secret_env: Option<String>,
    /// Read a PEM private key (RSA or EC P-256) for private-key JWT client credentials.
    #[arg(long, value_name = "PATH")]
    pub private_key_file: Option<PathBuf>,
    /// The https:// URL of this client's metadata document (oauth, CIMD).
    #[arg(long, value_name = "URL")]
    pub client_metadata_url: Option<String>,
    /// A scope to ask for instead of the server's suggestion. Repeatable; "" clears.
    #[arg(long = "auth-scope", value_name = "SCOPE")]
    pub scopes: Vec<String>,
}

/// `airlock servers edit` arguments.
#[derive(Debug, clap::Args)]
pub struct EditArgs {
    /// The server.
    pub name: String,
    /// A new command line for a stdio server: `-- COMMAND ARGS…`.
    pub command: Vec<String>,
    /// user or project (needed when the name exists in both).
    #[arg(long)]
    pub scope: Option<String>,
    /// Env vars and headers to set (for a secret, a blank value keeps the stored one).
    #[command(flatten)]
    pub values: ValueArgs,
    /// Remove an env var or header. Repeatable.
    #[arg(long = "unset", value_name = "NAME")]
    pub unset: Vec<String>,
    /// A new URL (http).
    #[arg(long)]
    pub url: Option<String>,
    /// How the server authenticates Airlock (http).
    #[command(flatten)]
    pub auth: AuthArgs,
    /// A new working directory ("" clears it).
    #[arg(long)]
    pub cwd: Option<String>,
    /// A new label ("" clears it).
    #[arg(long)]
    pub label: Option<String>,
    /// A new description ("" clears it).
    #[arg(long)]
    pub description: Option<String>,
    /// A new per-call timeout in seconds.
    #[arg(long)]
    pub tool_timeout: Option<f64>,
    /// A new startup timeout in seconds.
    #[arg(long)]
    pub startup_timeout: Option<f64>,
    /// Mark the server repaired (clears the reasons an import gave).
    #[arg(long)]
    pub repaired: bool,
}

fn scope_arg(scope: &Option<String>) -> anyhow::Result<Option<Scope>> {
    Ok(scope.as_deref().map(Scope::parse).transpose()?)
}

fn print(cli: &Cli, value: serde_json::Value, text: impl FnOnce()) {
    if cli.json {
        println!("{value}");
    } else {
        text();
    }
}

/// Runs one `airlock servers` command.
pub async fn run(cli: &Cli, command: &ServersCommand) -> anyhow::Result<ExitCode> {
    let servers = open_servers(cli)?;
    let sources = config_sources(cli)?;
    match command {
        ServersCommand::Add(args) => manage::add(cli, &servers, args),
        ServersCommand::Edit(args) => manage::edit(cli, &servers, &sources, args),
        ServersCommand::List => show::list(cli, &servers, &sources),
        ServersCommand::Get { name, scope } => show::get(cli, &servers, &sources, name, scope),
        ServersCommand::Remove { name, scope } => {
            manage::remove(cli, &servers, &sources, name, scope)
        }
        ServersCommand::Enable { name, scope } => {
            manage::set_enabled(cli, &servers, &sources, name, scope, true)
        }
        ServersCommand::Disable { name, scope } => {
            manage::set_enabled(cli, &servers, &sources, name, scope, false)
        }
        ServersCommand::Test { name } => verify::test(cli, &servers, &sources, name).await,
        ServersCommand::Auth { name, wait } => {
            auth::auth(cli, &servers, &sources, name, *wait).await
        }
        ServersCommand::Logout { name } => auth::logout(cli, &servers, &sources, name),
    }
}
