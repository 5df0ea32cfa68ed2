//! Persistent state, with versioned migrations: frozen namespaces, grants, services
//! managed by `airlock servers` (secret values are only referenced), tested catalogs,
//! the index of retained results, import previews, gateway tokens, remembered
//! approvals and the gateway's task handles.
//!
//! Two engines hold it ([`db`]): an embedded SQLite database (`registry.db` in the data
//! directory, the default), or PostgreSQL (`[registry] url = "postgres://…"`), which
//! several hosts share. Every statement is written once and runs on both.
//!
//! This module owns the [`Registry`] handle, its errors, the SQLite migrations, and the
//! namespace and grant tables; each other table has its own module.
//!
//! Layer 4 (storage). May import: `config`, `storage`, `secrets` (sealing what replicas
//! share, [`vault`]).

mod approvals;
mod auth_row;
mod catalogs;
pub mod changes;
pub mod console;
mod db;
mod grant_memo;
mod imports;
#[cfg(feature = "postgres")]
pub mod pg_listen;
#[cfg(feature = "postgres")]
mod pg_migrations;
#[cfg(feature = "postgres")]
mod postgres;
mod recall;
mod results;
mod rows;
mod services;
mod shared_secrets;
mod tasks;
mod tokens;
pub mod vault;

pub use approvals::{ApprovalGrant, ApprovalScope, glob_literal};
pub use auth_row::STORED_SECRET;
pub use catalogs::StoredCatalog;
pub use imports::ImportPreview;
pub use results::ResultEntry;
pub use services::{Scope, ServiceKey, ServiceRecord, StoredTransport, StoredValue};
pub use tasks::{TaskRecord, TaskSignals};
pub use tokens::TokenRecord;

use std::path::Path;
use std::sync::{Arc, Mutex};

use rusqlite::Connection;
use serde::Serialize;

use crate::config::{RegistryBounds, RegistryLocation};
use db::Db;

/// The database file's name inside the data directory.
pub const DB_FILE: &str = "registry.db";

/// SQLite triggers that count every write to `table` in the `changes` row of `topic`,
/// whichever process made it (see [`changes`]).
macro_rules! bump_on_write {
    ($table:literal, $topic:literal) => {
        concat!(
            "CREATE TRIGGER ",
            $table,
            "_inserted AFTER INSERT ON ",
            $table,
            " BEGIN UPDATE changes SET generation = generation + 1 WHERE topic = '",
            $topic,
            "'; END;\n",
            "CREATE TRIGGER ",
            $table,
            "_updated AFTER UPDATE ON ",
            $table,
            " BEGIN UPDATE changes SET generation = generation + 1 WHERE topic = '",
            $topic,
            "'; END;\n",
            "CREATE TRIGGER ",
            $table,
            "_deleted AFTER DELETE ON ",
            $table,
            " BEGIN UPDATE changes SET generation = generation + 1 WHERE topic = '",
            $topic,
            "'; END;\n",
        )
    };
}

