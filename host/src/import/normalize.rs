//! The entry normalizer shared by every client: checks the shape of one raw entry and
//! translates it into a [`Candidate`] (endpoint, transport, secrets, timeouts, notes).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Map, Value};

use super::EntryError;
use super::auth::imported_auth;
use super::clients::RawEntry;
use super::credentials::{REDACTED, scrub_args, scrub_url};
use super::parse::kind;
use super::references::{Resolver, is_var_name};
use super::{Candidate, Client, ImportSources, ImportedTransport};

/// Entry fields the normalizer understands (Gemini also has `timeout`); anything else is
/// reported in a note as not imported.
const KNOWN_FIELDS: &[&str] = &[
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "httpUrl",
    "headers",
    "http_headers",
    "env_http_headers",
    "type",
    "transport",
    "disabled",
    "enabled",
    "startup_timeout_sec",
    "startup_timeout_ms",
    "tool_timeout_sec",
    "bearer_token_env_var",
    "envFile",
    "oauth",
    "auth",
];

/// Where a server is reached, as declared by the entry.
enum Endpoint {
    Command(String),
    Url(String),
}

/// A header to import: its name, its raw value and, when it was synthesized from another
/// field (Codex `bearer_token_env_var`, `env_http_headers`), that field.
struct HeaderDef {
    name: String,
    raw: String,
    origin: Option<String>,
}

/// The fields of an entry besides its endpoint, once its shape has been checked.
struct Fields {
    args: Vec<String>,
    env: Vec<(String, String)>,
    headers: Vec<HeaderDef>,
    cwd: Option<String>,
    disabled: bool,
    env_file: Option<String>,
}

/// Validates one raw entry and turns it into a candidate named `name`. `Err` is a problem
/// with the entry (the message never quotes secret values).
pub(super) fn normalize(
    client: Client,
    source: &Path,
    name: &str,
    sources: &ImportSources<'_>,
    raw: &RawEntry,
    notes: Vec<String>,
) -> Result<Candidate, EntryError> {
    let Value::Object(map) = &raw.value else {
        return Err(format!("the entry must be an object, got {}", kind(&raw.value)).into());
    };

    // --- Shape: everything that can make the entry malformed is checked first. ---
    let mut notes = notes;
    let endpoint = endpoint(map, &mut notes)?;
    let fields = fields(map)?;

    // --- Translation. ---
    let mut r = Resolver {
        env: sources.env,
        home: sources.home,
        workspace: sources.workspace,
        repair: Vec::new(),
        notes,
    };
    note_source_fields(client, map, &fields, &mut r.notes);
    let (tool_timeout_secs, startup_timeout_secs) = timeouts(client, map, &mut r.notes);
    let (transport, cwd, credentials_withheld) = match &endpoint {
        Endpoint::Command(command) => {
            let (transport, cwd) = stdio(&mut r, command, &fields)?;
            (transport, cwd, false)
        }
        Endpoint::Url(url) => {
            let (mut transport, withheld) = http(&mut r, name, url, &fields)?;
            let (imported, auth_withheld) = imported_auth(&mut r, name, map)?;
            if let ImportedTransport::Http { auth, .. } = &mut transport {
                *auth = imported;
            }
            (transport, None, withheld || auth_withheld)
        }
    };
    if matches!(endpoint, Endpoint::Command(_))
        && let Some(field) = ["oauth", "auth"].into_iter().find(|f| map.contains_key(*f))
    {
        r.notes.push(format!(
            "\"{field}\" only applies to remote servers and was not imported"
        ));
    }

    Ok(Candidate {
        name: name.to_string(),
        client,
        source: source.to_path_buf(),
        transport,
        cwd,
        enabled: !fields.disabled && !credentials_withheld,
        tool_timeout_secs,
        startup_timeout_secs,
        repair: r.repair,
        notes: r.notes,
    })
}

