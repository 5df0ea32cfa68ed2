//! The `adapters` and `adapter_config` tables of a server entry: which plugin serves
//! each stage (naming, content, the redaction chain, the policy chain), pinned or not,
//! and each plugin's configuration.

use super::SettingError;
use std::path::Path;

use serde_json::{Map, Value};

use super::fields::kind;
use super::{AdapterConfig, Adapters, OnFailure, PluginRef, PolicyMode, PolicySettings};

/// The `adapters` table: one plugin for naming and content, a chain for redaction and
/// policy. Each entry is `builtin:NAME`, a path, or a pinned `{ path, sha256 }`.
pub(super) fn parse_adapters(value: Option<&Value>, base: &Path) -> Result<Adapters, SettingError> {
    let mut adapters = Adapters::default();
    let Some(value) = value else {
        return Ok(adapters);
    };
    let Value::Object(map) = value else {
        return Err(format!("\"adapters\" must be a table, got {}", kind(value)).into());
    };
    for (stage, v) in map {
        let one = |v: &Value, at: &str| match v {
            Value::String(s) => PluginRef::parse(s, base).map_err(|m| format!("\"{at}\": {m}")),
            Value::Object(table) => {
                pinned_plugin(table, base).map_err(|m| format!("\"{at}\": {m}"))
            }
            other => Err(format!(
                "\"{at}\" must be a string or a table {{ path, sha256 }}, got {}",
                kind(other)
            )),
        };
        match stage.as_str() {
            "naming" => adapters.naming = one(v, "adapters.naming")?,
            "content" => adapters.content = one(v, "adapters.content")?,
            "redaction" => {
                adapters.redaction = match v {
                    Value::Array(items) if items.is_empty() => {
                        return Err("\"adapters.redaction\" must name at least one plugin; redaction cannot be turned off".into());
                    }
                    Value::Array(items) => items
                        .iter()
                        .enumerate()
                        .map(|(i, item)| one(item, &format!("adapters.redaction[{i}]")))
                        .collect::<Result<_, _>>()?,
                    other => vec![one(other, "adapters.redaction")?],
                }
            }
            "policy" => {
                adapters.policy = match v {
                    Value::Array(items) => items
                        .iter()
                        .enumerate()
                        .map(|(i, item)| one(item, &format!("adapters.policy[{i}]")))
                        .collect::<Result<_, _>>()?,
                    other => vec![one(other, "adapters.policy")?],
                }
            }
            other => {
                return Err(format!(
                    "unknown stage \"adapters.{other}\" (expected naming, content, redaction, policy)"
                ).into());
            }
        }
    }
    Ok(adapters)
}

/// A plugin pinned by digest: `{ path = "builtin:NAME" | "./x.wasm", sha256 = "…" }`.
fn pinned_plugin(table: &Map<String, Value>, base: &Path) -> Result<PluginRef, SettingError> {
    if let Some(unknown) = table
        .keys()
        .find(|k| !["path", "sha256"].contains(&k.as_str()))
    {
        return Err(
            format!("unknown field \"{unknown}\" (a pinned plugin is {{ path, sha256 }})").into(),
        );
    }
    let field = |key: &str| match table.get(key) {
        Some(Value::String(s)) => Ok(s.as_str()),
        Some(other) => Err(format!("\"{key}\" must be a string, got {}", kind(other))),
        None => Err(format!("\"{key}\" is required in a pinned plugin")),
    };
    PluginRef::parse(field("path")?, base)?.pinned(field("sha256")?)
}

/// The `adapter_config` table: one table per stage, and per plugin of a chain (one table
/// for the first plugin, or an array by position). A policy's `mode` and `on_failure`
/// are the host's; the rest of its table goes to the plugin.
pub(super) fn parse_adapter_config(
    value: Option<&Value>,
    adapters: &Adapters,
) -> Result<AdapterConfig, SettingError> {
    let empty = || Value::Object(Map::new());
    let mut config = AdapterConfig {
        naming: empty(),
        content: empty(),
        redaction: vec![empty(); adapters.redaction.len()],
        policy: vec![
            PolicySettings {
                config: empty(),
                ..PolicySettings::default()
            };
            adapters.policy.len()
        ],
    };
    let Some(value) = value else {
        return Ok(config);
    };
    let Value::Object(map) = value else {
        return Err(format!("\"adapter_config\" must be a table, got {}", kind(value)).into());
    };
    for (stage, v) in map {
        let table = |v: &Value, at: &str| match v {
            Value::Object(_) => Ok(v.clone()),
            other => Err(format!("\"{at}\" must be a table, got {}", kind(other))),
        };
        match stage.as_str() {
            "naming" => config.naming = table(v, "adapter_config.naming")?,
            "content" => config.content = table(v, "adapter_config.content")?,
            // One table for the first plugin of the chain, or an array by position.
            "redaction" => match v {
                Value::Array(items) => {
                    if items.len() > adapters.redaction.len() {
                        return Err(format!(
                            "\"adapter_config.redaction\" has {} tables but the chain has {} plugins",
                            items.len(),
                            adapters.redaction.len()
                        ).into());
                    }
                    for (i, item) in items.iter().enumerate() {
                        config.redaction[i] =
                            table(item, &format!("adapter_config.redaction[{i}]"))?;
                    }
                }
                other => config.redaction[0] = table(other, "adapter_config.redaction")?,
            },
            "policy" => {
                let tables: Vec<&Value> = match v {
                    Value::Array(items) => items.iter().collect(),
                    other => vec![other],
                };
                if tables.len() > adapters.policy.len() {
                    return Err(format!(
                        "\"adapter_config.policy\" has {} tables but the policy chain has {} plugins (set adapters.policy)",
                        tables.len(),
                        adapters.policy.len()
                    ).into());
                }
                for (i, item) in tables.into_iter().enumerate() {
                    let at = format!("adapter_config.policy[{i}]");
                    config.policy[i] = policy_settings(&table(item, &at)?, &at)?;
                }
            }
            other => {
                return Err(format!(
                    "unknown stage \"adapter_config.{other}\" (expected naming, content, redaction, policy)"
                ).into());
            }
        }
    }
    Ok(config)
}

/// A policy's table: `mode` (`enforce` | `audit`) and `on_failure` (`closed` | `open`)
/// taken out, the rest for the plugin.
fn policy_settings(table: &Value, at: &str) -> Result<PolicySettings, SettingError> {
    let mut rest = table.as_object().cloned().unwrap_or_default();
    let mut take = |key: &str, allowed: &[&str]| -> Result<Option<String>, SettingError> {
        match rest.remove(key) {
            None => Ok(None),
            Some(Value::String(s)) if allowed.contains(&s.as_str()) => Ok(Some(s)),
            Some(other) => Err(format!(
                "\"{at}.{key}\" must be one of {}, got {other}",
                allowed
                    .iter()
                    .map(|a| format!("\"{a}\""))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
            .into()),
        }
    };
    let mode = match take("mode", &["enforce", "audit"])?.as_deref() {
        Some("audit") => PolicyMode::Audit,
        _ => PolicyMode::Enforce,
    };
    let on_failure = match take("on_failure", &["closed", "open"])?.as_deref() {
        Some("open") => OnFailure::Open,
        _ => OnFailure::Closed,
    };
    Ok(PolicySettings {
        mode,
        on_failure,
        config: Value::Object(rest),
    })
}
