//! Configuration: the `airlock.toml` / JSON format, where the files live, how they merge
//! (a server defined in a later file replaces the earlier definition whole), `${VAR}`
//! expansion, and field-by-field validation with errors naming the server and the file.
//!
//! Layer 1 (config). May import: `secrets`, `digest`.

mod adapters;
mod auth;
mod auth_table;
mod error;
mod expand;
mod fields;
mod limits;
mod parse;
mod serve_auth;
mod source;
mod storage;
mod telemetry;
mod transport;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

pub use auth::{
    Auth, AuthKind, ClientCredentials, ClientKey, IdentityAssertion, OAuthClient, TokenExchange,
};
pub use error::{ConfigError, SettingError};
pub use expand::expand_vars;
pub use limits::{CallLimits, LimitsTable, Rate};
pub use serve_auth::{Introspection, ServeAuth, load_serve_auth};
pub use source::{Scope, Source, UnknownScope};
pub use storage::{
    DEFAULT_REGISTRY_SCHEMA, RegistryBounds, RegistryLocation, ResultsLocation, S3Location,
    Storage, TokenKey,
};
pub use telemetry::load_telemetry;
pub use transport::{MaskedDebug, TaggedValue, Transport, TransportConfig};

use crate::secrets::{KnownSecrets, looks_like_credential, url_credentials};

/// Default handshake/connection timeout (leaves room for `npx -y` downloads).
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(60);
/// Default per-call tool timeout.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(60);
/// Default grace period after a cancelled call.
pub const DEFAULT_CANCEL_GRACE: Duration = Duration::from_secs(10);

/// Which plugin serves a stage.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PluginRef {
    /// A plugin embedded in the host binary (`builtin:NAME`).
    Builtin(String),
    /// A `.wasm` component on disk (relative paths resolve against the config file).
    File(PathBuf),
    /// A plugin pinned by the SHA-256 of its bytes (`{ path = "…", sha256 = "…" }`):
    /// other bytes are refused at load, with both digests in the message.
    Pinned {
        /// The plugin (a builtin or a file).
        plugin: Box<PluginRef>,
        /// The expected digest, 64 lowercase hex digits.
        sha256: String,
    },
}

impl std::fmt::Display for PluginRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PluginRef::Builtin(name) => write!(f, "builtin:{name}"),
            PluginRef::File(path) => write!(f, "{}", path.display()),
            PluginRef::Pinned { plugin, .. } => plugin.fmt(f),
        }
    }
}

impl PluginRef {
    /// Parses `builtin:NAME` or a path, resolving relative paths against `base`.
    pub fn parse(text: &str, base: &Path) -> Result<Self, SettingError> {
        if let Some(name) = text.strip_prefix("builtin:") {
            if name.is_empty() {
                return Err("\"builtin:\" needs a plugin name, e.g. \"builtin:standard\"".into());
            }
            return Ok(PluginRef::Builtin(name.to_string()));
        }
        if text.is_empty() {
            return Err(
                "a plugin reference must be \"builtin:NAME\" or a path to a .wasm file".into(),
            );
        }
        let path = Path::new(text);
        Ok(PluginRef::File(if path.is_absolute() {
            path.to_path_buf()
        } else {
            base.join(path)
        }))
    }

    /// The same plugin pinned to `sha256` (64 hex digits, either case).
    pub fn pinned(self, sha256: &str) -> Result<Self, SettingError> {
        if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!(
                "\"sha256\" must be 64 hex digits (as `airlock plugin check` prints), got {sha256:?}"
            ).into());
        }
        Ok(PluginRef::Pinned {
            plugin: Box::new(self),
            sha256: sha256.to_ascii_lowercase(),
        })
    }
}

/// The plugins chosen for one service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Adapters {
    /// The naming stage.
    pub naming: PluginRef,
    /// The content stage.
    pub content: PluginRef,
    /// The redaction chain, applied in order.
    pub redaction: Vec<PluginRef>,
    /// The policy chain, consulted in order (empty: every call may run).
    pub policy: Vec<PluginRef>,
}

impl Default for Adapters {
    fn default() -> Self {
        let standard = PluginRef::Builtin("standard".into());
        Adapters {
            naming: standard.clone(),
            content: standard.clone(),
            redaction: vec![standard],
            policy: Vec::new(),
        }
    }
}

/// Per-stage plugin configuration tables (JSON objects; `{}` when absent).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AdapterConfig {
    /// For the naming plugin.
    pub naming: Value,
    /// For the content plugin.
    pub content: Value,
    /// For each redaction plugin, by position in the chain.
    pub redaction: Vec<Value>,
    /// For each policy plugin, by position in the chain.
    pub policy: Vec<PolicySettings>,
}

