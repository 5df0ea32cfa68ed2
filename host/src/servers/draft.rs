//! What an operator asks of `airlock servers`: a service to add ([`Draft`]), changes to
//! one ([`Edit`]), a line of the listing ([`Listing`]), and the parsing of `--env` and
//! `--header` values (names shown in messages, never values).

use std::collections::BTreeMap;

use super::{ServersError, invalid};
use crate::config::{Scope, TaggedValue, Transport};
use crate::secrets::looks_like_credential;

/// A value given for an env var or header, and whether it is secret (empty in an edit
/// of a secret means "keep the stored one").
pub type GivenValue = TaggedValue;

/// How a new service is reached.
pub type DraftTransport = Transport<GivenValue>;

/// A service to add.
#[derive(Debug, Clone)]
pub struct Draft {
    /// The name.
    pub name: String,
    /// The scope.
    pub scope: Scope,
    /// A label.
    pub label: Option<String>,
    /// A description.
    pub description: Option<String>,
    /// How to reach it.
    pub transport: DraftTransport,
    /// Working directory (must be absolute).
    pub cwd: Option<String>,
    /// Whether it starts enabled.
    pub enabled: bool,
    /// Startup timeout, seconds.
    pub startup_timeout_secs: Option<f64>,
    /// Tool timeout, seconds.
    pub tool_timeout_secs: Option<f64>,
    /// Why it needs repair (imports).
    pub repair: Vec<String>,
    /// Where it came from.
    pub origin: String,
}

/// Changes to an existing service; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct Edit {
    /// New label (empty string clears it).
    pub label: Option<String>,
    /// New description (empty string clears it).
    pub description: Option<String>,
    /// New command and args (stdio).
    pub command: Option<Vec<String>>,
    /// New URL (http).
    pub url: Option<String>,
    /// Auth changes (http); empty leaves the auth as it is.
    pub auth: super::AuthChanges,
    /// New working directory (empty string clears it).
    pub cwd: Option<String>,
    /// Env vars to set. A blank value for a secret keeps the stored secret.
    pub env: BTreeMap<String, GivenValue>,
    /// Headers to set. A blank value for a secret keeps the stored secret.
    pub headers: BTreeMap<String, GivenValue>,
    /// Env vars or headers to remove.
    pub unset: Vec<String>,
    /// New tool timeout.
    pub tool_timeout_secs: Option<f64>,
    /// New startup timeout.
    pub startup_timeout_secs: Option<f64>,
    /// Clears the repair reasons (the operator says it is fixed).
    pub clear_repair: bool,
}

/// One line of `airlock servers list`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Listing {
    /// The name.
    pub name: String,
    /// Where the effective definition comes from: a file, `registry:user` or
    /// `registry:project`.
    pub source: String,
    /// `stdio` or `http`.
    pub transport: &'static str,
    /// Whether it is enabled.
    pub enabled: bool,
    /// `tested`, `stale` or `untested`.
    pub catalog: &'static str,
    /// Tools in the tested catalog (when tested).
    pub tools: Option<usize>,
    /// Why it needs repair.
    pub repair: Vec<String>,
    /// Other definitions of the same name that this one overrides.
    pub overrides: Vec<String>,
}

/// Parses `K=V` (or a bare `K`, whose value is taken from `env`); credential-like names
/// and names in `secret_names` are secret.
pub fn parse_env_arg(
    arg: &str,
    secret_names: &[String],
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(String, GivenValue), ServersError> {
    let (key, value) = match arg.split_once('=') {
        Some((k, v)) => (k.to_string(), v.to_string()),
        None => {
            let v = env(arg).ok_or_else(|| {
                invalid(format!(
                    "--env {arg}: no value given and {arg} is not set in this environment (use --env {arg}=VALUE)"
                ))
            })?;
            (arg.to_string(), v)
        }
    };
    // Messages name the variable, never the value.
    if key.is_empty() || key.contains('\0') || key.chars().any(char::is_whitespace) {
        return Err(invalid(format!(
            "--env {key:?}=…: invalid variable name (expected NAME=VALUE)"
        )));
    }
    let secret = looks_like_credential(&key) || secret_names.contains(&key);
    Ok((key, GivenValue { value, secret }))
}

/// Parses `K: V`; credential-like header names and names in `secret_names` are secret.
pub fn parse_header_arg(
    arg: &str,
    secret_names: &[String],
) -> Result<(String, GivenValue), ServersError> {
    // Messages name the header, never the value.
    let (key, value) = arg.split_once(':').ok_or_else(|| {
        let shown: String = arg
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || "-_".contains(*c))
            .collect();
        invalid(format!(
            "--header {shown:?}…: expected \"Name: value\" (a colon after the name)"
        ))
    })?;
    let key = key.trim();
    if key.is_empty()
        || !key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_".contains(c))
    {
        return Err(invalid(format!("--header {key:?}: invalid header name")));
    }
    let secret =
        looks_like_credential(key) || secret_names.iter().any(|s| s.eq_ignore_ascii_case(key));
    Ok((
        key.to_string(),
        GivenValue {
            // One optional space after the colon is the separator; the rest is kept.
            value: value.strip_prefix(' ').unwrap_or(value).to_string(),
            secret,
        },
    ))
}
