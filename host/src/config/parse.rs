//! Field-by-field validation of config documents (TOML or JSON).

use super::SettingError;
use super::fields::{Fields, kind, string_list};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::{
    ConfigError, DEFAULT_CANCEL_GRACE, DEFAULT_STARTUP_TIMEOUT, DEFAULT_TOOL_TIMEOUT,
    SandboxLimits, ServerConfig, ServerEntry, Source, Transport, expand_vars,
};
use crate::config::Auth;
use crate::secrets::{KnownSecrets, looks_like_credential};

/// The top level of one file.
pub(super) struct Document {
    pub servers: Vec<(String, Value)>,
    pub sandbox: Option<SandboxLimits>,
    /// The `[registry]` table, unexpanded.
    pub registry: Option<Value>,
    /// The `[results]` table, unexpanded.
    pub results: Option<Value>,
    /// The `[telemetry]` table, unexpanded.
    pub telemetry: Option<Value>,
    /// The `[serve]` table, unexpanded.
    pub serve: Option<Value>,
    /// The `[limits]` table.
    pub limits: Option<super::LimitsTable>,
}

/// Each file of `sources` that exists (an explicit `--config` file must), parsed, in
/// merge order: user, project, explicit.
pub(super) fn read_documents(
    sources: &super::ConfigSources,
) -> Result<Vec<(PathBuf, Document)>, ConfigError> {
    let files = sources
        .user
        .iter()
        .chain(&sources.project)
        .map(|f| (f, false))
        .chain(sources.explicit.iter().map(|f| (f, true)));
    let mut documents = Vec::new();
    for (file, required) in files {
        let text = match std::fs::read_to_string(file) {
            Ok(t) => t,
            Err(e) if !required && e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                return Err(ConfigError::Read {
                    file: file.clone(),
                    message: e.to_string(),
                });
            }
        };
        documents.push((file.clone(), parse_document(file, &text)?));
    }
    Ok(documents)
}

const SERVER_KEYS: &[&str] = &[
    "type",
    "transport",
    "command",
    "args",
    "cwd",
    "env",
    "url",
    "headers",
    "auth",
    "enabled",
    "startup_timeout_secs",
    "startup_timeout_sec",
    "tool_timeout_secs",
    "tool_timeout_sec",
    "cancel_grace_secs",
    "cancel_grace_sec",
    "label",
    "description",
    "secret_env",
    "adapters",
    "adapter_config",
];

/// Parses a file's text as JSON (`.json`) or TOML (anything else).
pub(super) fn parse_document(file: &Path, text: &str) -> Result<Document, ConfigError> {
    let file_err = |e: SettingError| ConfigError::File {
        file: file.to_path_buf(),
        message: e.message,
    };
    let is_json = file
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"));
    let root: Value = if is_json {
        serde_json::from_str(text).map_err(|e| file_err(format!("not valid JSON: {e}").into()))?
    } else {
        let table: toml::Table =
            toml::from_str(text).map_err(|e| file_err(format!("not valid TOML: {e}").into()))?;
        serde_json::to_value(table).map_err(|e| file_err(e.to_string().into()))?
    };
    let Value::Object(root) = root else {
        return Err(file_err(
            format!("the top level must be a table, got {}", kind(&root)).into(),
        ));
    };
    let mut servers = Vec::new();
    let (mut sandbox, mut registry, mut results, mut telemetry) = (None, None, None, None);
    let (mut limits, mut serve) = (None, None);
    for (key, value) in root {
        match key.as_str() {
            "mcp_servers" | "mcpServers" | "servers" => {
                let Value::Object(map) = value else {
                    return Err(file_err(
                        format!("\"{key}\" must be a table of servers, got {}", kind(&value))
                            .into(),
                    ));
                };
                servers.extend(map);
            }
            "sandbox" => sandbox = Some(parse_sandbox(&value).map_err(file_err)?),
            "registry" => registry = Some(value),
            "results" => results = Some(value),
            "telemetry" => telemetry = Some(value),
            "serve" => serve = Some(value),
            "limits" => limits = Some(super::LimitsTable::parse(&value).map_err(file_err)?),
            other => {
                return Err(file_err(format!(
                    "unknown top-level key \"{other}\" (expected \"mcp_servers\", \"sandbox\", \"registry\", \"results\", \"telemetry\", \"serve\" or \"limits\")"
                ).into()));
            }
        }
    }
    Ok(Document {
        servers,
        sandbox,
        registry,
        results,
        telemetry,
        serve,
        limits,
    })
}

fn parse_sandbox(value: &Value) -> Result<SandboxLimits, SettingError> {
    let Value::Object(map) = value else {
        return Err(format!("\"sandbox\" must be a table, got {}", kind(value)).into());
    };
    let mut limits = SandboxLimits::default();
    for (key, v) in map {
        let n = v.as_u64().filter(|n| *n > 0).ok_or_else(|| {
            format!(
                "\"sandbox.{key}\" must be a positive integer, got {}",
                kind(v)
            )
        })?;
        match key.as_str() {
            "deadline_ms" => limits.deadline = Duration::from_millis(n),
            "memory_mib" => limits.memory_bytes = (n as usize) << 20,
            "stack_kib" => limits.stack_bytes = (n as usize) << 10,
            other => {
                return Err(format!(
                    "unknown key \"sandbox.{other}\" (expected deadline_ms, memory_mib, stack_kib)"
                )
                .into());
            }
        }
    }
    Ok(limits)
}