/// The entry's endpoint: its `command` or its `url` (`httpUrl`), checked against the
/// declared `type` (`transport`). Notes about the endpoint go to `notes`.
fn endpoint(map: &Map<String, Value>, notes: &mut Vec<String>) -> Result<Endpoint, EntryError> {
    let command = match map.get("command") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.trim().is_empty() => {
            return Err("\"command\" must not be empty".into());
        }
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            return Err(format!("\"command\" must be a string, got {}", kind(other)).into());
        }
    };
    let url = match (opt_string(map, "url")?, opt_string(map, "httpUrl")?) {
        (Some(_), Some(http)) => {
            notes.push("both \"url\" and \"httpUrl\" are set; \"httpUrl\" was used".into());
            Some(http)
        }
        (url, http) => http.or(url),
    };
    if url.as_deref().is_some_and(|u| u.trim().is_empty()) {
        return Err("\"url\" must not be empty".into());
    }
    let declared = match (opt_string(map, "type")?, opt_string(map, "transport")?) {
        (Some(t), _) | (None, Some(t)) => Some(t),
        (None, None) => None,
    };
    let declared_remote = match declared.as_deref() {
        None => None,
        Some("stdio") => Some(false),
        Some("http" | "streamable-http" | "streamableHttp" | "streamable_http") => Some(true),
        Some("sse") => {
            notes.push(
                "the source uses SSE; Airlock speaks streamable HTTP and falls back to SSE".into(),
            );
            Some(true)
        }
        Some(other) => {
            return Err(format!(
                "\"type\" must be \"stdio\", \"http\", \"sse\" or \"streamable-http\", got {other:?}"
            ).into());
        }
    };
    let endpoint = match (command, url, declared_remote) {
        (Some(_), Some(_), _) => {
            return Err("both \"command\" and \"url\" are set; an entry needs exactly one".into());
        }
        (None, None, _) => return Err("neither \"command\" nor \"url\" is set".into()),
        (Some(_), None, Some(true)) => {
            return Err(
                "\"type\" says remote, but the entry has a \"command\" and no \"url\"".into(),
            );
        }
        (None, Some(_), Some(false)) => {
            return Err(
                "\"type\" is \"stdio\", but the entry has a \"url\" and no \"command\"".into(),
            );
        }
        (Some(command), None, _) => Endpoint::Command(command),
        (None, Some(url), _) => Endpoint::Url(url),
    };
    Ok(endpoint)
}

/// The entry's other fields, checked: `args`, `env`, the headers, `cwd`, whether it is
/// disabled, and `envFile`.
fn fields(map: &Map<String, Value>) -> Result<Fields, EntryError> {
    let args = string_list(map, "args")?;
    let env = string_map(map, "env")?;
    if let Some((bad, _)) = env
        .iter()
        .find(|(k, _)| k.is_empty() || k.contains('=') || k.contains('\0'))
    {
        return Err(format!("\"env\" has an invalid variable name {bad:?}").into());
    }
    let headers = header_defs(map)?;
    let cwd = opt_string(map, "cwd")?;
    let disabled =
        opt_bool(map, "disabled")? == Some(true) || opt_bool(map, "enabled")? == Some(false);
    let env_file = opt_string(map, "envFile")?;
    Ok(Fields {
        args,
        env,
        headers,
        cwd,
        disabled,
        env_file,
    })
}

/// The headers to import: `headers` and `http_headers` as written, then the ones Codex
/// builds from `env_http_headers` and `bearer_token_env_var`.
fn header_defs(map: &Map<String, Value>) -> Result<Vec<HeaderDef>, EntryError> {
    let mut headers = Vec::new();
    for field in ["headers", "http_headers"] {
        for (header, value) in string_map(map, field)? {
            headers.push(HeaderDef {
                name: header,
                raw: value,
                origin: None,
            });
        }
    }
    for (header, var) in string_map(map, "env_http_headers")? {
        if !is_var_name(&var) {
            return Err(format!(
                "\"env_http_headers\" must map header names to environment variable names; {header:?} does not"
            ).into());
        }
        headers.push(HeaderDef {
            name: header,
            raw: format!("${{{var}}}"),
            origin: Some(format!("env_http_headers {var}")),
        });
    }
    if let Some(var) = opt_string(map, "bearer_token_env_var")? {
        if !is_var_name(&var) {
            return Err("\"bearer_token_env_var\" must name an environment variable".into());
        }
        headers.push(HeaderDef {
            name: "Authorization".into(),
            raw: format!("Bearer ${{{var}}}"),
            origin: Some(format!("bearer_token_env_var {var}")),
        });
    }
    Ok(headers)
}

