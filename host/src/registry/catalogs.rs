//! The `catalogs` table: the tools a server listed when `airlock servers test` ran, one
//! catalog per service and launch digest.

use rusqlite::{OptionalExtension, params};
use serde::Serialize;
use serde_json::Value;

use super::{Registry, RegistryError, corrupt, to_json};

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

impl Registry {
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
}
