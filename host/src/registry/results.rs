//! The `results` table: the index of retained results, by service and owning agent.

use rusqlite::params;
use serde::Serialize;

use super::{Registry, RegistryError};

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
        let mut db = self.db.lock().expect("registry lock poisoned");
        let tx = db.transaction()?;
        {
            let mut insert = tx.prepare_cached(
                "INSERT OR REPLACE INTO results (output_id, service, agent, size, digest, complete, redacted)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?;
            for entry in entries {
                insert.execute(params![
                    entry.output_id,
                    entry.service,
                    entry.agent,
                    entry.size,
                    entry.digest,
                    entry.complete,
                    entry.redacted
                ])?;
            }
        }
        tx.commit()?;
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
}
