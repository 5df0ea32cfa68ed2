//! The `results` table: the index of retained results, by service and owning agent.

use serde::Serialize;

use super::db::Db;
use super::{Registry, RegistryError, params};

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

impl Registry {
    /// Records a retained result in the index.
    pub fn index_result(&self, entry: &ResultEntry) -> Result<(), RegistryError> {
        self.index_results(std::slice::from_ref(entry))
    }

    /// Records a batch of retained results in the index, in one transaction.
    pub fn index_results(&self, entries: &[ResultEntry]) -> Result<(), RegistryError> {
        let sizes: Vec<i64> = entries.iter().map(|e| e.size as i64).collect();
        let statements: Vec<_> = entries
            .iter()
            .zip(&sizes)
            .map(|(entry, size)| {
                (
                    "INSERT INTO results (output_id, service, agent, size, digest, complete, redacted)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                     ON CONFLICT (output_id) DO UPDATE SET service = excluded.service,
                        agent = excluded.agent, size = excluded.size, digest = excluded.digest,
                        complete = excluded.complete, redacted = excluded.redacted",
                    params![
                        &entry.output_id,
                        &entry.service,
                        &entry.agent,
                        *size,
                        &entry.digest,
                        entry.complete,
                        entry.redacted
                    ]
                    .to_vec(),
                )
            })
            .collect();
        self.db.transaction(&statements)
    }

    /// Every indexed result, as (output id, service).
    pub fn indexed_results(&self) -> Result<Vec<(String, String)>, RegistryError> {
        self.db
            .query("SELECT output_id, service FROM results", &[])?
            .iter()
            .map(|row| Ok((row.text(0)?, row.text(1)?)))
            .collect()
    }

    /// Removes the index rows of `ids` (outputs the store no longer holds), in one
    /// transaction.
    pub fn unindex_results(&self, ids: &[String]) -> Result<(), RegistryError> {
        let statements: Vec<_> = ids
            .iter()
            .map(|id| {
                (
                    "DELETE FROM results WHERE output_id = ?1",
                    params![id].to_vec(),
                )
            })
            .collect();
        self.db.transaction(&statements)
    }

    /// The indexed results of `service` owned by `agent`, newest first.
    pub fn results(&self, service: &str, agent: &str) -> Result<Vec<ResultEntry>, RegistryError> {
        // Ties within a second go to the later insert: SQLite's rowid, PostgreSQL's seq.
        let sql = match self.db {
            Db::Sqlite(_) => {
                "SELECT output_id, service, agent, size, digest, complete, redacted FROM results
                 WHERE service = ?1 AND agent = ?2 ORDER BY created_at DESC, rowid DESC"
            }
            #[cfg(feature = "postgres")]
            Db::Postgres(_) => {
                "SELECT output_id, service, agent, size, digest, complete, redacted FROM results
                 WHERE service = ?1 AND agent = ?2 ORDER BY created_at DESC, seq DESC"
            }
        };
        self.db
            .query(sql, &params![service, agent])?
            .iter()
            .map(|row| {
                Ok(ResultEntry {
                    output_id: row.text(0)?,
                    service: row.text(1)?,
                    agent: row.text(2)?,
                    size: row.int(3)? as u64,
                    digest: row.text(4)?,
                    complete: row.boolean(5)?,
                    redacted: row.boolean(6)?,
                })
            })
            .collect()
    }
}
