//! `airlock servers list` and `get`: listings and one server's description, with
//! secret values masked.

use std::process::ExitCode;

use anyhow::bail;
use serde_json::json;

use super::{print, scope_arg};
use crate::cli::Cli;
use crate::config::{ConfigSources, ServerConfig, Source, Transport, process_env};
use crate::servers::{Servers, ServiceRecord, StoredValue, TestedCatalog};

pub use crate::secrets::MASK;

/// Runs `airlock servers list`.
pub(super) fn list(
    cli: &Cli,
    servers: &Servers,
    sources: &ConfigSources,
) -> anyhow::Result<ExitCode> {
    let config = servers.load_config(sources, &process_env)?;
    let listing = servers.list(&config)?;
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
) -> anyhow::Result<ExitCode> {
    let config = servers.load_config(sources, &process_env)?;
    let server = config.servers.get(name);
    let scope = scope_arg(scope)?.or_else(|| match server?.source {
        Source::Registry(scope) => Some(scope),
        Source::File(_) => None,
    });
    let record = match scope {
        Some(_) => Some(servers.locate(name, scope, sources)?),
        None => None,
    };
    let shown = match (&record, server) {
        (Some(record), _) => describe_record(record),
        (None, Some(server)) => describe_config(server),
        (None, None) => bail!("no server named \"{name}\""),
    };
    let launch = server.filter(|s| s.enabled).map(|s| s.launch_digest());
    let catalog_json = match servers.tested_catalog(name, launch.as_deref())? {
        TestedCatalog::Current(c) => Some(json!({
            "state": "tested",
            "tested_at": c.tested_at,
            "protocol_version": c.protocol_version,
            "server": {"name": c.server_name, "version": c.server_version},
            "transport": c.transport,
            "tools": c.tools.iter().filter_map(|t| t["name"].as_str()).collect::<Vec<_>>(),
        })),
        TestedCatalog::Stale => Some(json!({"state": "stale"})),
        TestedCatalog::Untested => None,
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

/// Adds a transport's fields (`type`, then `command`/`args`/`env` or
/// `url`/`headers`/`auth`) to a server description; its values are already masked.
fn add_transport(v: &mut serde_json::Value, shown: Transport<String>) {
    if let (Some(target), serde_json::Value::Object(fields)) = (
        v.as_object_mut(),
        serde_json::to_value(shown).expect("a transport serializes"),
    ) {
        target.extend(fields);
    }
}

/// A registry record for display: secret values masked, references hidden.
fn describe_record(r: &ServiceRecord) -> serde_json::Value {
    let mut v = json!({
        "name": r.key.name,
        "source": Source::Registry(r.key.scope),
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
    let shown = r.transport.clone().map_values(|_, value| match value {
        StoredValue::Plain(p) => p,
        StoredValue::Secret(_) => MASK.to_string(),
    });
    add_transport(&mut v, shown);
    v
}

/// An effective definition (from a file or the registry) for display, secrets masked.
fn describe_config(s: &ServerConfig) -> serde_json::Value {
    let known = s.known_secrets();
    let secret_names: Vec<&str> = known.iter().map(|k| k.name.as_str()).collect();
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
    let shown = s.transport.clone().map_values(|key, value| {
        if secret_names.contains(&key) {
            MASK.to_string()
        } else {
            value
        }
    });
    add_transport(&mut v, shown);
    v
}