/// How one policy of the chain is applied, and its plugin's configuration.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PolicySettings {
    /// Enforce its decisions, or only record them.
    pub mode: PolicyMode,
    /// What a failure of the plugin (an error, a trap, a deadline) means.
    pub on_failure: OnFailure,
    /// The plugin's own configuration (its table without `mode` and `on_failure`).
    pub config: Value,
}

/// Whether a policy's decisions are enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PolicyMode {
    /// Denials deny, rewrites rewrite, asks ask.
    #[default]
    Enforce,
    /// Decisions are logged and sent as events; every call runs as it came.
    Audit,
}

/// What a policy plugin's failure means for the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OnFailure {
    /// The call is denied (the default).
    #[default]
    Closed,
    /// The failure is logged and the call goes on.
    Open,
}

/// One configured MCP server.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// The server's name (its key under `mcp_servers`).
    pub name: String,
    /// The file (or registry scope) that defines it.
    pub source: Source,
    /// How to reach it.
    pub transport: TransportConfig,
    /// The working directory (absolute).
    pub cwd: Option<PathBuf>,
    /// Whether Airlock connects to it.
    pub enabled: bool,
    /// Connection + handshake timeout.
    pub startup_timeout: Duration,
    /// Per-call timeout.
    pub tool_timeout: Duration,
    /// How long calls wait after a cancelled call, unless the server answers it first.
    pub cancel_grace: Duration,
    /// A human label (names the namespace in the `namespace` naming style).
    pub label: Option<String>,
    /// A description for agents.
    pub description: Option<String>,
    /// Env vars (and header names) whose values are secret, beyond the credential-like
    /// names recognized automatically.
    pub secret_env: BTreeSet<String>,
    /// The plugins per stage.
    pub adapters: Adapters,
    /// The plugins' configuration.
    pub adapter_config: AdapterConfig,
    /// Credential-named variables (`${GITHUB_TOKEN}`) the definition referenced, with
    /// their values: known secrets even when they were expanded into `args` or `url`.
    pub referenced_secrets: KnownSecrets,
    /// Why the definition cannot work until someone fixes it (a secret missing from the
    /// store, an env reference an import could not resolve…). A service with repair
    /// reasons is reported failed and never launched.
    pub repair: Vec<String>,
    /// How hard clients may press on it (from the `[limits]` tables).
    pub limits: CallLimits,
}

impl ServerConfig {
    /// Whether the server is reached as each calling user (token exchange, or OAuth
    /// with `per_agent = true`): see [`Auth::acts_as_caller`].
    pub fn acts_as_caller(&self) -> bool {
        matches!(&self.transport, Transport::Http { auth, .. } if auth.acts_as_caller())
    }

    /// A digest of everything that decides how the service launches: the transport,
    /// command, args, cwd, env, URL, headers and auth. Secret values enter only as their
    /// names, so the digest reveals nothing. A tested catalog is fresh while this digest
    /// is unchanged; the label, description, timeouts and plugins do not count.
    pub fn launch_digest(&self) -> String {
        let known = self.known_secrets();
        let secret_names: BTreeSet<&str> = known.iter().map(|s| s.name.as_str()).collect();
        let masked = |map: &BTreeMap<String, String>| -> BTreeMap<String, String> {
            map.iter()
                .map(|(k, v)| {
                    let shown = if secret_names.contains(k.as_str()) {
                        "<secret>".to_string()
                    } else {
                        v.clone()
                    };
                    (k.clone(), shown)
                })
                .collect()
        };
        let launch = match &self.transport {
            Transport::Stdio { command, args, env } => serde_json::json!({
                "type": "stdio", "command": command, "args": args, "env": masked(env),
                "cwd": self.cwd,
            }),
            Transport::Http { url, headers, auth } => serde_json::json!({
                "type": "http", "url": known.scrub(url), "headers": masked(headers),
                "auth": auth.as_config(),
            }),
        };
        crate::digest::sha256(launch.to_string().as_bytes())
    }

