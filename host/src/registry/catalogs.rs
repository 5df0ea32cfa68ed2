//! The `catalogs` table: the tools a server listed when `airlock servers test` ran, one
//! catalog per service and launch digest.

use serde::Serialize;
use serde_json::Value;

use super::{Registry, RegistryError, corrupt, params, to_json};

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
        let tools = to_json(&catalog.tools);
        self.db.execute(
            "INSERT INTO catalogs
             (service, launch_digest, tested_at, protocol_version, server_name, server_version, transport, tools)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
             ON CONFLICT (service, launch_digest) DO UPDATE SET
                tested_at = excluded.tested_at, protocol_version = excluded.protocol_version,
                server_name = excluded.server_name, server_version = excluded.server_version,
                transport = excluded.transport, tools = excluded.tools",
            &params![
                &catalog.service,
                &catalog.launch_digest,
                catalog.tested_at,
                &catalog.protocol_version,
                &catalog.server_name,
                &catalog.server_version,
                &catalog.transport,
                &tools,
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
        let Some(row) = self.db.query_opt(
            "SELECT service, launch_digest, tested_at, protocol_version, server_name, server_version, transport, tools
             FROM catalogs WHERE service = ?1 AND launch_digest = ?2",
            &params![service, launch_digest],
        )?
        else {
            return Ok(None);
        };
        Ok(Some(StoredCatalog {
            service: row.text(0)?,
            launch_digest: row.text(1)?,
            tested_at: row.int(2)?,
            protocol_version: row.text(3)?,
            server_name: row.text(4)?,
            server_version: row.text(5)?,
            transport: row.text(6)?,
            tools: serde_json::from_str(&row.text(7)?)
                .map_err(|e| corrupt(service, "catalogs.tools", e))?,
        }))
    }

    /// Whether `service` has a tested catalog for any launch (to tell "stale" from
    /// "never tested").
    pub fn has_catalog(&self, service: &str) -> Result<bool, RegistryError> {
        Ok(self
            .db
            .query_opt(
                "SELECT 1 FROM catalogs WHERE service = ?1 LIMIT 1",
                &params![service],
            )?
            .is_some())
    }

    /// Forgets the tested catalog of `service` for one launch. Returns whether there was
    /// one.
    pub fn delete_catalog(
        &self,
        service: &str,
        launch_digest: &str,
    ) -> Result<bool, RegistryError> {
        Ok(self.db.execute(
            "DELETE FROM catalogs WHERE service = ?1 AND launch_digest = ?2",
            &params![service, launch_digest],
        )? > 0)
    }
}
