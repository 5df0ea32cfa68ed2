//! The operator's side: services managed with `airlock servers` (and `airlock import`),
//! kept in the registry with secret values in the secret store, merged with the config
//! files into the configuration Airlock runs.
//!
//! Every change is validated in full — the definition as Airlock would load it, every
//! secret value — before anything is written, so a bad change leaves the registry and the
//! store as they were.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::config::{
    Config, ConfigError, ConfigSources, ExtraServers, ServerConfig, TransportConfig,
};
use crate::registry::{
    Registry, RegistryError, Scope, ServiceKey, ServiceRecord, StoredTransport, StoredValue,
};
use crate::secrets::{SecretError, SecretStore, looks_like_credential, validate_secret};

/// The pseudo-path naming the registry as a server's source, per scope.
pub fn registry_source(scope: Scope) -> PathBuf {
    PathBuf::from(format!("registry:{scope}"))
}

/// Whether `source` is the registry (rather than a config file).
pub fn is_registry_source(source: &Path) -> bool {
    source.to_str().is_some_and(|s| s.starts_with("registry:"))
}

/// A failure of an `airlock servers` operation. Nothing was changed when one is returned.
#[derive(Debug, thiserror::Error)]
pub enum ServersError {
    /// The registry failed (or the name is taken: [`RegistryError::Exists`]).
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// The secret store failed.
    #[error(transparent)]
    Secrets(#[from] SecretError),
    /// The definition would not load.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The request itself is wrong (the message names the item).
    #[error("{0}")]
    Invalid(String),
}

fn invalid(message: impl Into<String>) -> ServersError {
    ServersError::Invalid(message.into())
}

/// Checks a service name: 1 to 64 of `A-Z a-z 0-9 _ -`.
pub fn validate_name(name: &str) -> Result<(), ServersError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if ok {
        Ok(())
    } else {
        Err(invalid(format!(
            "invalid server name {name:?}: use 1 to 64 letters, digits, '_' or '-'"
        )))
    }
}

/// A value given for an env var or header, and whether it is secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GivenValue {
    /// The value (empty in an edit of a secret means "keep the stored one").
    pub value: String,
    /// Whether it goes to the secret store.
    pub secret: bool,
}

/// How a new service is reached.
#[derive(Debug, Clone)]
pub enum DraftTransport {
    /// A local process.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments, verbatim.
        args: Vec<String>,
        /// Environment variables.
        env: BTreeMap<String, GivenValue>,
    },
    /// A remote server.
    Http {
        /// The endpoint.
        url: String,
        /// Headers.
        headers: BTreeMap<String, GivenValue>,
        /// `Some("oauth")` for OAuth servers.
        auth: Option<String>,
    },
}

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
    /// New auth (http): `Some(Some("oauth"))` turns OAuth on, `Some(None)` off.
    pub auth: Option<Option<String>>,
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

/// The registry-backed service manager for one project folder.
pub struct Servers {
    registry: Registry,
    store: SecretStore,
    project: String,
}

impl Servers {
    /// Opens the registry and secret store of `data_dir`, for commands run in `project`
    /// (an absolute folder; project-scope services belong to it).
    pub fn open(data_dir: &Path, project: &Path) -> Result<Servers, ServersError> {
        std::fs::create_dir_all(data_dir)
            .map_err(|e| invalid(format!("data directory \"{}\": {e}", data_dir.display())))?;
        Ok(Servers {
            registry: Registry::open(data_dir)?,
            store: SecretStore::open(data_dir)?,
            project: project.display().to_string(),
        })
    }

    /// The registry.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The secret store.
    pub fn store(&self) -> &SecretStore {
        &self.store
    }

    fn key(&self, scope: Scope, name: &str) -> ServiceKey {
        ServiceKey {
            scope,
            project: match scope {
                Scope::User => String::new(),
                Scope::Project => self.project.clone(),
            },
            name: name.to_string(),
        }
    }