    /// The values this service must never let out, by name: env vars and headers marked
    /// in `secret_env` or named like credentials, credentials written into the URL, and
    /// credential-named variables expanded anywhere in the definition. For a header like
    /// `Authorization: Bearer X` both the whole value and the token after the scheme are
    /// known.
    pub fn known_secrets(&self) -> KnownSecrets {
        let mut found: Vec<(String, String)> = Vec::new();
        let is_secret = |name: &str| self.secret_env.contains(name) || looks_like_credential(name);
        match &self.transport {
            Transport::Stdio { env, .. } => {
                for (k, v) in env {
                    if is_secret(k) && !v.is_empty() {
                        found.push((k.clone(), v.clone()));
                    }
                }
            }
            Transport::Http {
                headers, url, auth, ..
            } => {
                found.extend(url_credentials(url));
                found.extend(auth.secrets());
                for (k, v) in headers {
                    if is_secret(k) && !v.is_empty() {
                        found.push((k.clone(), v.clone()));
                        if let Some((_, token)) = v.split_once(' ')
                            && !token.trim().is_empty()
                        {
                            found.push((k.clone(), token.trim().to_string()));
                        }
                    }
                }
            }
        }
        // Credential-named variables expanded elsewhere (args, url), unless the same
        // value is already known under its env or header name.
        for secret in self.referenced_secrets.iter() {
            if !found.iter().any(|(_, v)| *v == secret.value) {
                found.push((secret.name.clone(), secret.value.clone()));
            }
        }
        found.into_iter().collect()
    }
}

/// A server definition as written, before `${VAR}` expansion and the checks on values:
/// what a config file's entry reads as, and what the registry keeps. [`ServerEntry::resolve`]
/// turns it into the [`ServerConfig`] Airlock runs.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerEntry {
    /// How to reach the server (values unexpanded).
    pub transport: Transport<String>,
    /// The working directory (must be absolute).
    pub cwd: Option<String>,
    /// Whether Airlock connects to it.
    pub enabled: bool,
    /// Connection + handshake timeout, seconds (default 60).
    pub startup_timeout_secs: Option<f64>,
    /// Per-call timeout, seconds (default 60).
    pub tool_timeout_secs: Option<f64>,
    /// Grace period after a cancelled call, seconds (default 10).
    pub cancel_grace_secs: Option<f64>,
    /// A human label.
    pub label: Option<String>,
    /// A description for agents.
    pub description: Option<String>,
    /// Env vars (and header names) whose values are secret.
    pub secret_env: BTreeSet<String>,
    /// The plugins per stage, in config syntax.
    pub adapters: Option<Value>,
    /// The plugins' configuration, in config syntax.
    pub adapter_config: Option<Value>,
}

/// Server definitions that do not come from files (the registry), merged in with the
/// files: user-scope ones after the user file, project-scope ones after the project file.
#[derive(Debug, Clone, Default)]
pub struct ExtraServers {
    /// Applied after the user file.
    pub user: Vec<ServerConfig>,
    /// Applied after the project file (and before `--config` files).
    pub project: Vec<ServerConfig>,
}

/// Sandbox limits applied to every plugin call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SandboxLimits {
    /// CPU deadline per call.
    pub deadline: Duration,
    /// Linear memory cap per instance, in bytes.
    pub memory_bytes: usize,
    /// WebAssembly stack cap, in bytes.
    pub stack_bytes: usize,
}

impl Default for SandboxLimits {
    fn default() -> Self {
        SandboxLimits {
            deadline: Duration::from_secs(2),
            memory_bytes: 64 << 20,
            stack_bytes: 512 << 10,
        }
    }
}

/// The merged configuration of every file read.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// Servers by name.
    pub servers: BTreeMap<String, ServerConfig>,
    /// Plugin sandbox limits.
    pub sandbox: SandboxLimits,
    /// Where the registry and retained results live (`[registry]`, `[results]`).
    pub storage: Storage,
    /// The merged `[limits]` tables (already applied to each of `servers`).
    pub limits: LimitsTable,
    /// The files that were read, in order.
    pub files: Vec<PathBuf>,
    /// Every source that defined each server, in the order they were merged (the last
    /// one is the definition in effect).
    pub definitions: BTreeMap<String, Vec<Source>>,
}

/// Where configuration files are looked for.
#[derive(Debug, Clone, Default)]
pub struct ConfigSources {
    /// The user file (skipped when it does not exist).
    pub user: Option<PathBuf>,
    /// The project file (skipped when it does not exist).
    pub project: Option<PathBuf>,
    /// Files named with `--config`, which must exist; read last, in order.
    pub explicit: Vec<PathBuf>,
}

impl ConfigSources {
    /// Every file these sources name, whether it exists now or not.
    pub fn files(&self) -> Vec<PathBuf> {
        self.user
            .iter()
            .chain(self.project.iter())
            .chain(self.explicit.iter())
            .cloned()
            .collect()
    }

    /// The default places: `$AIRLOCK_CONFIG` or the platform config folder's
    /// `airlock/airlock.toml` for the user, and `./airlock.toml` (or `./airlock.json`) in
    /// `cwd` for the project.
    pub fn discover(cwd: &Path, explicit: Vec<PathBuf>) -> Self {
        let user = std::env::var_os("AIRLOCK_CONFIG")
            .map(PathBuf::from)
            .or_else(|| {
                directories::ProjectDirs::from("", "", "airlock")
                    .map(|d| d.config_dir().join("airlock.toml"))
            });
        let project = ["airlock.toml", "airlock.json"]
            .iter()
            .map(|n| cwd.join(n))
            .find(|p| p.exists());
        ConfigSources {
            user,
            project,
            explicit,
        }
    }
}

