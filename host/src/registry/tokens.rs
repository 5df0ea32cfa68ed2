//! The `gateway_tokens` table: bearer tokens of `airlock serve --http`, by id, each with
//! its agent, the SHA-256 that recognises it and the secret-store reference of its value.

use super::db::Row;
use super::{Registry, RegistryError, params};

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

fn token_from_row(row: &Row) -> Result<TokenRecord, RegistryError> {
    Ok(TokenRecord {
        id: row.text(0)?,
        agent: row.text(1)?,
        fingerprint: row.text(2)?,
        secret_ref: row.text(3)?,
        created_at: row.int(4)?,
    })
}

const TOKEN_COLUMNS: &str = "id, agent, fingerprint, secret_ref, created_at";

impl Registry {
    /// Stores a new token.
    pub fn insert_token(&self, token: &TokenRecord) -> Result<(), RegistryError> {
        self.db.execute(
            "INSERT INTO gateway_tokens (id, agent, fingerprint, secret_ref) VALUES (?1, ?2, ?3, ?4)",
            &params![&token.id, &token.agent, &token.fingerprint, &token.secret_ref],
        )?;
        Ok(())
    }

    /// Every token, oldest first.
    pub fn tokens(&self) -> Result<Vec<TokenRecord>, RegistryError> {
        self.db
            .query(
                &format!("SELECT {TOKEN_COLUMNS} FROM gateway_tokens ORDER BY created_at, id"),
                &[],
            )?
            .iter()
            .map(token_from_row)
            .collect()
    }

    /// The token whose value has this fingerprint. While the database cannot be
    /// reached, a token it confirmed within the outage grace still counts; one it was
    /// seen not to hold never does.
    pub fn token_by_fingerprint(
        &self,
        fingerprint: &str,
    ) -> Result<Option<TokenRecord>, RegistryError> {
        let asked = self
            .db
            .query_opt(
                &format!("SELECT {TOKEN_COLUMNS} FROM gateway_tokens WHERE fingerprint = ?1"),
                &params![fingerprint],
            )
            .and_then(|row| row.map(|row| token_from_row(&row)).transpose());
        match asked {
            Ok(token) => {
                self.recall.token_seen(fingerprint, token.as_ref());
                Ok(token)
            }
            Err(e) if e.is_unavailable() => match self.recall.token(fingerprint) {
                Some(token) => Ok(Some(token)),
                None => Err(e),
            },
            Err(e) => Err(e),
        }
    }

    /// Deletes the token `id`; returns it when it existed.
    pub fn delete_token(&self, id: &str) -> Result<Option<TokenRecord>, RegistryError> {
        self.recall.forget_token(id);
        self.db
            .query_opt(
                &format!("DELETE FROM gateway_tokens WHERE id = ?1 RETURNING {TOKEN_COLUMNS}"),
                &params![id],
            )?
            .map(|row| token_from_row(&row))
            .transpose()
    }
}