    /// The full configuration: config files merged with the registry's services.
    pub fn load_config(
        &self,
        sources: &ConfigSources,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ServersError> {
        let mut extra = ExtraServers::default();
        for record in self.registry.services(&self.project)? {
            let server = self.loadable(&record, env)?;
            match record.key.scope {
                Scope::User => extra.user.push(server),
                Scope::Project => extra.project.push(server),
            }
        }
        Ok(Config::load_with(sources, extra, env)?)
    }

    /// A record as Airlock runs it. A `${VAR}` that no longer resolves (the variable was
    /// set when the server was added or imported) does not stop everything else: that
    /// server alone is marked for repair, naming the variable.
    fn loadable(
        &self,
        record: &ServiceRecord,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ServerConfig, ServersError> {
        match self.to_config(record, &BTreeMap::new(), env) {
            Ok(server) => Ok(server),
            Err(ServersError::Config(first)) => {
                let lenient = |name: &str| env(name).or(Some(String::new()));
                let mut server = self
                    .to_config(record, &BTreeMap::new(), &lenient)
                    .map_err(|_| ServersError::Config(first.clone()))?;
                server.repair.push(first.to_string());
                Ok(server)
            }
            Err(other) => Err(other),
        }
    }

    /// The launch digest of a record as it loads now (`None` when it does not load).
    fn digest_of(
        &self,
        record: &ServiceRecord,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Option<String> {
        self.loadable(record, env).ok().map(|s| s.launch_digest())
    }

    /// Turns a record into the server definition Airlock runs, validating it like a
    /// config entry. Secret values come from `pending` (values about to be stored) or the
    /// store; a missing one becomes a repair reason.
    fn to_config(
        &self,
        record: &ServiceRecord,
        pending: &BTreeMap<String, String>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ServerConfig, ServersError> {
        let name = &record.key.name;
        let mut entry = Map::new();
        let mut secret_names = Vec::new();
        let mut secret_refs: Vec<(String, String)> = Vec::new();
        let mut plain = |map: &BTreeMap<String, StoredValue>| -> Value {
            let mut out = Map::new();
            for (k, v) in map {
                match v {
                    StoredValue::Plain(p) => {
                        out.insert(k.clone(), json!(p));
                    }
                    StoredValue::Secret(r) => {
                        out.insert(k.clone(), json!(""));
                        secret_names.push(k.clone());
                        secret_refs.push((k.clone(), r.clone()));
                    }
                }
            }
            Value::Object(out)
        };
        match &record.transport {
            StoredTransport::Stdio { command, args, env } => {
                entry.insert("type".into(), json!("stdio"));
                entry.insert("command".into(), json!(command));
                entry.insert("args".into(), json!(args));
                entry.insert("env".into(), plain(env));
            }
            StoredTransport::Http { url, headers, auth } => {
                entry.insert("type".into(), json!("http"));
                entry.insert("url".into(), json!(url));
                entry.insert("headers".into(), plain(headers));
                if let Some(auth) = auth {
                    entry.insert("auth".into(), json!(auth));
                }
            }
        }
        let mut optional = |key: &str, value: Option<Value>| {
            if let Some(v) = value {
                entry.insert(key.into(), v);
            }
        };
        optional("cwd", record.cwd.as_ref().map(|c| json!(c)));
        optional("label", record.label.as_ref().map(|c| json!(c)));
        optional("description", record.description.as_ref().map(|c| json!(c)));
        optional(
            "startup_timeout_secs",
            record.startup_timeout_secs.map(|c| json!(c)),
        );
        optional(
            "tool_timeout_secs",
            record.tool_timeout_secs.map(|c| json!(c)),
        );
        optional("adapters", record.adapters.clone());
        optional("adapter_config", record.adapter_config.clone());
        entry.insert("enabled".into(), json!(record.enabled));
        entry.insert("secret_env".into(), json!(secret_names));
        let mut server = Config::parse_entry(
            name,
            &registry_source(record.key.scope),
            &Value::Object(entry),
            env,
        )?;
        server.repair = record.repair.clone();
        for (var, reference) in secret_refs {
            let value = match pending.get(&reference) {
                Some(v) => Some(v.clone()),
                None => self.store.get(&reference)?,
            };
            let Some(value) = value else {
                server.repair.push(format!(
                    "the secret value of \"{var}\" is missing from the secret store; set it again with `airlock servers edit {name} --env {var}=VALUE` (or --header)"
                ));
                continue;
            };
            match &mut server.transport {
                TransportConfig::Stdio { env, .. } => {
                    env.insert(var, value);
                }
                TransportConfig::Http { headers, .. } => {
                    headers.insert(var, value);
                }
            }
        }
        Ok(server)
    }

    /// Adds a service. Refuses a name already used in the same scope; validates the
    /// definition and every secret before writing anything.
    pub fn add(
        &self,
        draft: Draft,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ServiceRecord, ServersError> {
        validate_name(&draft.name)?;
        let key = self.key(draft.scope, &draft.name);
        if self.registry.service(&key)?.is_some() {
            return Err(RegistryError::Exists {
                name: draft.name,
                scope: draft.scope,
            }
            .into());
        }
        let mut pending = BTreeMap::new();
        let mut store_values = |kind: &str, map: BTreeMap<String, GivenValue>| {
            let mut out = BTreeMap::new();
            for (k, given) in map {
                if given.secret {
                    validate_secret(
                        &format!("{kind} {k} of server \"{}\"", draft.name),
                        &given.value,
                    )
                    .map_err(invalid)?;
                    let reference = crate::secrets::new_reference();
                    pending.insert(reference.clone(), given.value);
                    out.insert(k, StoredValue::Secret(reference));
                } else {
                    out.insert(k, StoredValue::Plain(given.value));
                }
            }
            Ok::<_, ServersError>(out)
        };
        let transport = match draft.transport {
            DraftTransport::Stdio { command, args, env } => StoredTransport::Stdio {
                command,
                args,
                env: store_values("env", env)?,
            },
            DraftTransport::Http { url, headers, auth } => StoredTransport::Http {
                url,
                headers: store_values("header", headers)?,
                auth,
            },
        };
        let record = ServiceRecord {
            key,
            label: draft.label.filter(|l| !l.is_empty()),
            description: draft.description.filter(|d| !d.is_empty()),
            transport,
            cwd: draft.cwd,
            enabled: draft.enabled,
            startup_timeout_secs: draft.startup_timeout_secs,
            tool_timeout_secs: draft.tool_timeout_secs,
            adapters: None,
            adapter_config: None,
            repair: draft.repair,
            origin: Some(draft.origin),
        };
        self.to_config(&record, &pending, env)?;
        self.commit(&pending, || self.registry.insert_service(&record))?;
        Ok(record)
    }

    /// Stores `pending` secrets, then runs `write`; when `write` fails the secrets just
    /// stored are deleted again, so nothing is left behind.
    fn commit(
        &self,
        pending: &BTreeMap<String, String>,
        write: impl FnOnce() -> Result<(), RegistryError>,
    ) -> Result<(), ServersError> {
        let mut stored: Vec<String> = Vec::new();
        for (reference, value) in pending {
            if let Err(e) = self.store.put(reference, value) {
                for r in &stored {
                    let _ = self.store.delete(r);
                }
                return Err(e.into());
            }
            stored.push(reference.clone());
        }
        if let Err(e) = write() {
            for r in &stored {
                let _ = self.store.delete(r);
            }
            return Err(e.into());
        }
        Ok(())
    }

    /// Finds the registry service `name`. With no scope given, a name present in both
    /// scopes is an error (the caller must choose), and a name defined only in a config
    /// file is an error naming the file.
    pub fn locate(
        &self,
        name: &str,
        scope: Option<Scope>,
        sources: &ConfigSources,
    ) -> Result<ServiceRecord, ServersError> {
        let scopes: Vec<Scope> = match scope {
            Some(s) => vec![s],
            None => vec![Scope::User, Scope::Project],
        };
        let mut found = Vec::new();
        for s in scopes {
            if let Some(record) = self.registry.service(&self.key(s, name))? {
                found.push(record);
            }
        }
        match found.len() {
            1 => Ok(found.pop().expect("one")),
            0 => {
                let in_file = Config::load(sources, &|_| Some(String::new()))
                    .ok()
                    .and_then(|c| c.servers.get(name).map(|s| s.source.clone()));
                Err(invalid(match (in_file, scope) {
                    (Some(file), _) => format!(
                        "server \"{name}\" is defined in \"{}\", not by `airlock servers`; change it in that file",
                        file.display()
                    ),
                    (None, Some(s)) => format!("no server named \"{name}\" in the {s} scope"),
                    (None, None) => format!("no server named \"{name}\""),
                }))
            }
            _ => Err(invalid(format!(
                "server \"{name}\" exists in both the user and the project scope; say which with --scope user or --scope project"
            ))),
        }
    }

    /// Removes a service, then its tested catalog, its OAuth tokens and its secrets.
    /// The row goes first (it is what Airlock loads); what follows is cleanup, and a
    /// failure there is logged rather than undoing the removal.
    pub fn remove(
        &self,
        record: &ServiceRecord,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(), ServersError> {
        let digest = self.digest_of(record, env);
        self.registry.delete_service(&record.key)?;
        let name = &record.key.name;
        if let Some(digest) = digest
            && let Err(e) = self.registry.delete_catalog(name, &digest)
        {
            tracing::warn!(service = %name, "cannot delete the tested catalog: {e}");
        }
        let still_named = self
            .registry
            .services(&self.project)
            .map(|all| all.iter().any(|r| &r.key.name == name))
            .unwrap_or(true);
        if !still_named && let Err(e) = crate::oauth::logout(&self.store, name) {
            tracing::warn!(service = %name, "cannot delete the OAuth tokens: {e}");
        }
        self.forget_secrets(name, record.secret_refs());
        Ok(())
    }

    fn forget_secrets(&self, name: &str, references: Vec<String>) {
        for reference in references {
            if let Err(e) = self.store.delete(&reference) {
                tracing::warn!(service = %name, "cannot delete a secret no longer used: {e}");
            }
        }
    }

    /// Enables or disables a service. Disabling makes its tested catalog stale: agents
    /// lose its tools until it is tested again. (The catalog goes first: if the row
    /// update then fails, the service is still enabled and merely needs a new test.)
    pub fn set_enabled(
        &self,
        record: &ServiceRecord,
        enabled: bool,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(), ServersError> {
        if !enabled && let Some(digest) = self.digest_of(record, env) {
            self.registry.delete_catalog(&record.key.name, &digest)?;
        }
        let mut changed = record.clone();
        changed.enabled = enabled;
        self.registry.update_service(&changed)?;
        Ok(())
    }

    /// Applies `edit` to `record`. Returns the new record and whether its launch
    /// changed (which makes a tested catalog stale).
    pub fn edit(
        &self,
        record: &ServiceRecord,
        edit: Edit,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(ServiceRecord, bool), ServersError> {
        let name = record.key.name.clone();
        let before = self.digest_of(record, env);
        let mut next = record.clone();
        let mut pending = BTreeMap::new();
        let mut dropped_refs = Vec::new();
        let text = |v: String| if v.is_empty() { None } else { Some(v) };
        if let Some(label) = edit.label {
            next.label = text(label);
        }
        if let Some(description) = edit.description {
            next.description = text(description);
        }
        if let Some(cwd) = edit.cwd {
            next.cwd = text(cwd);
        }
        if edit.tool_timeout_secs.is_some() {
            next.tool_timeout_secs = edit.tool_timeout_secs;
        }
        if edit.startup_timeout_secs.is_some() {
            next.startup_timeout_secs = edit.startup_timeout_secs;
        }
        if edit.clear_repair {
            next.repair.clear();
        }
        let (map, given, kind) = match &mut next.transport {
            StoredTransport::Stdio { command, args, env } => {
                if edit.url.is_some() || edit.auth.is_some() {
                    return Err(invalid(format!(
                        "server \"{name}\" is a stdio server; --url and --auth apply to http servers"
                    )));
                }
                if !edit.headers.is_empty() {
                    return Err(invalid(format!(
                        "server \"{name}\" is a stdio server; --header applies to http servers"
                    )));
                }
                if let Some(mut line) = edit.command {
                    if line.is_empty() {
                        return Err(invalid("the new command is empty"));
                    }
                    *command = line.remove(0);
                    *args = line;
                }
                (env, edit.env, "env")
            }
            StoredTransport::Http { url, headers, auth } => {
                if edit.command.is_some() || !edit.env.is_empty() {
                    return Err(invalid(format!(
                        "server \"{name}\" is an http server; a command and --env apply to stdio servers"
                    )));
                }
                if let Some(u) = edit.url {
                    *url = u;
                }
                if let Some(a) = edit.auth {
                    *auth = a;
                }
                (headers, edit.headers, "header")
            }
        };
        for key in &edit.unset {
            match map.remove(key) {
                Some(StoredValue::Secret(r)) => dropped_refs.push(r),
                Some(StoredValue::Plain(_)) => {}
                None => {
                    return Err(invalid(format!(
                        "server \"{name}\" has no {kind} \"{key}\" to remove"
                    )));
                }
            }
        }
        for (key, value) in given {
            let existing = map.get(&key).cloned();
            match existing {
                Some(StoredValue::Secret(reference)) => {
                    // A blank value keeps the stored secret. A new value goes under a
                    // new reference, so the old one survives until the row is updated.
                    if !value.value.is_empty() {
                        validate_secret(
                            &format!("{kind} {key} of server \"{name}\""),
                            &value.value,
                        )
                        .map_err(invalid)?;
                        let fresh = crate::secrets::new_reference();
                        pending.insert(fresh.clone(), value.value);
                        map.insert(key, StoredValue::Secret(fresh));
                        dropped_refs.push(reference);
                    }
                }
                _ if value.secret => {
                    validate_secret(&format!("{kind} {key} of server \"{name}\""), &value.value)
                        .map_err(invalid)?;
                    let reference = crate::secrets::new_reference();
                    pending.insert(reference.clone(), value.value);
                    map.insert(key, StoredValue::Secret(reference));
                }
                _ => {
                    map.insert(key, StoredValue::Plain(value.value));
                }
            }
        }
        let after = self.to_config(&next, &pending, env)?.launch_digest();
        self.commit(&pending, || self.registry.update_service(&next))?;
        self.forget_secrets(&name, dropped_refs);
        Ok((next, before.as_deref() != Some(after.as_str())))
    }

    /// `airlock servers list`: every effective server with its source, catalog state and
    /// what it overrides.
    pub fn list(&self, config: &Config) -> Result<Vec<Listing>, ServersError> {
        let mut out = Vec::new();
        for (name, server) in &config.servers {
            let source = server.source.display().to_string();
            let stored = self.registry.catalog(name, &server.launch_digest())?;
            let (catalog, tools) = match stored {
                Some(c) if server.enabled => ("tested", Some(c.tools.len())),
                _ if self.registry.has_catalog(name)? => ("stale", None),
                _ => ("untested", None),
            };
            // The same file can be read twice (as the project file and by --config).
            let overrides = config
                .definitions
                .get(name)
                .map(|all| {
                    all.iter()
                        .map(|s| s.display().to_string())
                        .filter(|s| *s != source)
                        .collect::<BTreeSet<_>>()
                })
                .unwrap_or_default()
                .into_iter()
                .collect();
            out.push(Listing {
                name: name.clone(),
                source,
                transport: match server.transport {
                    TransportConfig::Stdio { .. } => "stdio",
                    TransportConfig::Http { .. } => "http",
                },
                enabled: server.enabled,
                catalog,
                tools,
                repair: server.repair.clone(),
                overrides,
            });
        }
        Ok(out)
    }
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