impl Config {
    /// Reads and merges every source, then expands `${VAR}` from `env` and validates.
    pub fn load(
        sources: &ConfigSources,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        Config::load_with(sources, ExtraServers::default(), env)
    }

    /// Like [`Config::load`], with registry definitions merged in at their scope's place:
    /// user file, user registry, project file, project registry, `--config` files. A later
    /// definition of a name replaces an earlier one whole.
    pub fn load_with(
        sources: &ConfigSources,
        extra: ExtraServers,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        enum Layer {
            File(PathBuf, bool),
            Servers(Vec<ServerConfig>),
        }
        enum Entry {
            Raw(PathBuf, Value),
            Parsed(Box<ServerConfig>),
        }
        let mut layers: Vec<Layer> = Vec::new();
        layers.extend(sources.user.iter().map(|p| Layer::File(p.clone(), false)));
        layers.push(Layer::Servers(extra.user));
        layers.extend(
            sources
                .project
                .iter()
                .map(|p| Layer::File(p.clone(), false)),
        );
        layers.push(Layer::Servers(extra.project));
        layers.extend(
            sources
                .explicit
                .iter()
                .map(|p| Layer::File(p.clone(), true)),
        );
        let mut config = Config::default();
        let mut raw_servers: BTreeMap<String, Entry> = BTreeMap::new();
        for layer in layers {
            let (file, required) = match layer {
                Layer::File(file, required) => (file, required),
                Layer::Servers(servers) => {
                    for server in servers {
                        config
                            .definitions
                            .entry(server.name.clone())
                            .or_default()
                            .push(server.source.clone());
                        raw_servers.insert(server.name.clone(), Entry::Parsed(Box::new(server)));
                    }
                    continue;
                }
            };
            let text = match std::fs::read_to_string(&file) {
                Ok(t) => t,
                Err(e) if !required && e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    return Err(ConfigError::Read {
                        file,
                        message: e.to_string(),
                    });
                }
            };
            let document = parse::parse_document(&file, &text)?;
            if let Some(limits) = document.sandbox {
                config.sandbox = limits;
            }
            if let Some(limits) = &document.limits {
                config.limits.overlay(limits);
            }
            document.apply_storage(&file, &mut config.storage, env)?;
            for (name, value) in document.servers {
                config
                    .definitions
                    .entry(name.clone())
                    .or_default()
                    .push(Source::File(file.clone()));
                raw_servers.insert(name, Entry::Raw(file.clone(), value));
            }
            config.files.push(file);
        }
        for (name, entry) in raw_servers {
            let server = match entry {
                Entry::Raw(file, value) => {
                    parse::parse_server(&name, &Source::File(file), &value, env)?
                }
                Entry::Parsed(server) => *server,
            };
            config.servers.insert(name, server);
        }
        config.apply_limits();
        Ok(config)
    }

    /// Validates one server entry given in config syntax (a JSON object), as if it were
    /// `mcp_servers.NAME` in `source`.
    pub fn parse_entry(
        name: &str,
        source: &Source,
        entry: &Value,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ServerConfig, ConfigError> {
        parse::parse_server(name, source, entry, env)
    }

    /// Parses a single document held in memory (used for the bundled demo config).
    pub fn from_str(
        file: &Path,
        text: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let document = parse::parse_document(file, text)?;
        let mut config = Config {
            sandbox: document.sandbox.unwrap_or_default(),
            files: vec![file.into()],
            ..Default::default()
        };
        document.apply_storage(file, &mut config.storage, env)?;
        for (name, value) in document.servers {
            let server = parse::parse_server(&name, &Source::File(file.into()), &value, env)?;
            config.servers.insert(name, server);
        }
        if let Some(limits) = &document.limits {
            config.limits.overlay(limits);
        }
        config.apply_limits();
        Ok(config)
    }

    /// Sets each server's limits from the merged `[limits]` tables. A table naming no
    /// configured server is kept (the server may come back) and warned about: it is
    /// most likely a typo.
    fn apply_limits(&mut self) {
        for (name, server) in &mut self.servers {
            server.limits = self.limits.for_service(name);
        }
        for name in self.limits.named_services() {
            if !self.servers.contains_key(name) {
                tracing::warn!(
                    "[limits.services.{name}] names no configured server; its limits apply to none"
                );
            }
        }
    }
}

/// Reads variables from the host process environment.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}
