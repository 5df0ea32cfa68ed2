//! Where state lives: the `[registry]` and `[results]` tables of a config file.
//!
//! ```toml
//! [registry]
//! url = "postgres://airlock:${PGPASSWORD}@db.internal:5432/airlock"
//! schema = "airlock"            # optional; one schema per deployment
//! timeout_secs = 5              # optional: one statement's bound, connecting included
//! outage_grace_secs = 300       # optional: how long a verified token or grant outlives
//!                               # an outage (0: not at all)
//! token_key = "${AIRLOCK_TOKEN_KEY}"  # optional: 32 bytes (64 hex digits or base64)
//!                               # sealing each agent's own upstream tokens, which then
//!                               # live in the registry and work through every replica
//!
//! [results]
//! store = "s3://airlock-results/team-a"
//! endpoint = "http://127.0.0.1:9000"   # optional: an S3-compatible server
//! region = "us-east-1"
//! access_key_id = "${AWS_ACCESS_KEY_ID}"
//! secret_access_key = "secret:s3-results"  # a secret-store entry, or ${VAR}
//! ```
//!
//! Both default to local: SQLite and the `outputs/` folder in the data directory. A later
//! file's table replaces an earlier one whole. Values may use `${VAR}`; a value
//! `secret:NAME` is read from the secret store when the store is opened.

use super::SettingError;
use std::time::Duration;

use serde_json::{Map, Value};

use super::ConfigError;
use super::expand_vars;
use super::fields::kind;
use super::parse::Document;
use crate::secrets::{KnownSecrets, url_credentials};
use std::path::Path;

/// The PostgreSQL schema used when `[registry]` names none.
pub const DEFAULT_REGISTRY_SCHEMA: &str = "airlock";

/// Where the registry and retained results live.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Storage {
    /// The `[registry]` table.
    pub registry: RegistryLocation,
    /// The `[results]` table.
    pub results: ResultsLocation,
}

impl Storage {
    /// The credentials the settings hold (the database URL's password, the S3 secret
    /// key), to keep out of every message and log line.
    pub fn known_secrets(&self) -> KnownSecrets {
        let mut found: Vec<(String, String)> = Vec::new();
        if let RegistryLocation::Postgres { url, token_key, .. } = &self.registry {
            found.extend(url_credentials(url));
            if let Some(key) = token_key {
                found.push(("registry.token_key".into(), key.text.clone()));
            }
        }
        if let ResultsLocation::S3(s3) = &self.results
            && let Some(key) = &s3.secret_access_key
            && !key.starts_with("secret:")
        {
            found.push(("results.secret_access_key".into(), key.clone()));
        }
        found.into_iter().collect()
    }
}

/// `url` with the credentials written into it masked.
fn masked_url(url: &str) -> String {
    url_credentials(url)
        .into_iter()
        .collect::<KnownSecrets>()
        .scrub_owned(url)
}

/// Where the registry is.
#[derive(Clone, PartialEq, Eq, Default)]
pub enum RegistryLocation {
    /// SQLite in the data directory.
    #[default]
    Local,
    /// A PostgreSQL database shared by several hosts.
    Postgres {
        /// The connection URL (`postgres://user:password@host:port/database?sslmode=…`).
        url: String,
        /// The schema holding Airlock's tables (created when missing).
        schema: String,
        /// How long a statement may take and what an outage leaves working.
        bounds: RegistryBounds,
        /// The key sealing what replicas share there (`token_key`): each agent's own
        /// upstream tokens, and sign-ins under way. Without it those stay in each
        /// host's own secret store.
        token_key: Option<TokenKey>,
    },
}

/// A 32-byte key every replica is given (`[registry] token_key`).
#[derive(Clone, PartialEq, Eq)]
pub struct TokenKey {
    /// The key.
    pub bytes: [u8; 32],
    /// As written (kept out of every message and log).
    text: String,
}

impl std::fmt::Debug for TokenKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenKey(<secret>)")
    }
}

