//! The `services` table: servers added with `airlock servers` (or imported), their
//! scope and key, and how each row is stored and decoded (secret values are only
//! referenced).

use std::collections::BTreeMap;

use rusqlite::{OptionalExtension, Row, params};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Registry, RegistryError, auth_row, corrupt, to_json};
use crate::config::Transport;

pub use crate::config::Scope;

/// Identifies one registry service: scope, project folder (empty for user scope), name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServiceKey {
    /// The scope.
    pub scope: Scope,
    /// The project folder (absolute) for project scope; empty for user scope.
    pub project: String,
    /// The service name.
    pub name: String,
}

/// An env var or header value as stored: plain, or a reference into the secret store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoredValue {
    /// Kept in the database as is.
    Plain(String),
    /// A reference (`secret:<uuid>`); the value lives in the secret store.
    Secret(String),
}

impl crate::config::MaskedDebug for StoredValue {
    fn fmt_masked(&self, _name: &str, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A secret is only referenced here; the reference is not the value.
        write!(f, "{self:?}")
    }
}

/// How a registry service is reached: values are plain or secret references.
pub type StoredTransport = Transport<StoredValue>;

/// One service row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServiceRecord {
    /// Scope, project and name.
    #[serde(flatten)]
    pub key: ServiceKey,
    /// A human label.
    pub label: Option<String>,
    /// A description for agents.
    pub description: Option<String>,
    /// How to reach it.
    pub transport: StoredTransport,
    /// The working directory (absolute).
    pub cwd: Option<String>,
    /// Whether Airlock uses it.
    pub enabled: bool,
    /// Connection + handshake timeout, seconds.
    pub startup_timeout_secs: Option<f64>,
    /// Per-call timeout, seconds.
    pub tool_timeout_secs: Option<f64>,
    /// The secret fields of an http server's auth table (`client_secret`,
    /// `private_key`), by field name; the auth in `transport` holds
    /// [`crate::registry::STORED_SECRET`] in their place.
    pub auth_secrets: BTreeMap<String, StoredValue>,
    /// Plugins per stage, in config syntax.
    pub adapters: Option<Value>,
    /// Plugin configuration, in config syntax.
    pub adapter_config: Option<Value>,
    /// Why the entry needs repair before it works (empty when it does not).
    pub repair: Vec<String>,
    /// Where it came from (`airlock servers add`, or an import's client and file).
    pub origin: Option<String>,
}

impl ServiceRecord {
    /// Every secret reference the record holds.
    pub fn secret_refs(&self) -> Vec<String> {
        self.transport
            .values()
            .values()
            .chain(self.auth_secrets.values())
            .filter_map(|v| match v {
                StoredValue::Secret(r) => Some(r.clone()),
                StoredValue::Plain(_) => None,
            })
            .collect()
    }
}

const SERVICE_COLUMNS: &str = "scope, project, name, label, description, transport, command, args, cwd, env, url, headers, auth, enabled, startup_timeout_secs, tool_timeout_secs, adapters, adapter_config, repair, origin";

fn json_col<T: serde::de::DeserializeOwned>(
    row: &Row,
    idx: usize,
    name: &str,
    column: &str,
) -> rusqlite::Result<T> {
    let text: String = row.get(idx)?;
    serde_json::from_str(&text).map_err(|e| corrupt(name, column, e))
}

fn opt_json(row: &Row, idx: usize, name: &str, column: &str) -> rusqlite::Result<Option<Value>> {
    let text: Option<String> = row.get(idx)?;
    text.map(|t| serde_json::from_str(&t).map_err(|e| corrupt(name, column, e)))
        .transpose()
}

fn record_from_row(row: &Row) -> rusqlite::Result<ServiceRecord> {
    let scope: String = row.get(0)?;
    let name: String = row.get(2)?;
    let scope = Scope::parse(&scope).map_err(|e| corrupt(&name, "scope", e))?;
    let transport: String = row.get(5)?;
    let mut auth_secrets = BTreeMap::new();
    let transport = match transport.as_str() {
        "stdio" => StoredTransport::Stdio {
            command: row
                .get::<_, Option<String>>(6)?
                .ok_or_else(|| corrupt(&name, "command", "missing"))?,
            args: json_col(row, 7, &name, "args")?,
            env: json_col(row, 9, &name, "env")?,
        },
        "http" => StoredTransport::Http {
            url: row
                .get::<_, Option<String>>(10)?
                .ok_or_else(|| corrupt(&name, "url", "missing"))?,
            headers: json_col(row, 11, &name, "headers")?,
            auth: {
                let (auth, secrets) =
                    auth_row::decode(row.get::<_, Option<String>>(12)?.as_deref())
                        .map_err(|e| corrupt(&name, "auth", e))?;
                auth_secrets = secrets;
                auth
            },
        },
        other => return Err(corrupt(&name, "transport", other)),
    };
    Ok(ServiceRecord {
        key: ServiceKey {
            scope,
            project: row.get(1)?,
            name: name.clone(),
        },
        label: row.get(3)?,
        description: row.get(4)?,
        transport,
        cwd: row.get(8)?,
        enabled: row.get(13)?,
        startup_timeout_secs: row.get(14)?,
        tool_timeout_secs: row.get(15)?,
        auth_secrets,
        adapters: opt_json(row, 16, &name, "adapters")?,
        adapter_config: opt_json(row, 17, &name, "adapter_config")?,
        repair: json_col(row, 18, &name, "repair")?,
        origin: row.get(19)?,
    })
}

