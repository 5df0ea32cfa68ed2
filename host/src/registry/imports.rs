//! The `import_previews` table: what `airlock import` showed (digests only), and the
//! database clock previews expire by.

use std::collections::BTreeMap;

use rusqlite::{OptionalExtension, params};
use serde_json::Value;

use super::{Registry, RegistryError, corrupt, to_json};

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

impl Registry {
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