/// Migrations, applied in order; `PRAGMA user_version` records how many ran.
const MIGRATIONS: &[&str] = &[
    "CREATE TABLE namespaces (
        service    TEXT PRIMARY KEY NOT NULL,
        namespace  TEXT NOT NULL UNIQUE,
        created_at INTEGER NOT NULL DEFAULT (unixepoch())
    );",
    "CREATE TABLE grants (
        agent      TEXT NOT NULL,
        service    TEXT NOT NULL,
        created_at INTEGER NOT NULL DEFAULT (unixepoch()),
        PRIMARY KEY (agent, service)
    );",
    "CREATE TABLE services (
        id                   INTEGER PRIMARY KEY,
        scope                TEXT NOT NULL CHECK (scope IN ('user', 'project')),
        project              TEXT NOT NULL DEFAULT '',
        name                 TEXT NOT NULL,
        label                TEXT,
        description          TEXT,
        transport            TEXT NOT NULL CHECK (transport IN ('stdio', 'http')),
        command              TEXT,
        args                 TEXT NOT NULL DEFAULT '[]',
        cwd                  TEXT,
        env                  TEXT NOT NULL DEFAULT '{}',
        url                  TEXT,
        headers              TEXT NOT NULL DEFAULT '{}',
        auth                 TEXT,
        enabled              INTEGER NOT NULL DEFAULT 1,
        startup_timeout_secs REAL,
        tool_timeout_secs    REAL,
        adapters             TEXT,
        adapter_config       TEXT,
        repair               TEXT NOT NULL DEFAULT '[]',
        origin               TEXT,
        created_at           INTEGER NOT NULL DEFAULT (unixepoch()),
        updated_at           INTEGER NOT NULL DEFAULT (unixepoch()),
        UNIQUE (scope, project, name)
    );
    CREATE TABLE catalogs (
        service          TEXT NOT NULL,
        launch_digest    TEXT NOT NULL,
        tested_at        INTEGER NOT NULL DEFAULT (unixepoch()),
        protocol_version TEXT NOT NULL,
        server_name      TEXT NOT NULL,
        server_version   TEXT NOT NULL,
        transport        TEXT NOT NULL,
        tools            TEXT NOT NULL,
        PRIMARY KEY (service, launch_digest)
    );
    CREATE TABLE results (
        output_id  TEXT PRIMARY KEY NOT NULL,
        service    TEXT NOT NULL,
        agent      TEXT NOT NULL,
        size       INTEGER NOT NULL,
        digest     TEXT NOT NULL,
        complete   INTEGER NOT NULL,
        redacted   INTEGER NOT NULL,
        created_at INTEGER NOT NULL DEFAULT (unixepoch())
    );
    CREATE INDEX results_by_service ON results (service, created_at);
    CREATE TABLE import_previews (
        id         INTEGER PRIMARY KEY,
        created_at INTEGER NOT NULL DEFAULT (unixepoch()),
        request    TEXT NOT NULL,
        entries    TEXT NOT NULL
    );",
    "CREATE TABLE gateway_tokens (
        id          TEXT PRIMARY KEY NOT NULL,
        agent       TEXT NOT NULL,
        fingerprint TEXT NOT NULL UNIQUE,
        secret_ref  TEXT NOT NULL,
        created_at  INTEGER NOT NULL DEFAULT (unixepoch())
    );",
    "CREATE TABLE approvals (
        id         INTEGER PRIMARY KEY,
        agent      TEXT NOT NULL,
        service    TEXT NOT NULL,
        tool       TEXT NOT NULL,
        arguments  TEXT NOT NULL,
        plugin     TEXT NOT NULL,
        rule       TEXT NOT NULL,
        expires_at INTEGER,
        created_at INTEGER NOT NULL DEFAULT (unixepoch())
    );
    CREATE INDEX approvals_by_scope ON approvals (agent, service, plugin, rule);",
    "CREATE TABLE tasks (
        id               TEXT PRIMARY KEY NOT NULL,
        agent            TEXT NOT NULL,
        tool             TEXT NOT NULL,
        status           TEXT NOT NULL,
        status_message   TEXT,
        payload          TEXT,
        created_ms       INTEGER NOT NULL,
        updated_ms       INTEGER NOT NULL,
        ttl_ms           INTEGER NOT NULL,
        replica          TEXT NOT NULL,
        lease_until_ms   INTEGER NOT NULL,
        cancel_requested INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX tasks_by_age ON tasks (created_ms);
    CREATE TABLE task_responses (
        task_id TEXT NOT NULL,
        key     TEXT NOT NULL,
        value   TEXT NOT NULL,
        PRIMARY KEY (task_id, key)
    );",
    concat!(
        "CREATE TABLE changes (
            topic      TEXT PRIMARY KEY NOT NULL,
            generation INTEGER NOT NULL DEFAULT 0
        );
        INSERT INTO changes (topic) VALUES ('services'), ('grants'), ('pauses');
        CREATE TABLE service_pauses (
            service    TEXT PRIMARY KEY NOT NULL,
            created_at INTEGER NOT NULL DEFAULT (unixepoch())
        );",
        bump_on_write!("services", "services"),
        bump_on_write!("catalogs", "services"),
        bump_on_write!("namespaces", "services"),
        bump_on_write!("grants", "grants"),
        bump_on_write!("service_pauses", "pauses"),
    ),
    "CREATE TABLE console_sessions (
        id_digest   TEXT PRIMARY KEY NOT NULL,
        csrf        TEXT NOT NULL,
        created_ms  INTEGER NOT NULL,
        flash_failed INTEGER,
        flash_text  TEXT
    );",
    "CREATE TABLE shared_secrets (
        name       TEXT PRIMARY KEY NOT NULL,
        sealed     TEXT NOT NULL,
        updated_ms INTEGER NOT NULL
    );",
];