/// Notes about what the source says beyond the transport: disabled, an `envFile`, and
/// fields that were not imported.
fn note_source_fields(
    client: Client,
    map: &Map<String, Value>,
    fields: &Fields,
    notes: &mut Vec<String>,
) {
    if fields.disabled {
        notes.push("disabled in the source; imported disabled".into());
    }
    if let Some(file) = &fields.env_file {
        notes.push(format!(
            "\"envFile\" ({file}) was not imported; copy the variables it sets into env"
        ));
    }
    let unknown: Vec<String> = map
        .keys()
        .filter(|k| {
            let gemini_timeout = client == Client::Gemini && k.as_str() == "timeout";
            !KNOWN_FIELDS.contains(&k.as_str()) && !gemini_timeout
        })
        .map(|k| format!("{k:?}"))
        .collect();
    if !unknown.is_empty() {
        let noun = if unknown.len() == 1 {
            "field"
        } else {
            "fields"
        };
        notes.push(format!("not imported: {noun} {}", unknown.join(", ")));
    }
}

/// The per-call and the startup timeout, in seconds: Codex `tool_timeout_sec` (else
/// Gemini `timeout`, in ms) and `startup_timeout_sec` (else `startup_timeout_ms`).
fn timeouts(
    client: Client,
    map: &Map<String, Value>,
    notes: &mut Vec<String>,
) -> (Option<u64>, Option<u64>) {
    let mut tool_timeout_secs = seconds(map, "tool_timeout_sec", 1.0, notes);
    if tool_timeout_secs.is_none() && client == Client::Gemini {
        tool_timeout_secs = seconds(map, "timeout", 1000.0, notes);
    }
    let mut startup_timeout_secs = seconds(map, "startup_timeout_sec", 1.0, notes);
    if startup_timeout_secs.is_none() {
        startup_timeout_secs = seconds(map, "startup_timeout_ms", 1000.0, notes);
    }
    (tool_timeout_secs, startup_timeout_secs)
}

/// A local server and its `cwd` (resolved; it must be absolute): command and args kept as
/// templates with typed credentials scrubbed, env values resolved and classified.
/// Headers do not apply and are noted.
fn stdio(
    r: &mut Resolver<'_>,
    command: &str,
    fields: &Fields,
) -> Result<(ImportedTransport, Option<String>), EntryError> {
    let cwd = match &fields.cwd {
        None => None,
        Some(raw) => match r.path("cwd", raw) {
            Some(path) if Path::new(&path).is_absolute() => Some(path),
            Some(path) => {
                return Err(format!("\"cwd\" must be an absolute path, got {path:?}").into());
            }
            None => None,
        },
    };
    let command = r.template("command", command);
    let mut args: Vec<String> = fields
        .args
        .iter()
        .enumerate()
        .map(|(i, a)| r.template(&format!("args[{i}]"), a))
        .collect();
    for i in scrub_args(&mut args) {
        r.repair.push(format!(
            "args[{i}] looked like a credential typed into the command line and was replaced with {REDACTED}; pass it through an env var instead"
        ));
    }
    let mut imported = BTreeMap::new();
    for (key, raw) in &fields.env {
        let value = r.imported(key, raw);
        imported.insert(key.clone(), value);
    }
    if !fields.headers.is_empty() {
        r.notes
            .push("headers only apply to remote servers and were not imported".into());
    }
    let transport = ImportedTransport::Stdio {
        command,
        args,
        env: imported,
    };
    Ok((transport, cwd))
}