/// Reads one server entry of a file (checking each field's type and the shape of the
/// definition), then resolves it ([`ServerEntry::resolve`]): `${VAR}` expansion and the
/// checks on values.
pub(super) fn parse_server(
    name: &str,
    source: &Source,
    value: &Value,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ServerConfig, ConfigError> {
    read_entry(name, source, value)?.resolve(name, source, env)
}

fn read_entry(name: &str, source: &Source, value: &Value) -> Result<ServerEntry, ConfigError> {
    let err = |e: SettingError| ConfigError::Server {
        server: name.to_string(),
        defined_in: source.clone(),
        message: e.message,
    };
    if name.is_empty() {
        return Err(err("a server name must not be empty".into()));
    }
    let Value::Object(map) = value else {
        return Err(err(format!(
            "the entry must be a table, got {}",
            kind(value)
        )
        .into()));
    };
    if let Some(key) = map.keys().find(|k| !SERVER_KEYS.contains(&k.as_str())) {
        return Err(err(format!("unknown field \"{key}\"").into()));
    }
    let f = Fields { map };
    let transport = read_transport(&f).map_err(err)?;
    let secs = |keys: [&str; 2]| -> Result<Option<f64>, ConfigError> {
        for key in keys {
            if let Some(v) = map.get(key) {
                return match v.as_f64() {
                    Some(n) if n > 0.0 && n.is_finite() => Ok(Some(n)),
                    _ => Err(err(format!(
                        "\"{key}\" must be a positive number of seconds"
                    )
                    .into())),
                };
            }
        }
        Ok(None)
    };
    Ok(ServerEntry {
        transport,
        cwd: f.string("cwd").map_err(err)?,
        enabled: f.bool("enabled").map_err(err)?.unwrap_or(true),
        startup_timeout_secs: secs(["startup_timeout_secs", "startup_timeout_sec"])?,
        tool_timeout_secs: secs(["tool_timeout_secs", "tool_timeout_sec"])?,
        cancel_grace_secs: secs(["cancel_grace_secs", "cancel_grace_sec"])?,
        label: f.string("label").map_err(err)?,
        description: f.string("description").map_err(err)?,
        secret_env: f
            .string_list("secret_env")
            .map_err(err)?
            .unwrap_or_default()
            .into_iter()
            .collect(),
        adapters: map.get("adapters").cloned(),
        adapter_config: map.get("adapter_config").cloned(),
    })
}

/// The transport as written: `type` (declared or inferred), `command` (a string, or an
/// array holding the program and its arguments, as some clients write it) with `args`
/// and `env`, or `url` with `headers` and `auth`.
fn read_transport(f: &Fields<'_>) -> Result<Transport<String>, SettingError> {
    let (command, mut args) = match f.map.get("command") {
        None => (None, Vec::new()),
        Some(Value::String(s)) if s.is_empty() => {
            return Err("\"command\" must not be empty".into());
        }
        Some(Value::String(s)) => (Some(s.clone()), Vec::new()),
        Some(Value::Array(items)) => {
            let parts =
                string_list(items).map_err(|i| format!("\"command[{i}]\" must be a string"))?;
            match parts.split_first() {
                Some((program, rest)) if !program.is_empty() => {
                    (Some(program.clone()), rest.to_vec())
                }
                _ => return Err("\"command\" must not be empty".into()),
            }
        }
        Some(other) => {
            return Err(format!("\"command\" must be a string, got {}", kind(other)).into());
        }
    };
    if let Some(extra) = f.string_list("args")? {
        args.extend(extra);
    }
    let url = f.string("url")?;
    let declared = match (f.string("type")?, f.string("transport")?) {
        (Some(t), _) | (None, Some(t)) => Some(t),
        (None, None) => None,
    };
    let is_stdio = match declared.as_deref() {
        Some("stdio") => true,
        Some("http") | Some("streamable-http") | Some("streamableHttp") | Some("sse") => false,
        Some(other) => {
            return Err(format!("\"type\" must be \"stdio\" or \"http\", got \"{other}\"").into());
        }
        None => match (&command, &url) {
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(_), Some(_)) => {
                return Err(
                    "both \"command\" and \"url\" are set; add \"type\" = \"stdio\" or \"http\""
                        .into(),
                );
            }
            (None, None) => {
                return Err(
                    "\"type\" is missing: set \"stdio\" (with \"command\") or \"http\" (with \"url\")"
                        .into(),
                );
            }
        },
    };
    let env = f.string_map("env")?.unwrap_or_default();
    let headers = f.string_map("headers")?.unwrap_or_default();
    if is_stdio {
        let command = command.ok_or("\"command\" is required for a stdio server")?;
        if url.is_some() || !headers.is_empty() {
            return Err("\"url\" and \"headers\" belong to http servers, not stdio".into());
        }
        Ok(Transport::Stdio { command, args, env })
    } else {
        let url = url.ok_or("\"url\" is required for an http server")?;
        if command.is_some() {
            return Err("\"command\" belongs to stdio servers, not http".into());
        }
        let auth = match f.map.get("auth") {
            Some(Value::Object(table)) => super::auth_table::parse_auth_table(table)?,
            _ => Auth::parse(f.string("auth")?.as_deref())?,
        };
        Ok(Transport::Http { url, headers, auth })
    }
}

