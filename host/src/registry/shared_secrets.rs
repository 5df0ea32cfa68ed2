//! The `shared_secrets` table: entries replicas share, by name, each a value sealed by
//! the host that wrote it (the registry never sees one in the clear; see
//! `secrets/seal.rs`).

use super::{Registry, RegistryError, params};

impl Registry {
    /// The sealed value stored under `name`, if any.
    pub fn shared_secret(&self, name: &str) -> Result<Option<String>, RegistryError> {
        self.db
            .query_opt(
                "SELECT sealed FROM shared_secrets WHERE name = ?1",
                &params![name],
            )?
            .map(|row| row.text(0))
            .transpose()
    }

    /// Stores `sealed` under `name`, replacing any earlier value.
    pub fn put_shared_secret(&self, name: &str, sealed: &str) -> Result<(), RegistryError> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or_default();
        self.db.execute(
            "INSERT INTO shared_secrets (name, sealed, updated_ms) VALUES (?1, ?2, ?3)
             ON CONFLICT (name) DO UPDATE SET sealed = excluded.sealed, updated_ms = excluded.updated_ms",
            &params![name, sealed, now],
        )?;
        Ok(())
    }

    /// Deletes the entries whose name starts with `prefix` written before `cutoff_ms`
    /// (unix milliseconds); returns how many.
    pub fn sweep_shared_secrets(
        &self,
        prefix: &str,
        cutoff_ms: i64,
    ) -> Result<usize, RegistryError> {
        let swept = self.db.execute(
            "DELETE FROM shared_secrets WHERE substr(name, 1, length(?1)) = ?1 AND updated_ms < ?2",
            &params![prefix, cutoff_ms],
        )?;
        Ok(swept as usize)
    }

    /// Deletes `name` and returns its sealed value, if this call deleted it (of two
    /// hosts taking it at once, one gets it): one statement.
    pub fn take_shared_secret(&self, name: &str) -> Result<Option<String>, RegistryError> {
        self.db
            .query_opt(
                "DELETE FROM shared_secrets WHERE name = ?1 RETURNING sealed",
                &params![name],
            )?
            .map(|row| row.text(0))
            .transpose()
    }

    /// Deletes `name`; returns whether this call deleted it (of two hosts deleting it
    /// at once, one is told it did).
    pub fn delete_shared_secret(&self, name: &str) -> Result<bool, RegistryError> {
        Ok(self
            .db
            .execute("DELETE FROM shared_secrets WHERE name = ?1", &params![name])?
            > 0)
    }
}