impl TokenKey {
    /// Reads 32 bytes written as 64 hex digits or base64; the error never repeats the
    /// value.
    pub fn parse(text: &str) -> Result<TokenKey, String> {
        use base64::Engine;
        let trimmed = text.trim();
        let decoded = if trimmed.len() == 64 && trimmed.chars().all(|c| c.is_ascii_hexdigit()) {
            hex::decode(trimmed).ok()
        } else {
            let unpadded = trimmed.trim_end_matches('=');
            base64::engine::general_purpose::STANDARD_NO_PAD
                .decode(unpadded)
                .or_else(|_| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(unpadded))
                .ok()
        };
        match decoded.and_then(|bytes| <[u8; 32]>::try_from(bytes).ok()) {
            Some(bytes) => Ok(TokenKey {
                bytes,
                text: trimmed.to_string(),
            }),
            None => Err(format!(
                "\"registry.token_key\" must be 32 bytes written as 64 hex digits or base64 (make one with `openssl rand -hex 32`); the value given ({} characters) is not",
                trimmed.chars().count()
            )),
        }
    }
}

/// How a shared registry is waited for, and what keeps working while it cannot be
/// reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegistryBounds {
    /// One statement's bound, connecting included (`timeout_secs`, default 5 s).
    pub timeout: Duration,
    /// How long a bearer token or grant the registry confirmed keeps working while the
    /// registry cannot be reached (`outage_grace_secs`, default 300 s; zero: not at
    /// all). A token or grant the registry was seen to refuse never does.
    pub outage_grace: Duration,
}

impl Default for RegistryBounds {
    fn default() -> Self {
        RegistryBounds {
            timeout: Duration::from_secs(5),
            outage_grace: Duration::from_secs(300),
        }
    }
}

impl std::fmt::Debug for RegistryLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RegistryLocation::Local => write!(f, "Local"),
            RegistryLocation::Postgres {
                url,
                schema,
                bounds,
                token_key,
            } => f
                .debug_struct("Postgres")
                .field("url", &masked_url(url))
                .field("schema", schema)
                .field("bounds", bounds)
                .field("token_key", token_key)
                .finish(),
        }
    }
}

/// Where retained results are kept.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ResultsLocation {
    /// The `outputs/` folder of the data directory.
    #[default]
    Local,
    /// An S3 bucket (AWS or any S3-compatible server).
    S3(S3Location),
}

/// An S3 bucket and how to reach it.
#[derive(Clone, PartialEq, Eq)]
pub struct S3Location {
    /// The bucket.
    pub bucket: String,
    /// The key prefix every object gets (no leading or trailing `/`; may be empty).
    pub prefix: String,
    /// The server, for S3-compatible stores (AWS's endpoint when absent).
    pub endpoint: Option<String>,
    /// The region (`us-east-1` when absent and the environment names none).
    pub region: Option<String>,
    /// The access key id (from the environment's `AWS_ACCESS_KEY_ID` when absent).
    pub access_key_id: Option<String>,
    /// The secret access key: a value, or `secret:NAME` for a secret-store entry.
    pub secret_access_key: Option<String>,
}

impl std::fmt::Debug for S3Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Location")
            .field("bucket", &self.bucket)
            .field("prefix", &self.prefix)
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("access_key_id", &self.access_key_id)
            .field(
                "secret_access_key",
                &self.secret_access_key.as_ref().map(|_| "<secret>"),
            )
            .finish()
    }
}