/// A registry error.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The SQLite database failed.
    #[error("registry database: {0}")]
    Db(#[from] rusqlite::Error),
    /// The PostgreSQL database cannot be reached: the connection failed or closed, the
    /// server is shutting down or starting, or no answer came within the timeout.
    #[error("the registry database {location} cannot be reached: {message}")]
    Unavailable {
        /// Where (`postgres://host:port/database (schema)`, never the password).
        location: String,
        /// What failed.
        message: String,
    },
    /// The PostgreSQL database refused a statement.
    #[error("registry database {location}: {message}")]
    Postgres {
        /// Where (`postgres://host:port/database (schema)`, never the password).
        location: String,
        /// What failed.
        message: String,
    },
    /// The `[registry]` settings are unusable.
    #[error("{0}")]
    Config(String),
    /// A stored row does not decode (the message names the row and column).
    #[error("registry database: {0}")]
    Corrupt(String),
    /// `add` found the name taken in the same scope.
    #[error(
        "a server named \"{name}\" already exists in the {scope} scope; remove it first or choose another name"
    )]
    Exists {
        /// The name.
        name: String,
        /// The scope.
        scope: Scope,
    },
}

impl RegistryError {
    /// Whether the registry could not be reached (a retry later may work), as opposed
    /// to refusing what was asked.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, RegistryError::Unavailable { .. })
    }
}

/// The registry database.
pub struct Registry {
    db: Db,
    /// Tokens and grants the database confirmed, for while it cannot be reached.
    recall: recall::Recall,
    /// Grant answers kept while other hosts' changes are heard (PostgreSQL).
    memo: Arc<grant_memo::GrantMemo>,
}

/// Whether one agent holds one grant.
const GRANT: &str = "SELECT 1 FROM grants WHERE agent = ?1 AND service = ?2";

impl Registry {
    /// Opens (creating and migrating as needed) the SQLite database in `data_dir`.
    pub fn open(data_dir: &Path) -> Result<Self, RegistryError> {
        let mut db = crate::storage::open_sqlite(&data_dir.join(DB_FILE))?;
        migrate_sqlite(&mut db)?;
        Ok(Registry {
            db: Db::Sqlite(Mutex::new(db)),
            recall: recall::Recall::new(RegistryBounds::default().outage_grace),
            memo: Default::default(),
        })
    }

    /// Opens the registry `location` names: SQLite in `data_dir`, or a PostgreSQL
    /// database (connecting, creating the schema and migrating as needed). Blocking:
    /// call it where blocking is allowed.
    pub fn open_at(data_dir: &Path, location: &RegistryLocation) -> Result<Self, RegistryError> {
        match location {
            RegistryLocation::Local => Registry::open(data_dir),
            #[cfg(feature = "postgres")]
            RegistryLocation::Postgres {
                url,
                schema,
                bounds,
                ..
            } => {
                let memo = Arc::new(grant_memo::GrantMemo::default());
                Ok(Registry {
                    db: Db::Postgres(postgres::Postgres::connect(
                        url,
                        schema,
                        *bounds,
                        memo.clone(),
                    )?),
                    recall: recall::Recall::new(bounds.outage_grace),
                    memo,
                })
            }
            #[cfg(not(feature = "postgres"))]
            RegistryLocation::Postgres { .. } => Err(RegistryError::Config(
                "[registry] url names PostgreSQL, and this build of Airlock has no PostgreSQL \
                 support (cargo feature `postgres`, on in the `airlock` binary)"
                    .into(),
            )),
        }
    }