impl ServerEntry {
    /// Expands `${VAR}` references from `env` (in command, args, env, url and headers)
    /// and checks every value, giving the server Airlock runs. Credential-named
    /// variables referenced anywhere become known secrets, whatever field they end up
    /// in. Errors name the server and `source`.
    pub fn resolve(
        self,
        name: &str,
        source: &Source,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ServerConfig, ConfigError> {
        let err = |e: SettingError| ConfigError::Server {
            server: name.to_string(),
            defined_in: source.clone(),
            message: e.message,
        };
        let referenced = std::cell::RefCell::new(Vec::<(String, String)>::new());
        let recording = |var: &str| {
            let value = env(var);
            if let Some(v) = &value
                && looks_like_credential(var)
                && !v.is_empty()
            {
                referenced
                    .borrow_mut()
                    .push((format!("${{{var}}}"), v.clone()));
            }
            value
        };
        let expand = |field: &str, text: &str| {
            expand_vars(text, &recording).map_err(|m| err(format!("\"{field}\": {m}").into()))
        };
        let transport = match self.transport {
            Transport::Stdio { command, args, env } => {
                let command = expand("command", &command)?;
                let args = args
                    .iter()
                    .enumerate()
                    .map(|(i, a)| expand(&format!("args[{i}]"), a))
                    .collect::<Result<Vec<_>, _>>()?;
                let mut expanded = BTreeMap::new();
                for (k, v) in env {
                    if k.is_empty() || k.contains('=') || k.contains('\0') {
                        return Err(err(
                            format!("\"env\" has an invalid variable name {k:?}").into()
                        ));
                    }
                    let v = expand(&format!("env.{k}"), &v)?;
                    if v.contains('\0') {
                        return Err(err(format!("\"env.{k}\" contains a NUL character").into()));
                    }
                    expanded.insert(k, v);
                }
                Transport::Stdio {
                    command,
                    args,
                    env: expanded,
                }
            }
            Transport::Http { url, headers, auth } => {
                let url = expand("url", &url)?;
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(err(format!(
                        "\"url\" must start with http:// or https://, got {url:?}"
                    )
                    .into()));
                }
                let mut expanded = BTreeMap::new();
                for (k, v) in headers {
                    let v = expand(&format!("headers.{k}"), &v)?;
                    expanded.insert(k, v);
                }
                let auth = auth.try_map_strings(|field, v| {
                    let v = expand(field, &v)?;
                    if v.is_empty() {
                        return Err(err(format!("\"{field}\" is empty").into()));
                    }
                    Ok(v)
                })?;
                Transport::Http {
                    url,
                    headers: expanded,
                    auth,
                }
            }
        };
        let cwd = match self.cwd {
            None => None,
            Some(c) if Path::new(&c).is_absolute() => Some(PathBuf::from(c)),
            Some(c) => {
                return Err(err(
                    format!("\"cwd\" must be an absolute path, got {c:?}").into()
                ));
            }
        };
        let secs = |key: &str, value: Option<f64>, default: Duration| match value {
            None => Ok(default),
            Some(n) if n > 0.0 && n.is_finite() => Ok(Duration::from_secs_f64(n)),
            Some(_) => Err(err(format!(
                "\"{key}\" must be a positive number of seconds"
            )
            .into())),
        };
        let base = source.base_dir();
        let adapters =
            super::adapters::parse_adapters(self.adapters.as_ref(), base).map_err(err)?;
        let adapter_config =
            super::adapters::parse_adapter_config(self.adapter_config.as_ref(), &adapters)
                .map_err(err)?;
        Ok(ServerConfig {
            name: name.to_string(),
            source: source.clone(),
            transport,
            cwd,
            enabled: self.enabled,
            startup_timeout: secs(
                "startup_timeout_secs",
                self.startup_timeout_secs,
                DEFAULT_STARTUP_TIMEOUT,
            )?,
            tool_timeout: secs(
                "tool_timeout_secs",
                self.tool_timeout_secs,
                DEFAULT_TOOL_TIMEOUT,
            )?,
            cancel_grace: secs(
                "cancel_grace_secs",
                self.cancel_grace_secs,
                DEFAULT_CANCEL_GRACE,
            )?,
            label: self.label,
            description: self.description,
            secret_env: self.secret_env,
            adapters,
            adapter_config,
            repair: Vec::new(),
            limits: Default::default(),
            referenced_secrets: referenced.take().into_iter().collect::<KnownSecrets>(),
        })
    }
}