/// Parses a `[registry]` table, expanding `${VAR}` with `env`.
impl Storage {
    /// The `[registry]` and `[results]` settings of `sources` alone (later files win):
    /// what a command needs before it opens the registry, whose services the full
    /// [`super::Config::load_with`] merges in.
    pub fn load(
        sources: &super::ConfigSources,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Storage, super::ConfigError> {
        let mut storage = Storage::default();
        for (file, document) in super::parse::read_documents(sources)? {
            document.apply_storage(&file, &mut storage, env)?;
        }
        Ok(storage)
    }
}

pub(super) fn parse_registry(
    value: &Value,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<RegistryLocation, SettingError> {
    let table = table("registry", value)?;
    let mut url = None;
    let mut schema = DEFAULT_REGISTRY_SCHEMA.to_string();
    let mut bounds = RegistryBounds::default();
    let mut token_key = None;
    for (key, v) in table {
        match key.as_str() {
            "url" => url = Some(string("registry", key, v, env)?),
            "schema" => schema = string("registry", key, v, env)?,
            "timeout_secs" => bounds.timeout = seconds("registry", key, v, 0.1..=300.0)?,
            "outage_grace_secs" => {
                bounds.outage_grace = seconds("registry", key, v, 0.0..=86_400.0)?
            }
            "token_key" => {
                token_key = Some(TokenKey::parse(&string("registry", key, v, env)?)?);
            }
            other => {
                return Err(format!(
                    "unknown key \"registry.{other}\" (expected url, schema, timeout_secs, outage_grace_secs, token_key)"
                ).into());
            }
        }
    }
    let url = url.ok_or("\"registry.url\" is missing (postgres://user:password@host/db)")?;
    if url == "sqlite" || url == "local" {
        if token_key.is_some() {
            return Err("\"registry.token_key\" seals what replicas share through a PostgreSQL registry; a local registry keeps each agent's tokens in this host's secret store (remove token_key)".into());
        }
        return Ok(RegistryLocation::Local);
    }
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        return Err(format!(
            "\"registry.url\" must be a postgres:// URL (or \"local\"), got {:?}",
            masked_url(&url)
        )
        .into());
    }
    Ok(RegistryLocation::Postgres {
        url,
        schema,
        bounds,
        token_key,
    })
}

/// A number of seconds within `range`, as a duration.
fn seconds(
    table: &str,
    key: &str,
    value: &Value,
    range: std::ops::RangeInclusive<f64>,
) -> Result<Duration, SettingError> {
    match value.as_f64() {
        Some(secs) if range.contains(&secs) => Ok(Duration::from_secs_f64(secs)),
        Some(secs) => Err(format!(
            "\"{table}.{key}\" must be between {} and {} seconds, got {secs}",
            range.start(),
            range.end()
        )
        .into()),
        None => Err(format!(
            "\"{table}.{key}\" must be a number of seconds, got {}",
            kind(value)
        )
        .into()),
    }
}

/// Parses a `[results]` table, expanding `${VAR}` with `env`.
pub(super) fn parse_results(
    value: &Value,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ResultsLocation, SettingError> {
    let table = table("results", value)?;
    let mut store = None;
    let mut s3 = S3Location {
        bucket: String::new(),
        prefix: String::new(),
        endpoint: None,
        region: None,
        access_key_id: None,
        secret_access_key: None,
    };
    for (key, v) in table {
        let text = string("results", key, v, env)?;
        match key.as_str() {
            "store" => store = Some(text),
            "endpoint" => s3.endpoint = Some(text),
            "region" => s3.region = Some(text),
            "access_key_id" => s3.access_key_id = Some(text),
            "secret_access_key" => s3.secret_access_key = Some(text),
            other => {
                return Err(format!(
                    "unknown key \"results.{other}\" (expected store, endpoint, region, access_key_id, secret_access_key)"
                ).into());
            }
        }
    }
    let store =
        store.ok_or("\"results.store\" is missing (\"local\" or \"s3://bucket/prefix\")")?;
    if store == "local" {
        return Ok(ResultsLocation::Local);
    }
    let Some(rest) = store.strip_prefix("s3://") else {
        return Err(format!(
            "\"results.store\" must be \"local\" or \"s3://bucket/prefix\", got {store:?}"
        )
        .into());
    };
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err(format!("\"results.store\" names no bucket: {store:?}").into());
    }
    s3.bucket = bucket.to_string();
    s3.prefix = prefix.trim_matches('/').to_string();
    if let Some(endpoint) = &s3.endpoint
        && !(endpoint.starts_with("http://") || endpoint.starts_with("https://"))
    {
        return Err(format!(
            "\"results.endpoint\" must be an http:// or https:// URL, got {endpoint:?}"
        )
        .into());
    }
    Ok(ResultsLocation::S3(s3))
}

pub(super) fn table<'a>(
    name: &str,
    value: &'a Value,
) -> Result<&'a Map<String, Value>, SettingError> {
    value
        .as_object()
        .ok_or_else(|| format!("\"{name}\" must be a table, got {}", kind(value)).into())
}

