//! `airlock servers …`: add, edit, list, get, remove, enable, disable, test, auth, logout.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Subcommand;
use serde_json::json;

use super::{Cli, config_sources, open_servers, options};
use crate::config::{ServerConfig, TransportConfig, process_env};
use crate::registry::{Scope, ServiceRecord, StoredTransport, StoredValue};
use crate::servers::{Draft, DraftTransport, Edit, GivenValue, parse_env_arg, parse_header_arg};

/// The mask shown instead of a secret value.
pub const MASK: &str = "••••••";

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
    /// `oauth` for servers that need OAuth authorization (http).
    #[arg(long)]
    pub auth: Option<String>,
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
    /// `oauth` to turn OAuth on, `none` to turn it off (http).
    #[arg(long)]
    pub auth: Option<String>,
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

fn scope_arg(scope: &Option<String>) -> Result<Option<Scope>, String> {
    scope.as_deref().map(Scope::parse).transpose()
}

fn print(cli: &Cli, value: serde_json::Value, text: impl FnOnce()) {
    if cli.json {
        println!("{value}");
    } else {
        text();
    }
}

/// Runs one `airlock servers` command.
pub async fn run(cli: &Cli, command: &ServersCommand) -> Result<ExitCode, String> {
    let servers = open_servers(cli)?;
    let sources = config_sources(cli)?;
    let env = process_env;
    let fail = |e: crate::servers::ServersError| e.to_string();
    match command {
        ServersCommand::Add(args) => {
            let scope = Scope::parse(&args.scope)?;
            let draft = draft_from_args(args)?;
            let record = servers.add(Draft { scope, ..draft }, &env).map_err(fail)?;
            print(cli, json!({"ok": true, "added": record.key}), || {
                println!(
                    "Added server \"{}\" ({} scope). Run `airlock servers test {}` to offer its tools.",
                    record.key.name, record.key.scope, record.key.name
                )
            });
            Ok(ExitCode::SUCCESS)
        }
        ServersCommand::Edit(args) => {
            let record = servers
                .locate(&args.name, scope_arg(&args.scope)?, &sources)
                .map_err(fail)?;
            let edit = edit_from_args(args)?;
            let (next, stale) = servers.edit(&record, edit, &env).map_err(fail)?;
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
        ServersCommand::List => {
            let config = servers.load_config(&sources, &env).map_err(fail)?;
            let listing = servers.list(&config).map_err(fail)?;
            print(cli, json!({"servers": listing}), || {
                if listing.is_empty() {
                    println!(
                        "No servers. Add one with `airlock servers add NAME -- COMMAND ARGS…`."
                    );
                }
                for l in &listing {
                    let tools = l.tools.map(|n| format!(" ({n} tools)")).unwrap_or_default();
                    let state = if l.enabled { "enabled" } else { "disabled" };
                    println!(
                        "{:<20} {:<6} {:<9} {}{}  {}",
                        l.name, l.transport, state, l.catalog, tools, l.source
                    );
                    for o in &l.overrides {
                        println!("{:<20} overrides {o}", "");
                    }
                    for r in &l.repair {
                        println!("{:<20} needs repair: {r}", "");
                    }
                }
            });
            Ok(ExitCode::SUCCESS)
        }
        ServersCommand::Get { name, scope } => {
            let config = servers.load_config(&sources, &env).map_err(fail)?;
            let server = config.servers.get(name);
            let scope = scope_arg(scope)?.or_else(|| {
                let source = server?.source.to_str()?.strip_prefix("registry:")?;
                Scope::parse(source).ok()
            });
            let record = match scope {
                Some(_) => Some(servers.locate(name, scope, &sources).map_err(fail)?),
                None => None,
            };
            let shown = match (&record, server) {
                (Some(record), _) => describe_record(record),
                (None, Some(server)) => describe_config(server),
                (None, None) => return Err(format!("no server named \"{name}\"")),
            };
            let registry = servers.registry();
            let current = match server {
                Some(s) if s.enabled => registry
                    .catalog(name, &s.launch_digest())
                    .map_err(|e| e.to_string())?,
                _ => None,
            };
            let stale =
                current.is_none() && registry.has_catalog(name).map_err(|e| e.to_string())?;
            let catalog_json = match &current {
                Some(c) => Some(json!({
                    "state": "tested",
                    "tested_at": c.tested_at,
                    "protocol_version": c.protocol_version,
                    "server": {"name": c.server_name, "version": c.server_version},
                    "transport": c.transport,
                    "tools": c.tools.iter().filter_map(|t| t["name"].as_str()).collect::<Vec<_>>(),
                })),
                None if stale => Some(json!({"state": "stale"})),
                None => None,
            };
            print(
                cli,
                json!({"server": shown, "catalog": catalog_json}),
                || {
                    println!("{}", serde_json::to_string_pretty(&shown).expect("json"));
                    match &catalog_json {
                        Some(c) => println!(
                            "catalog: {}",
                            serde_json::to_string_pretty(c).expect("json")
                        ),
                        None => println!("catalog: untested (run `airlock servers test {name}`)"),
                    }
                },
            );
            Ok(ExitCode::SUCCESS)
        }
        ServersCommand::Remove { name, scope } => {
            let record = servers
                .locate(name, scope_arg(scope)?, &sources)
                .map_err(fail)?;
            servers.remove(&record, &env).map_err(fail)?;
            print(cli, json!({"ok": true, "removed": record.key}), || {
                println!("Removed server \"{name}\" ({} scope).", record.key.scope)
            });
            Ok(ExitCode::SUCCESS)
        }
        ServersCommand::Enable { name, scope } | ServersCommand::Disable { name, scope } => {
            let enable = matches!(command, ServersCommand::Enable { .. });
            let record = servers
                .locate(name, scope_arg(scope)?, &sources)
                .map_err(fail)?;
            servers.set_enabled(&record, enable, &env).map_err(fail)?;
            let word = if enable { "enabled" } else { "disabled" };
            print(cli, json!({"ok": true, word: record.key}), || {
                println!("Server \"{name}\" {word}.");
                if enable {
                    println!("Run `airlock servers test {name}` to offer its tools.");
                }
            });
            Ok(ExitCode::SUCCESS)
        }
        ServersCommand::Test { name } => {
            let config = servers.load_config(&sources, &env).map_err(fail)?;
            let server = config
                .servers
                .get(name)
                .ok_or_else(|| format!("no server named \"{name}\""))?
                .clone();
            if !server.enabled {
                return Err(format!(
                    "server \"{name}\" is disabled; enable it first with `airlock servers enable {name}`"
                ));
            }
            let mut options = options(cli)?;
            options.max_sessions = 1;
            match crate::Airlock::test_service(server, options).await {
                Ok(report) => {
                    print(cli, json!({"ok": true, "test": report}), || {
                        let s = &report.server;
                        println!("verified: yes");
                        println!("protocol: {}", s.protocol_version);
                        let title = s
                            .title
                            .as_deref()
                            .map(|t| format!(" \"{t}\""))
                            .unwrap_or_default();
                        let transport = serde_json::to_value(s.transport).unwrap_or_default();
                        println!(
                            "server:   {} {}{title} over {}",
                            s.name,
                            s.version,
                            transport.as_str().unwrap_or("?")
                        );
                        println!(
                            "tools:    {} (saved as the tested catalog; none was run)",
                            report.tools.len()
                        );
                        for t in &report.tools {
                            let desc = t["description"]
                                .as_str()
                                .unwrap_or("")
                                .lines()
                                .next()
                                .unwrap_or("");
                            println!("  {:<28} {desc}", t["name"].as_str().unwrap_or("?"));
                        }
                    });
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) => {
                    print(
                        cli,
                        json!({"ok": false, "verified": false, "error": "service_unavailable", "message": e.to_string()}),
                        || {
                            println!("verified: no");
                            eprintln!("airlock: {e}");
                        },
                    );
                    Ok(ExitCode::FAILURE)
                }
            }
        }
        ServersCommand::Auth { name, wait } => {
            let config = servers.load_config(&sources, &env).map_err(fail)?;
            let url = oauth_url(config.servers.get(name), name)?;
            crate::oauth::authorize(
                servers.store(),
                name,
                &url,
                &open_in_browser,
                Duration::from_secs(*wait),
            )
            .await
            .map_err(|e| e.to_string())?;
            print(cli, json!({"ok": true, "authorized": name}), || {
                println!(
                    "Authorized \"{name}\". Tokens are in the secret store; Airlock refreshes them silently."
                )
            });
            Ok(ExitCode::SUCCESS)
        }
        ServersCommand::Logout { name } => {
            let had = crate::oauth::logout(servers.store(), name).map_err(|e| e.to_string())?;
            print(cli, json!({"ok": true, "forgot_tokens": had}), || {
                if had {
                    println!("Forgot the OAuth tokens of \"{name}\".");
                } else {
                    println!("\"{name}\" had no stored OAuth tokens.");
                }
            });
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn oauth_url(server: Option<&ServerConfig>, name: &str) -> Result<String, String> {
    match server.map(|s| &s.transport) {
        Some(TransportConfig::Http {
            url, auth: Some(_), ..
        }) => Ok(url.clone()),
        Some(_) => Err(format!(
            "server \"{name}\" does not use OAuth (only http servers with auth = \"oauth\" do)"
        )),
        None => Err(format!("no server named \"{name}\"")),
    }
}

/// Opens `url` for the user: `$AIRLOCK_BROWSER URL` when set, else the platform's
/// opener; when none works, prints it to the terminal (never to the log).
fn open_in_browser(url: &str) -> Result<(), String> {
    let candidates: Vec<String> = match std::env::var("AIRLOCK_BROWSER") {
        Ok(b) if !b.is_empty() => vec![b],
        _ if cfg!(target_os = "macos") => vec!["open".into()],
        _ => vec!["xdg-open".into()],
    };
    for program in candidates {
        let status = std::process::Command::new(&program)
            .arg(url)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .status();
        if matches!(status, Ok(s) if s.success()) {
            eprintln!("Opened the authorization page with {program}; waiting for it to finish…");
            return Ok(());
        }
    }
    eprintln!("Open this address in a browser to authorize Airlock:\n\n  {url}\n");
    Ok(())
}

fn given_map(
    pairs: Vec<(String, GivenValue)>,
    what: &str,
) -> Result<BTreeMap<String, GivenValue>, String> {
    let mut map = BTreeMap::new();
    for (k, v) in pairs {
        if map.insert(k.clone(), v).is_some() {
            return Err(format!("{what} \"{k}\" is given twice"));
        }
    }
    Ok(map)
}

fn env_pairs(args: &[String], secrets: &[String]) -> Result<BTreeMap<String, GivenValue>, String> {
    let pairs = args
        .iter()
        .map(|a| parse_env_arg(a, secrets, &process_env).map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    given_map(pairs, "--env")
}

fn header_pairs(
    args: &[String],
    secrets: &[String],
) -> Result<BTreeMap<String, GivenValue>, String> {
    let pairs = args
        .iter()
        .map(|a| parse_header_arg(a, secrets).map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    given_map(pairs, "--header")
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
            if !args.values.headers.is_empty() || args.auth.is_some() {
                return Err("--header and --auth apply to --transport http".into());
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
                auth: args.auth.clone(),
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
        auth: match args.auth.as_deref() {
            None => None,
            Some("none") => Some(None),
            Some("oauth") => Some(Some("oauth".to_string())),
            Some(other) => {
                return Err(format!(
                    "--auth must be \"oauth\" or \"none\", got \"{other}\""
                ));
            }
        },
        cwd: args.cwd.clone(),
        env: env_pairs(&args.values.env, &args.values.secrets)?,
        headers: header_pairs(&args.values.headers, &args.values.secrets)?,
        unset: args.unset.clone(),
        tool_timeout_secs: positive("--tool-timeout", args.tool_timeout)?,
        startup_timeout_secs: positive("--startup-timeout", args.startup_timeout)?,
        clear_repair: args.repaired,
    })
}

fn masked_values(map: &BTreeMap<String, StoredValue>) -> serde_json::Value {
    map.iter()
        .map(|(k, v)| {
            let shown = match v {
                StoredValue::Plain(p) => p.clone(),
                StoredValue::Secret(_) => MASK.to_string(),
            };
            (k.clone(), json!(shown))
        })
        .collect()
}

/// A transport as shown by `servers get`, its env or headers already masked.
enum ShownTransport<'a> {
    Stdio {
        command: &'a str,
        args: &'a [String],
        env: serde_json::Value,
    },
    Http {
        url: &'a str,
        headers: serde_json::Value,
        auth: Option<&'a str>,
    },
}

impl ShownTransport<'_> {
    /// Adds the transport's fields to a server description.
    fn add_to(self, v: &mut serde_json::Value) {
        match self {
            ShownTransport::Stdio { command, args, env } => {
                v["type"] = json!("stdio");
                v["command"] = json!(command);
                v["args"] = json!(args);
                v["env"] = env;
            }
            ShownTransport::Http { url, headers, auth } => {
                v["type"] = json!("http");
                v["url"] = json!(url);
                v["headers"] = headers;
                v["auth"] = json!(auth);
            }
        }
    }
}

/// A registry record for display: secret values masked, references hidden.
fn describe_record(r: &ServiceRecord) -> serde_json::Value {
    let mut v = json!({
        "name": r.key.name,
        "source": crate::servers::registry_source(r.key.scope),
        "scope": r.key.scope,
        "label": r.label,
        "description": r.description,
        "cwd": r.cwd,
        "enabled": r.enabled,
        "startup_timeout_secs": r.startup_timeout_secs,
        "tool_timeout_secs": r.tool_timeout_secs,
        "repair": r.repair,
        "origin": r.origin,
    });
    match &r.transport {
        StoredTransport::Stdio { command, args, env } => ShownTransport::Stdio {
            command,
            args,
            env: masked_values(env),
        },
        StoredTransport::Http { url, headers, auth } => ShownTransport::Http {
            url,
            headers: masked_values(headers),
            auth: auth.as_deref(),
        },
    }
    .add_to(&mut v);
    v
}

/// An effective definition (from a file or the registry) for display, secrets masked.
fn describe_config(s: &ServerConfig) -> serde_json::Value {
    let secret_names: Vec<String> = crate::secrets::known_secrets(s)
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    let mask = |map: &BTreeMap<String, String>| -> serde_json::Value {
        map.iter()
            .map(|(k, v)| {
                let shown = if secret_names.contains(k) {
                    MASK
                } else {
                    v.as_str()
                };
                (k.clone(), json!(shown))
            })
            .collect()
    };
    let mut v = json!({
        "name": s.name,
        "source": s.source,
        "label": s.label,
        "description": s.description,
        "cwd": s.cwd,
        "enabled": s.enabled,
        "startup_timeout_secs": s.startup_timeout.as_secs_f64(),
        "tool_timeout_secs": s.tool_timeout.as_secs_f64(),
        "repair": s.repair,
    });
    match &s.transport {
        TransportConfig::Stdio { command, args, env } => ShownTransport::Stdio {
            command,
            args,
            env: mask(env),
        },
        TransportConfig::Http { url, headers, auth } => ShownTransport::Http {
            url,
            headers: mask(headers),
            auth: auth.as_deref(),
        },
    }
    .add_to(&mut v);
    v
}
