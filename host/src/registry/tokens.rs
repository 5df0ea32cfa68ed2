//! The `gateway_tokens` table: bearer tokens of `airlock serve --http`, by id, each with
//! its agent, the SHA-256 that recognises it and the secret-store reference of its value.

use rusqlite::{OptionalExtension, Row, params};

use super::{Registry, RegistryError};

/// One gateway token (its value is only referenced).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRecord {
    /// The token's id.
    pub id: String,
    /// The agent it acts as.
    pub agent: String,
    /// `sha256:` of the token's value.
    pub fingerprint: String,
    /// Where the value lives in the secret store.
    pub secret_ref: String,
    /// When it was made (unix seconds; set by the database).
    pub created_at: i64,
}

fn token_from_row(row: &Row) -> rusqlite::Result<TokenRecord> {
    Ok(TokenRecord {
        id: row.get(0)?,
        agent: row.get(1)?,
        fingerprint: row.get(2)?,
        secret_ref: row.get(3)?,
        created_at: row.get(4)?,
    })
}

const TOKEN_COLUMNS: &str = "id, agent, fingerprint, secret_ref, created_at";

impl Registry {
    /// Stores a new token.
    pub fn insert_token(&self, token: &TokenRecord) -> Result<(), RegistryError> {
        let db = self.db.lock().expect("registry lock poisoned");
        db.execute(
            "INSERT INTO gateway_tokens (id, agent, fingerprint, secret_ref) VALUES (?1, ?2, ?3, ?4)",
            params![token.id, token.agent, token.fingerprint, token.secret_ref],
        )?;
        Ok(())
    }

    /// Every token, oldest first.
    pub fn tokens(&self) -> Result<Vec<TokenRecord>, RegistryError> {
        let db = self.db.lock().expect("registry lock poisoned");
        let mut stmt = db.prepare(&format!(
            "SELECT {TOKEN_COLUMNS} FROM gateway_tokens ORDER BY created_at, id"
        ))?;
        let rows = stmt.query_map([], token_from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The token whose value has this fingerprint.
    pub fn token_by_fingerprint(
        &self,
        fingerprint: &str,
    ) -> Result<Option<TokenRecord>, RegistryError> {
        let db = self.db.lock().expect("registry lock poisoned");
        Ok(db
            .query_row(
                &format!("SELECT {TOKEN_COLUMNS} FROM gateway_tokens WHERE fingerprint = ?1"),
                [fingerprint],
                token_from_row,
            )
            .optional()?)
    }

    /// Deletes the token `id`; returns it when it existed.
    pub fn delete_token(&self, id: &str) -> Result<Option<TokenRecord>, RegistryError> {
        let db = self.db.lock().expect("registry lock poisoned");
        let found = db
            .query_row(
                &format!("SELECT {TOKEN_COLUMNS} FROM gateway_tokens WHERE id = ?1"),
                [id],
                token_from_row,
            )
            .optional()?;
        if found.is_some() {
            db.execute("DELETE FROM gateway_tokens WHERE id = ?1", [id])?;
        }
        Ok(found)
    }
}
