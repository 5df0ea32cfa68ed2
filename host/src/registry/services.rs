//! Registry tables for the operator's side: services added with `airlock servers`,
//! tested catalogs, the retained-results index and import previews.

use std::collections::BTreeMap;

use rusqlite::{OptionalExtension, Row, params};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Registry, RegistryError};

/// Where a registry service applies: to every folder (user) or to one project folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Everywhere, for this user.
    User,
    /// Only when Airlock runs in one project folder.
    Project,
}

impl Scope {
    /// `user` or `project`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::User => "user",
            Scope::Project => "project",
        }
    }

    /// Parses `user` or `project`.
    pub fn parse(text: &str) -> Result<Scope, String> {
        match text {
            "user" => Ok(Scope::User),
            "project" => Ok(Scope::Project),
            other => Err(format!(
                "unknown scope \"{other}\"; expected \"user\" or \"project\""
            )),
        }
    }
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

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

/// How a registry service is reached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum StoredTransport {
    /// A local process.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments, verbatim.
        args: Vec<String>,
        /// Environment variables.
        env: BTreeMap<String, StoredValue>,
    },
    /// A remote server.
    Http {
        /// The endpoint.
        url: String,
        /// Extra headers.
        headers: BTreeMap<String, StoredValue>,
        /// `Some("oauth")` when the server needs OAuth.
        auth: Option<String>,
    },
}

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
        let values = match &self.transport {
            StoredTransport::Stdio { env, .. } => env.values(),
            StoredTransport::Http { headers, .. } => headers.values(),
        };
        values
            .filter_map(|v| match v {
                StoredValue::Secret(r) => Some(r.clone()),
                StoredValue::Plain(_) => None,
            })
            .collect()
    }
}

/// A catalog saved by `airlock servers test`: the raw tools as the server listed them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredCatalog {
    /// The service.
    pub service: String,
    /// The launch digest of the definition that was tested.
    pub launch_digest: String,
    /// When (unix seconds).
    pub tested_at: i64,
    /// The negotiated protocol version.
    pub protocol_version: String,
    /// `serverInfo.name`.
    pub server_name: String,
    /// `serverInfo.version`.
    pub server_version: String,
    /// The transport used.
    pub transport: String,
    /// The tools, as MCP JSON.
    pub tools: Vec<Value>,
}

/// One retained result in the index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResultEntry {
    /// The output id.
    pub output_id: String,
    /// The service that produced it.
    pub service: String,
    /// The agent that owns it.
    pub agent: String,
    /// Bytes retained.
    pub size: u64,
    /// `sha256:` digest.
    pub digest: String,
    /// Whether the whole output was retained.
    pub complete: bool,
    /// Whether anything was redacted.
    pub redacted: bool,
}

/// A saved import preview (digests only: no value is stored).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportPreview {
    /// Row id.
    pub id: i64,
    /// When it was made (unix seconds).
    pub created_at: i64,
    /// What was asked (client filter and workspace), as JSON.
    pub request: Value,
    /// Candidate name -> digest.
    pub entries: BTreeMap<String, String>,
}

const SERVICE_COLUMNS: &str = "scope, project, name, label, description, transport, command, args, cwd, env, url, headers, auth, enabled, startup_timeout_secs, tool_timeout_secs, adapters, adapter_config, repair, origin";

fn corrupt(name: &str, column: &str, e: impl std::fmt::Display) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(
        0,
        rusqlite::types::Type::Text,
        format!("service \"{name}\", column {column}: {e}").into(),
    )
}

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
            auth: row.get(12)?,
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
        adapters: opt_json(row, 16, &name, "adapters")?,
        adapter_config: opt_json(row, 17, &name, "adapter_config")?,
        repair: json_col(row, 18, &name, "repair")?,
        origin: row.get(19)?,
    })
}