    /// Whether grant answers are kept in memory now: the registry is in PostgreSQL and
    /// its listener (started by the first grant check) hears every host's changes (see
    /// `registry/grant_memo.rs`). False on SQLite, whose checks always ask the database.
    pub fn hears_changes(&self) -> bool {
        self.memo.live()
    }

    /// Whether the database answers now (blocking: a round trip to PostgreSQL).
    pub fn reachable(&self) -> Result<(), RegistryError> {
        self.db.query("SELECT 1", &[]).map(|_| ())
    }

    /// Which engine holds the registry, and where: `SQLite` or
    /// `PostgreSQL postgres://host:port/db (schema)`.
    pub fn describe(&self) -> String {
        match &self.db {
            Db::Sqlite(_) => self.db.engine().to_string(),
            #[cfg(feature = "postgres")]
            Db::Postgres(pg) => format!("{} {}", self.db.engine(), pg.location()),
        }
    }

    /// The frozen namespace of `service`, if one was chosen.
    pub fn namespace(&self, service: &str) -> Result<Option<String>, RegistryError> {
        self.db
            .query_opt(
                "SELECT namespace FROM namespaces WHERE service = ?1",
                &[service.into()],
            )?
            .map(|row| row.text(0))
            .transpose()
    }

    /// Every namespace held by a service other than `service`.
    pub fn namespaces_except(&self, service: &str) -> Result<Vec<String>, RegistryError> {
        self.db
            .query(
                "SELECT namespace FROM namespaces WHERE service != ?1 ORDER BY namespace",
                &[service.into()],
            )?
            .iter()
            .map(|row| row.text(0))
            .collect()
    }

    /// Freezes `namespace` for `service`. Returns the namespace that ends up stored: the
    /// existing one if another process froze one first.
    pub fn freeze_namespace(
        &self,
        service: &str,
        namespace: &str,
    ) -> Result<String, RegistryError> {
        self.db.execute(
            "INSERT INTO namespaces (service, namespace) VALUES (?1, ?2) ON CONFLICT (service) DO NOTHING",
            &[service.into(), namespace.into()],
        )?;
        self.namespace(service)?.ok_or_else(|| {
            RegistryError::Corrupt(format!(
                "the namespace of service \"{service}\" vanished as it was frozen"
            ))
        })
    }
}

/// Runs the SQLite migrations not yet applied; `PRAGMA user_version` records how many
/// ran.
fn migrate_sqlite(db: &mut Connection) -> Result<(), RegistryError> {
    let tx = db.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let version: usize = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(version) {
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", i + 1)?;
    }
    tx.commit()?;
    Ok(())
}

impl Registry {
    /// Grants `service` to `agent`. Returns whether the grant is new.
    pub fn grant(&self, agent: &str, service: &str) -> Result<bool, RegistryError> {
        let added = self.db.execute(
            "INSERT INTO grants (agent, service) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
            &[agent.into(), service.into()],
        );
        self.memo.forget();
        Ok(added? > 0)
    }

    /// Revokes `agent`'s grant of `service`. Returns whether there was one.
    pub fn revoke(&self, agent: &str, service: &str) -> Result<bool, RegistryError> {
        self.recall.forget_grant(agent, service);
        let removed = self.db.execute(
            "DELETE FROM grants WHERE agent = ?1 AND service = ?2",
            &[agent.into(), service.into()],
        );
        self.memo.forget();
        Ok(removed? > 0)
    }

