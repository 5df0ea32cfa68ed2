//! Persistent state in an embedded SQLite database (`registry.db` in the data
//! directory), with versioned migrations: frozen namespaces and grants; later tables
//! (services, tested catalogs) arrive as further migrations.

use std::path::Path;
use std::sync::Mutex;

use rusqlite::{Connection, OptionalExtension, params};

/// The database file's name inside the data directory.
pub const DB_FILE: &str = "registry.db";

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
];

/// A registry error.
#[derive(Debug, thiserror::Error)]
#[error("registry database: {0}")]
pub struct RegistryError(#[from] rusqlite::Error);

/// The registry database.
pub struct Registry {
    db: Mutex<Connection>,
}

impl Registry {
    /// Opens (creating and migrating as needed) the database in `data_dir`.
    pub fn open(data_dir: &Path) -> Result<Self, RegistryError> {
        let db = Connection::open(data_dir.join(DB_FILE))?;
        db.busy_timeout(std::time::Duration::from_secs(5))?;
        db.pragma_update(None, "journal_mode", "WAL")?;
        let registry = Registry { db: Mutex::new(db) };
        registry.migrate()?;
        Ok(registry)
    }

    fn migrate(&self) -> Result<(), RegistryError> {
        let mut db = self.db.lock().expect("registry lock poisoned");
        let tx = db.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let version: usize = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(version) {
            tx.execute_batch(sql)?;
            tx.pragma_update(None, "user_version", i + 1)?;
        }
        tx.commit()?;
        Ok(())
    }

    /// The frozen namespace of `service`, if one was chosen.
    pub fn namespace(&self, service: &str) -> Result<Option<String>, RegistryError> {
        let db = self.db.lock().expect("registry lock poisoned");
        Ok(db
            .query_row(
                "SELECT namespace FROM namespaces WHERE service = ?1",
                [service],
                |r| r.get(0),
            )
            .optional()?)
    }

    /// Every namespace held by a service other than `service`.
    pub fn namespaces_except(&self, service: &str) -> Result<Vec<String>, RegistryError> {
        let db = self.db.lock().expect("registry lock poisoned");
        let mut stmt =
            db.prepare("SELECT namespace FROM namespaces WHERE service != ?1 ORDER BY namespace")?;
        let rows = stmt.query_map([service], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Freezes `namespace` for `service`. Returns the namespace that ends up stored: the
    /// existing one if another process froze one first.
    pub fn freeze_namespace(
        &self,
        service: &str,
        namespace: &str,
    ) -> Result<String, RegistryError> {
        let db = self.db.lock().expect("registry lock poisoned");
        db.execute(
            "INSERT INTO namespaces (service, namespace) VALUES (?1, ?2) ON CONFLICT(service) DO NOTHING",
            params![service, namespace],
        )?;
        Ok(db.query_row(
            "SELECT namespace FROM namespaces WHERE service = ?1",
            [service],
            |r| r.get(0),
        )?)
    }
}

impl Registry {
    /// Grants `service` to `agent`. Returns whether the grant is new.
    pub fn grant(&self, agent: &str, service: &str) -> Result<bool, RegistryError> {
        let db = self.db.lock().expect("registry lock poisoned");
        Ok(db.execute(
            "INSERT OR IGNORE INTO grants (agent, service) VALUES (?1, ?2)",
            params![agent, service],
        )? > 0)
    }

    /// Revokes `agent`'s grant of `service`. Returns whether there was one.
    pub fn revoke(&self, agent: &str, service: &str) -> Result<bool, RegistryError> {
        let db = self.db.lock().expect("registry lock poisoned");
        Ok(db.execute(
            "DELETE FROM grants WHERE agent = ?1 AND service = ?2",
            params![agent, service],
        )? > 0)
    }

    /// Whether `agent` holds a grant for `service`.
    pub fn is_granted(&self, agent: &str, service: &str) -> Result<bool, RegistryError> {
        let db = self.db.lock().expect("registry lock poisoned");
        Ok(db
            .query_row(
                "SELECT 1 FROM grants WHERE agent = ?1 AND service = ?2",
                params![agent, service],
                |_| Ok(()),
            )
            .optional()?
            .is_some())
    }

    /// The services granted to `agent`, in name order.
    pub fn grants(&self, agent: &str) -> Result<Vec<String>, RegistryError> {
        let db = self.db.lock().expect("registry lock poisoned");
        let mut stmt =
            db.prepare("SELECT service FROM grants WHERE agent = ?1 ORDER BY service")?;
        let rows = stmt.query_map([agent], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_are_frozen_and_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let reg = Registry::open(dir.path()).unwrap();
        assert_eq!(reg.namespace("rea").unwrap(), None);
        assert_eq!(reg.freeze_namespace("rea", "rea").unwrap(), "rea");
        assert_eq!(reg.freeze_namespace("rea", "other").unwrap(), "rea");
        reg.freeze_namespace("fs", "fs").unwrap();
        drop(reg);
        let reg = Registry::open(dir.path()).unwrap();
        assert_eq!(reg.namespace("rea").unwrap().as_deref(), Some("rea"));
        assert_eq!(
            reg.namespaces_except("rea").unwrap(),
            vec!["fs".to_string()]
        );
        assert!(
            reg.freeze_namespace("dup", "fs").is_err(),
            "a namespace is held by one service only"
        );
    }
}