fn to_json<T: Serialize>(v: &T) -> String {
    serde_json::to_string(v).expect("registry values serialize")
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
                auth.clone(),
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

    /// Saves a tested catalog, replacing the previous one.
    pub fn save_catalog(&self, catalog: &StoredCatalog) -> Result<(), RegistryError> {
        let db = self.db.lock().expect("registry lock poisoned");
        db.execute(
            "INSERT OR REPLACE INTO catalogs
             (service, launch_digest, tested_at, protocol_version, server_name, server_version, transport, tools)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                catalog.service,
                catalog.launch_digest,
                catalog.tested_at,
                catalog.protocol_version,
                catalog.server_name,
                catalog.server_version,
                catalog.transport,
                to_json(&catalog.tools),
            ],
        )?;
        Ok(())
    }

    /// The tested catalog of `service` for the launch with `launch_digest` (a catalog is
    /// kept per launch, so two projects defining the same name differently each keep
    /// theirs).
    pub fn catalog(
        &self,
        service: &str,
        launch_digest: &str,
    ) -> Result<Option<StoredCatalog>, RegistryError> {
        let db = self.db.lock().expect("registry lock poisoned");
        Ok(db
            .query_row(
                "SELECT service, launch_digest, tested_at, protocol_version, server_name, server_version, transport, tools
                 FROM catalogs WHERE service = ?1 AND launch_digest = ?2",
                [service, launch_digest],
                |row| {
                    let tools: String = row.get(7)?;
                    Ok(StoredCatalog {
                        service: row.get(0)?,
                        launch_digest: row.get(1)?,
                        tested_at: row.get(2)?,
                        protocol_version: row.get(3)?,
                        server_name: row.get(4)?,
                        server_version: row.get(5)?,
                        transport: row.get(6)?,
                        tools: serde_json::from_str(&tools)
                            .map_err(|e| corrupt(service, "catalogs.tools", e))?,
                    })
                },
            )
            .optional()?)
    }

    /// Whether `service` has a tested catalog for any launch (to tell "stale" from
    /// "never tested").
    pub fn has_catalog(&self, service: &str) -> Result<bool, RegistryError> {
        let db = self.db.lock().expect("registry lock poisoned");
        Ok(db
            .query_row(
                "SELECT 1 FROM catalogs WHERE service = ?1 LIMIT 1",
                [service],
                |_| Ok(()),
            )
            .optional()?
            .is_some())
    }

    /// Forgets the tested catalog of `service` for one launch. Returns whether there was
    /// one.
    pub fn delete_catalog(
        &self,
        service: &str,
        launch_digest: &str,
    ) -> Result<bool, RegistryError> {
        let db = self.db.lock().expect("registry lock poisoned");
        Ok(db.execute(
            "DELETE FROM catalogs WHERE service = ?1 AND launch_digest = ?2",
            [service, launch_digest],
        )? > 0)
    }

    /// Records a retained result in the index.
    pub fn index_result(&self, entry: &ResultEntry) -> Result<(), RegistryError> {
        let db = self.db.lock().expect("registry lock poisoned");
        db.execute(
            "INSERT OR REPLACE INTO results (output_id, service, agent, size, digest, complete, redacted)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                entry.output_id,
                entry.service,
                entry.agent,
                entry.size,
                entry.digest,
                entry.complete,
                entry.redacted
            ],
        )?;
        Ok(())
    }

    /// The indexed results of `service` owned by `agent`, newest first.
    pub fn results(&self, service: &str, agent: &str) -> Result<Vec<ResultEntry>, RegistryError> {
        let db = self.db.lock().expect("registry lock poisoned");
        let mut stmt = db.prepare(
            "SELECT output_id, service, agent, size, digest, complete, redacted FROM results
             WHERE service = ?1 AND agent = ?2 ORDER BY created_at DESC, rowid DESC",
        )?;
        let rows = stmt.query_map(params![service, agent], |row| {
            Ok(ResultEntry {
                output_id: row.get(0)?,
                service: row.get(1)?,
                agent: row.get(2)?,
                size: row.get(3)?,
                digest: row.get(4)?,
                complete: row.get(5)?,
                redacted: row.get(6)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Saves an import preview and returns its id.
    pub fn save_import_preview(
        &self,
        request: &Value,
        entries: &BTreeMap<String, String>,
    ) -> Result<i64, RegistryError> {
        let db = self.db.lock().expect("registry lock poisoned");
        db.execute(
            "INSERT INTO import_previews (request, entries) VALUES (?1, ?2)",
            params![to_json(request), to_json(entries)],
        )?;
        Ok(db.last_insert_rowid())
    }

    /// The newest import preview, if any.
    pub fn latest_import_preview(&self) -> Result<Option<ImportPreview>, RegistryError> {
        let db = self.db.lock().expect("registry lock poisoned");
        Ok(db
            .query_row(
                "SELECT id, created_at, request, entries FROM import_previews ORDER BY id DESC LIMIT 1",
                [],
                |row| {
                    let request: String = row.get(2)?;
                    let entries: String = row.get(3)?;
                    Ok(ImportPreview {
                        id: row.get(0)?,
                        created_at: row.get(1)?,
                        request: serde_json::from_str(&request)
                            .map_err(|e| corrupt("import preview", "request", e))?,
                        entries: serde_json::from_str(&entries)
                            .map_err(|e| corrupt("import preview", "entries", e))?,
                    })
                },
            )
            .optional()?)
    }

    /// The database's current time (unix seconds), the clock previews are judged by.
    pub fn now(&self) -> Result<i64, RegistryError> {
        let db = self.db.lock().expect("registry lock poisoned");
        Ok(db.query_row("SELECT unixepoch()", [], |r| r.get(0))?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(scope: Scope, name: &str) -> ServiceRecord {
        ServiceRecord {
            key: ServiceKey {
                scope,
                project: if scope == Scope::Project {
                    "/p".into()
                } else {
                    String::new()
                },
                name: name.into(),
            },
            label: Some("L".into()),
            description: None,
            transport: StoredTransport::Stdio {
                command: "node".into(),
                args: vec!["a b".into(), "--x".into()],
                env: BTreeMap::from([
                    ("PLAIN".into(), StoredValue::Plain("1".into())),
                    ("API_TOKEN".into(), StoredValue::Secret("secret:abc".into())),
                ]),
            },
            cwd: Some("/tmp".into()),
            enabled: true,
            startup_timeout_secs: None,
            tool_timeout_secs: Some(90.0),
            adapters: None,
            adapter_config: None,
            repair: vec![],
            origin: Some("airlock servers add".into()),
        }
    }

    #[test]
    fn services_round_trip_and_refuse_duplicates_per_scope() {
        let dir = tempfile::tempdir().unwrap();
        let reg = Registry::open(dir.path()).unwrap();
        let user = record(Scope::User, "fs");
        reg.insert_service(&user).unwrap();
        let e = reg.insert_service(&user).unwrap_err();
        assert!(matches!(e, RegistryError::Exists { .. }), "{e}");
        reg.insert_service(&record(Scope::Project, "fs")).unwrap();
        assert_eq!(reg.service(&user.key).unwrap().as_ref(), Some(&user));
        assert_eq!(user.secret_refs(), vec!["secret:abc".to_string()]);
        let visible = reg.services("/p").unwrap();
        assert_eq!(visible.len(), 2);
        assert_eq!(visible[0].key.scope, Scope::User);
        assert_eq!(reg.services("/other").unwrap().len(), 1);
        let mut changed = user.clone();
        changed.enabled = false;
        reg.update_service(&changed).unwrap();
        assert!(!reg.service(&user.key).unwrap().unwrap().enabled);
        assert!(reg.delete_service(&user.key).unwrap());
        assert!(!reg.delete_service(&user.key).unwrap());
    }
}
