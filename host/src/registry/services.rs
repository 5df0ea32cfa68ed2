//! The `services` table: servers added with `airlock servers` (or imported), their
//! scope and key, and how each row is stored and decoded (secret values are only
//! referenced).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::db::Row;
use super::{Registry, RegistryError, auth_row, corrupt, params, to_json};
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
) -> Result<T, RegistryError> {
    let text = row.text(idx)?;
    serde_json::from_str(&text).map_err(|e| corrupt(name, column, e))
}

fn opt_json(
    row: &Row,
    idx: usize,
    name: &str,
    column: &str,
) -> Result<Option<Value>, RegistryError> {
    row.opt_text(idx)?
        .map(|t| serde_json::from_str(&t).map_err(|e| corrupt(name, column, e)))
        .transpose()
}

fn record_from_row(row: &Row) -> Result<ServiceRecord, RegistryError> {
    let name = row.text(2)?;
    let scope = Scope::parse(&row.text(0)?).map_err(|e| corrupt(&name, "scope", e))?;
    let transport = row.text(5)?;
    let mut auth_secrets = BTreeMap::new();
    let transport = match transport.as_str() {
        "stdio" => StoredTransport::Stdio {
            command: row
                .opt_text(6)?
                .ok_or_else(|| corrupt(&name, "command", "missing"))?,
            args: json_col(row, 7, &name, "args")?,
            env: json_col(row, 9, &name, "env")?,
        },
        "http" => StoredTransport::Http {
            url: row
                .opt_text(10)?
                .ok_or_else(|| corrupt(&name, "url", "missing"))?,
            headers: json_col(row, 11, &name, "headers")?,
            auth: {
                let (auth, secrets) = auth_row::decode(row.opt_text(12)?.as_deref())
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
            project: row.text(1)?,
            name: name.clone(),
        },
        label: row.opt_text(3)?,
        description: row.opt_text(4)?,
        transport,
        cwd: row.opt_text(8)?,
        enabled: row.boolean(13)?,
        startup_timeout_secs: row.opt_real(14)?,
        tool_timeout_secs: row.opt_real(15)?,
        auth_secrets,
        adapters: opt_json(row, 16, &name, "adapters")?,
        adapter_config: opt_json(row, 17, &name, "adapter_config")?,
        repair: json_col(row, 18, &name, "repair")?,
        origin: row.opt_text(19)?,
    })
}

impl Registry {
    /// Inserts a new service. Fails with [`RegistryError::Exists`] when the name is
    /// taken in the same scope (and project); nothing is changed then.
    pub fn insert_service(&self, record: &ServiceRecord) -> Result<(), RegistryError> {
        self.write_service(record, false)
    }

    /// Replaces an existing service (matched by scope, project and name).
    pub fn update_service(&self, record: &ServiceRecord) -> Result<(), RegistryError> {
        self.write_service(record, true)
    }

    fn write_service(&self, r: &ServiceRecord, replace: bool) -> Result<(), RegistryError> {
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
        let (adapters, adapter_config, repair) = (
            r.adapters.as_ref().map(to_json),
            r.adapter_config.as_ref().map(to_json),
            to_json(&r.repair),
        );
        let values = params![
            r.key.scope.as_str(),
            &r.key.project,
            &r.key.name,
            &r.label,
            &r.description,
            transport,
            &command,
            &args,
            &r.cwd,
            &env,
            &url,
            &headers,
            &auth,
            r.enabled,
            r.startup_timeout_secs,
            r.tool_timeout_secs,
            &adapters,
            &adapter_config,
            &repair,
            &r.origin,
        ];
        if replace {
            let changed = self.db.execute(
                &format!(
                    "UPDATE services SET ({SERVICE_COLUMNS}, updated_at) =
                     (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, unixepoch())
                     WHERE scope = ?1 AND project = ?2 AND name = ?3"
                ),
                &values,
            )?;
            if changed == 0 {
                return Err(RegistryError::Corrupt(format!(
                    "service \"{}\" vanished while it was being changed",
                    r.key.name
                )));
            }
        } else {
            let inserted = self.db.execute(
                &format!(
                    "INSERT INTO services ({SERVICE_COLUMNS})
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)
                     ON CONFLICT (scope, project, name) DO NOTHING"
                ),
                &values,
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
        self.db
            .query_opt(
                &format!(
                    "SELECT {SERVICE_COLUMNS} FROM services WHERE scope = ?1 AND project = ?2 AND name = ?3"
                ),
                &params![key.scope.as_str(), &key.project, &key.name],
            )?
            .map(|row| record_from_row(&row))
            .transpose()
    }

    /// The services visible from `project`: every user-scope service and the project's
    /// own, user scope first, each in name order.
    pub fn services(&self, project: &str) -> Result<Vec<ServiceRecord>, RegistryError> {
        self.db
            .query(
                &format!(
                    "SELECT {SERVICE_COLUMNS} FROM services
                     WHERE scope = 'user' OR (scope = 'project' AND project = ?1)
                     ORDER BY scope = 'project', name"
                ),
                &params![project],
            )?
            .iter()
            .map(record_from_row)
            .collect()
    }

    /// Deletes a service and, when no scope or project still defines its name, the grants,
    /// remembered approvals, frozen namespace, tested catalogs and run-time disable kept
    /// under that name, in
    /// one transaction. Returns whether it existed.
    pub fn delete_service(&self, key: &ServiceKey) -> Result<bool, RegistryError> {
        let existed = self
            .db
            .query_opt(
                "SELECT 1 FROM services WHERE scope = ?1 AND project = ?2 AND name = ?3",
                &params![key.scope.as_str(), &key.project, &key.name],
            )?
            .is_some();
        if !existed {
            return Ok(false);
        }
        // In one transaction with the row: when no other scope or project still defines
        // the name, what was kept for it goes too, so a server added again under the
        // name starts with no grants, approvals, namespace or tested catalog.
        let orphaned = "NOT EXISTS (SELECT 1 FROM services WHERE name = ?1)";
        let name = params![&key.name].to_vec();
        let removed = self.db.transaction(&[
            (
                "DELETE FROM services WHERE scope = ?1 AND project = ?2 AND name = ?3",
                params![key.scope.as_str(), &key.project, &key.name].to_vec(),
            ),
            (
                &format!("DELETE FROM grants WHERE service = ?1 AND {orphaned}"),
                name.clone(),
            ),
            (
                &format!("DELETE FROM approvals WHERE service = ?1 AND {orphaned}"),
                name.clone(),
            ),
            (
                &format!("DELETE FROM namespaces WHERE service = ?1 AND {orphaned}"),
                name.clone(),
            ),
            (
                &format!("DELETE FROM catalogs WHERE service = ?1 AND {orphaned}"),
                name.clone(),
            ),
            (
                &format!("DELETE FROM service_pauses WHERE service = ?1 AND {orphaned}"),
                name,
            ),
        ]);
        self.memo.forget();
        removed?;
        self.recall.forget_service(&key.name);
        Ok(true)
    }
}

#[cfg(test)]
mod tests;
