//! `airlock servers list` and `get`: listings and one server's description, with
//! secret values masked.

use std::collections::BTreeMap;
use std::process::ExitCode;

use serde_json::json;

use super::{fail, print, scope_arg};
use crate::cli::Cli;
use crate::config::{ConfigSources, ServerConfig, TransportConfig, process_env};
use crate::registry::{Scope, ServiceRecord, StoredTransport, StoredValue};
use crate::servers::Servers;

/// The mask shown instead of a secret value.
pub const MASK: &str = "••••••";

/// Runs `airlock servers list`.
pub(super) fn list(
    cli: &Cli,
    servers: &Servers,
    sources: &ConfigSources,
) -> Result<ExitCode, String> {
    let config = servers.load_config(sources, &process_env).map_err(fail)?;
    let listing = servers.list(&config).map_err(fail)?;
    print(cli, json!({"servers": listing}), || {
        if listing.is_empty() {
            println!("No servers. Add one with `airlock servers add NAME -- COMMAND ARGS…`.");
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

/// Runs `airlock servers get`.
pub(super) fn get(
    cli: &Cli,
    servers: &Servers,
    sources: &ConfigSources,
    name: &str,
    scope: &Option<String>,
) -> Result<ExitCode, String> {
    let config = servers.load_config(sources, &process_env).map_err(fail)?;
    let server = config.servers.get(name);
    let scope = scope_arg(scope)?.or_else(|| {
        let source = server?.source.to_str()?.strip_prefix("registry:")?;
        Scope::parse(source).ok()
    });
    let record = match scope {
        Some(_) => Some(servers.locate(name, scope, sources).map_err(fail)?),
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
    let stale = current.is_none() && registry.has_catalog(name).map_err(|e| e.to_string())?;
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