pub(super) fn string(
    table: &str,
    key: &str,
    value: &Value,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<String, SettingError> {
    let text = value
        .as_str()
        .ok_or_else(|| format!("\"{table}.{key}\" must be a string, got {}", kind(value)))?;
    expand_vars(text, env).map_err(|e| format!("\"{table}.{key}\": {e}").into())
}

impl Document {
    /// Sets what this file's `[registry]` and `[results]` tables say (each replaces the
    /// earlier setting whole), expanding `${VAR}` with `env`.
    pub(super) fn apply_storage(
        &self,
        file: &Path,
        storage: &mut Storage,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(), ConfigError> {
        let file_err = |e: SettingError| ConfigError::File {
            file: file.to_path_buf(),
            message: e.message,
        };
        if let Some(registry) = &self.registry {
            storage.registry = parse_registry(registry, env).map_err(file_err)?;
        }
        if let Some(results) = &self.results {
            storage.results = parse_results(results, env).map_err(file_err)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn registry(table: Value) -> Result<RegistryLocation, SettingError> {
        parse_registry(&table, &|_| None)
    }

    #[test]
    fn the_token_key_is_32_bytes_and_never_repeated_in_its_error() {
        let url = "postgres://u:p@127.0.0.1:5432/db";
        let hex_key = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
        let RegistryLocation::Postgres { token_key, .. } =
            registry(json!({"url": url, "token_key": hex_key})).unwrap()
        else {
            panic!("a postgres URL is PostgreSQL")
        };
        assert_eq!(token_key.unwrap().bytes[1], 0x11);
        use base64::Engine;
        let b64 = base64::engine::general_purpose::STANDARD.encode([9u8; 32]);
        let RegistryLocation::Postgres { token_key, .. } =
            registry(json!({"url": url, "token_key": b64})).unwrap()
        else {
            panic!("a postgres URL is PostgreSQL")
        };
        assert_eq!(token_key.unwrap().bytes, [9u8; 32]);
        let short = registry(json!({"url": url, "token_key": "hunter2-but-longer"}))
            .unwrap_err()
            .to_string();
        assert!(
            short.contains("must be 32 bytes") && !short.contains("hunter2"),
            "{short}"
        );
        let local = registry(json!({"url": "local", "token_key": hex_key}))
            .unwrap_err()
            .to_string();
        assert!(local.contains("PostgreSQL registry"), "{local}");
        let storage = Storage {
            registry: registry(json!({"url": url, "token_key": hex_key})).unwrap(),
            results: ResultsLocation::default(),
        };
        let scrubbed = storage.known_secrets().scrub_owned(hex_key);
        assert!(
            !scrubbed.contains(hex_key) && scrubbed.contains("registry.token_key"),
            "{scrubbed}"
        );
    }

    #[test]
    fn registry_bounds_are_read_and_default() {
        let url = "postgres://u:p@127.0.0.1:5432/db";
        let RegistryLocation::Postgres { bounds, .. } = registry(json!({"url": url})).unwrap()
        else {
            panic!("a postgres URL is PostgreSQL")
        };
        assert_eq!(bounds, RegistryBounds::default());
        let RegistryLocation::Postgres { bounds, .. } = registry(json!({
            "url": url, "timeout_secs": 1.5, "outage_grace_secs": 0
        }))
        .unwrap() else {
            panic!("a postgres URL is PostgreSQL")
        };
        assert_eq!(bounds.timeout, Duration::from_millis(1500));
        assert_eq!(bounds.outage_grace, Duration::ZERO);
    }

    #[test]
    fn bad_registry_bounds_name_the_key() {
        let url = "postgres://u:p@127.0.0.1:5432/db";
        let e = registry(json!({"url": url, "timeout_secs": 0}))
            .unwrap_err()
            .message;
        assert!(
            e.contains("\"registry.timeout_secs\" must be between 0.1 and 300"),
            "{e}"
        );
        let e = registry(json!({"url": url, "outage_grace_secs": "long"}))
            .unwrap_err()
            .message;
        assert!(
            e.contains("\"registry.outage_grace_secs\" must be a number"),
            "{e}"
        );
        let e = registry(json!({"url": url, "grace": 1}))
            .unwrap_err()
            .message;
        assert!(e.contains("timeout_secs, outage_grace_secs"), "{e}");
    }
}