/// A remote server: the url kept as a template with typed credentials scrubbed, the
/// headers resolved, and secret headers withheld. Also returns whether credentials were
/// withheld (then the candidate arrives disabled). Local-only fields are noted.
fn http(
    r: &mut Resolver<'_>,
    name: &str,
    url: &str,
    fields: &Fields,
) -> Result<(ImportedTransport, bool), EntryError> {
    let mut credentials_withheld = false;
    let url = r.template("url", url);
    let lower = url.to_ascii_lowercase();
    let http = lower.starts_with("http://") || lower.starts_with("https://");
    if !url.is_empty() && !url.starts_with("${") && !http {
        return Err("\"url\" must start with http:// or https://".into());
    }
    let (url, url_credentials) = scrub_url(&url);
    for what in url_credentials {
        credentials_withheld = true;
        r.repair.push(format!(
            "credentials not imported: {what} was replaced with {REDACTED}; set the real url with `airlock servers edit {name}`"
        ));
    }
    let mut imported = BTreeMap::new();
    for header in &fields.headers {
        let value = r.imported(&header.name, &header.raw);
        if value.secret {
            credentials_withheld = true;
            let what = match &header.origin {
                Some(origin) => format!("header {} (from {origin})", header.name),
                None => format!("header {}", header.name),
            };
            r.repair.push(format!(
                "credentials not imported: {what}; set it with `airlock servers edit {name} --header ...`"
            ));
        } else if imported.insert(header.name.clone(), value).is_some() {
            r.notes.push(format!(
                "header {} is set more than once; the last definition was used",
                header.name
            ));
        }
    }
    let ignored: Vec<&str> = [
        ("args", !fields.args.is_empty()),
        ("env", !fields.env.is_empty()),
        ("cwd", fields.cwd.is_some()),
    ]
    .into_iter()
    .filter_map(|(field, present)| present.then_some(field))
    .collect();
    if !ignored.is_empty() {
        r.notes.push(format!(
            "{} only apply to local servers and were not imported",
            ignored.join(", ")
        ));
    }
    let transport = ImportedTransport::Http {
        url,
        headers: imported,
        auth: crate::config::Auth::None,
    };
    Ok((transport, credentials_withheld))
}

/// An optional string field.
fn opt_string(map: &Map<String, Value>, key: &str) -> Result<Option<String>, EntryError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(format!("\"{key}\" must be a string, got {}", kind(other)).into()),
    }
}

/// An optional boolean field.
fn opt_bool(map: &Map<String, Value>, key: &str) -> Result<Option<bool>, EntryError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(other) => Err(format!("\"{key}\" must be true or false, got {}", kind(other)).into()),
    }
}

/// An optional array of strings (absent: empty).
fn string_list(map: &Map<String, Value>, key: &str) -> Result<Vec<String>, EntryError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| match item {
                Value::String(s) => Ok(s.clone()),
                other => Err(format!(
                    "\"{key}\" must be an array of strings; item {i} is {}",
                    kind(other)
                )
                .into()),
            })
            .collect(),
        Some(other) => {
            Err(format!("\"{key}\" must be an array of strings, got {}", kind(other)).into())
        }
    }
}

/// An optional object of strings (absent: empty), in key order.
fn string_map(map: &Map<String, Value>, key: &str) -> Result<Vec<(String, String)>, EntryError> {
    let mut out = match map.get(key) {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Object(entries)) => entries
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                other => Err(format!(
                    "\"{key}\" must be an object of strings; {k:?} is {}",
                    kind(other)
                )),
            })
            .collect::<Result<Vec<_>, _>>()?,
        Some(other) => {
            return Err(format!(
                "\"{key}\" must be an object of strings, got {}",
                kind(other)
            )
            .into());
        }
    };
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// A positive duration field in units of `1/per_second` seconds, rounded up to seconds.
/// Anything else is noted and ignored.
fn seconds(
    map: &Map<String, Value>,
    key: &str,
    per_second: f64,
    notes: &mut Vec<String>,
) -> Option<u64> {
    let value = map.get(key)?;
    match value.as_f64() {
        Some(n) if n.is_finite() && n > 0.0 => Some((n / per_second).ceil() as u64),
        _ => {
            notes.push(format!(
                "\"{key}\" is not a positive number and was ignored"
            ));
            None
        }
    }
}
