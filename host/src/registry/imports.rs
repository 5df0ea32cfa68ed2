//! The `import_previews` table: what `airlock import` showed (digests only), and the
//! database clock previews expire by.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{Registry, RegistryError, corrupt, params, to_json};

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
        let (request, entries) = (to_json(request), to_json(entries));
        let row = self.db.query_opt(
            "INSERT INTO import_previews (request, entries) VALUES (?1, ?2) RETURNING id",
            &params![&request, &entries],
        )?;
        row.ok_or_else(|| RegistryError::Corrupt("an import preview got no id".into()))?
            .int(0)
    }

    /// The newest import preview, if any.
    pub fn latest_import_preview(&self) -> Result<Option<ImportPreview>, RegistryError> {
        let Some(row) = self.db.query_opt(
            "SELECT id, created_at, request, entries FROM import_previews ORDER BY id DESC LIMIT 1",
            &[],
        )?
        else {
            return Ok(None);
        };
        Ok(Some(ImportPreview {
            id: row.int(0)?,
            created_at: row.int(1)?,
            request: serde_json::from_str(&row.text(2)?)
                .map_err(|e| corrupt("import preview", "request", e))?,
            entries: serde_json::from_str(&row.text(3)?)
                .map_err(|e| corrupt("import preview", "entries", e))?,
        }))
    }

    /// The database's current time (unix seconds), the clock previews are judged by.
    pub fn now(&self) -> Result<i64, RegistryError> {
        self.db
            .query_opt("SELECT unixepoch()", &[])?
            .ok_or_else(|| RegistryError::Corrupt("the database has no clock".into()))?
            .int(0)
    }
}