impl Registry {
    /// Inserts a new service. Fails with [`RegistryError::Exists`] when the name is
    /// taken in the same scope (and project); nothing is changed then.
    pub fn insert_service(&self, record: &ServiceRecord) -> Result<(), RegistryError> {
        let db = self.db.lock().expect("registry lock poisoned");
        self.write_service(&db, record, false)
    }

    /// Replaces an existing service (matched by scope, project and name).
    pub fn update_service(&self, record: &ServiceRecord) -> Result<(), RegistryError> {
        let db = self.db.lock().expect("registry lock poisoned");
        self.write_service(&db, record, true)
    }

    fn write_service(
        &self,
        db: &rusqlite::Connection,
        r: &ServiceRecord,
        replace: bool,
    ) -> Result<(), RegistryError> {
        let (transport, command, args, env, url, headers, auth) = match &r.transport {
            StoredTransport::Stdio { command, args, env } => (
                "stdio",
                Some(command.clone()),
                to_json(args),
                to_json(env),
                None,
                "{}".to_string(),
                None,
            ),
            StoredTransport::Http { url, headers, auth } => (
                "http",
                None,
                "[]".to_string(),
                "{}".to_string(),
                Some(url.clone()),
                to_json(headers),
                auth_row::encode(auth, &r.auth_secrets),
            ),
        };
        let values = params![
            r.key.scope.as_str(),
            r.key.project,
            r.key.name,
            r.label,
            r.description,
            transport,
            command,
            args,
            r.cwd,
            env,
            url,
            headers,
            auth,
            r.enabled,
            r.startup_timeout_secs,
            r.tool_timeout_secs,
            r.adapters.as_ref().map(to_json),
            r.adapter_config.as_ref().map(to_json),
            to_json(&r.repair),
            r.origin,
        ];
        if replace {
            let changed = db.execute(
                &format!(
                    "UPDATE services SET ({SERVICE_COLUMNS}, updated_at) =
                     (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, unixepoch())
                     WHERE scope = ?1 AND project = ?2 AND name = ?3"
                ),
                values,
            )?;
            if changed == 0 {
                return Err(RegistryError::Corrupt(format!(
                    "service \"{}\" vanished while it was being changed",
                    r.key.name
                )));
            }
        } else {
            let inserted = db.execute(
                &format!(
                    "INSERT INTO services ({SERVICE_COLUMNS})
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)
                     ON CONFLICT (scope, project, name) DO NOTHING"
                ),
                values,
            )?;
            if inserted == 0 {
                return Err(RegistryError::Exists {
                    name: r.key.name.clone(),
                    scope: r.key.scope,
                });
            }
        }
        Ok(())
    }

    /// The service at exactly this key.
    pub fn service(&self, key: &ServiceKey) -> Result<Option<ServiceRecord>, RegistryError> {
        let db = self.db.lock().expect("registry lock poisoned");
        Ok(db
            .query_row(
                &format!(
                    "SELECT {SERVICE_COLUMNS} FROM services WHERE scope = ?1 AND project = ?2 AND name = ?3"
                ),
                params![key.scope.as_str(), key.project, key.name],
                record_from_row,
            )
            .optional()?)
    }

    /// The services visible from `project`: every user-scope service and the project's
    /// own, user scope first, each in name order.
    pub fn services(&self, project: &str) -> Result<Vec<ServiceRecord>, RegistryError> {
        let db = self.db.lock().expect("registry lock poisoned");
        let mut stmt = db.prepare(&format!(
            "SELECT {SERVICE_COLUMNS} FROM services
             WHERE scope = 'user' OR (scope = 'project' AND project = ?1)
             ORDER BY scope = 'project', name"
        ))?;
        let rows = stmt.query_map([project], record_from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Deletes a service. Returns whether it existed.
    pub fn delete_service(&self, key: &ServiceKey) -> Result<bool, RegistryError> {
        let db = self.db.lock().expect("registry lock poisoned");
        Ok(db.execute(
            "DELETE FROM services WHERE scope = ?1 AND project = ?2 AND name = ?3",
            params![key.scope.as_str(), key.project, key.name],
        )? > 0)
    }
}

#[cfg(test)]
mod tests;