    /// Whether `agent` holds a grant for `service`. On PostgreSQL, from memory while
    /// every host's changes are heard (see `registry/grant_memo.rs`). While the database
    /// cannot be reached, a grant it confirmed within the outage grace still counts.
    pub fn is_granted(&self, agent: &str, service: &str) -> Result<bool, RegistryError> {
        if let Some(granted) = self.kept_grant(agent, service) {
            return Ok(granted);
        }
        let stamp = self.memo.stamp();
        let asked = self.db.query(GRANT, &[agent.into(), service.into()]);
        self.granted_from(agent, service, asked, stamp)
    }

    /// [`Registry::is_granted`] for async callers (a call's access check): on
    /// PostgreSQL the task awaits the answer, no thread blocks.
    pub async fn is_granted_async(
        &self,
        agent: &str,
        service: &str,
    ) -> Result<bool, RegistryError> {
        if let Some(granted) = self.kept_grant(agent, service) {
            return Ok(granted);
        }
        let stamp = self.memo.stamp();
        let asked = self
            .db
            .query_async(GRANT, &[agent.into(), service.into()])
            .await;
        self.granted_from(agent, service, asked, stamp)
    }

    /// The kept answer for `agent` and `service`; without one, the listener is started
    /// (once), so that later answers may be kept.
    fn kept_grant(&self, agent: &str, service: &str) -> Option<bool> {
        let kept = self.memo.recall(agent, service);
        if kept.is_none() {
            self.db.hear_changes();
        }
        kept
    }

    /// A grant query's answer (sent at `stamp`), kept in memory and for outages, or
    /// recalled during one.
    fn granted_from(
        &self,
        agent: &str,
        service: &str,
        asked: Result<Vec<db::Row>, RegistryError>,
        stamp: grant_memo::Stamp,
    ) -> Result<bool, RegistryError> {
        match asked {
            Ok(rows) => {
                let granted = !rows.is_empty();
                self.memo.remember(agent, service, granted, stamp);
                self.recall.grant_seen(agent, service, granted);
                Ok(granted)
            }
            Err(e) if e.is_unavailable() && self.recall.granted(agent, service) => {
                tracing::debug!(agent, service, "grant recalled while {e}");
                Ok(true)
            }
            Err(e) => Err(e),
        }
    }

    /// The services granted to `agent`, in name order. While the database cannot be
    /// reached, the list it gave within the outage grace.
    pub fn grants(&self, agent: &str) -> Result<Vec<String>, RegistryError> {
        let asked = self
            .db
            .query(
                "SELECT service FROM grants WHERE agent = ?1 ORDER BY service",
                &[agent.into()],
            )
            .and_then(|rows| {
                rows.iter()
                    .map(|row| row.text(0))
                    .collect::<Result<Vec<_>, _>>()
            });
        match asked {
            Ok(services) => {
                self.recall.grants_seen(agent, &services);
                Ok(services)
            }
            Err(e) if e.is_unavailable() => self.recall.grants(agent).ok_or(e),
            Err(e) => Err(e),
        }
    }

    /// Every grant, as (agent, service) pairs in agent then service order.
    pub fn all_grants(&self) -> Result<Vec<(String, String)>, RegistryError> {
        self.db
            .query(
                "SELECT agent, service FROM grants ORDER BY agent, service",
                &[],
            )?
            .iter()
            .map(|row| Ok((row.text(0)?, row.text(1)?)))
            .collect()
    }
}

/// The error a row decoder returns for a stored value that does not decode (the
/// message names the row and column).
fn corrupt(name: &str, column: &str, e: impl std::fmt::Display) -> RegistryError {
    RegistryError::Corrupt(format!("service \"{name}\", column {column}: {e}"))
}

/// A value as stored in a JSON column.
fn to_json<T: Serialize>(v: &T) -> String {
    serde_json::to_string(v).expect("registry values serialize")
}

/// Statement parameters, each converted with [`Param::from`].
macro_rules! params {
    ($($value:expr),* $(,)?) => {
        [$($crate::registry::rows::Param::from($value)),*]
    };
}
use params;

#[cfg(test)]
mod tests;
