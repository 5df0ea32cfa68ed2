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
        let inserted = self.db.execute(
            "INSERT INTO gateway_tokens (id, agent, fingerprint, secret_ref) VALUES (?1, ?2, ?3, ?4)",
            &params![&token.id, &token.agent, &token.fingerprint, &token.secret_ref],
        );
        self.memo.forget();
        inserted.map(drop)
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
        if let Some(token) = self.kept_token(fingerprint) {
            return Ok(Some(token));
        }
        let stamp = self.memo.stamp();
        let asked = self.db.query(&token_query(), &params![fingerprint]);
        self.token_from(fingerprint, asked, stamp)
    }

    /// [`Registry::token_by_fingerprint`] for async callers (a gateway request): on
    /// PostgreSQL the task awaits the answer, no thread blocks; while other hosts'
    /// changes are heard, a token found is kept in memory until a token changes
    /// anywhere (see `grant_memo.rs`).
    pub async fn token_by_fingerprint_async(
        &self,
        fingerprint: &str,
    ) -> Result<Option<TokenRecord>, RegistryError> {
        if let Some(token) = self.kept_token(fingerprint) {
            return Ok(Some(token));
        }
        let stamp = self.memo.stamp();
        let asked = self
            .db
            .query_async(&token_query(), &params![fingerprint])
            .await;
        self.token_from(fingerprint, asked, stamp)
    }

    /// The kept token with `fingerprint`; without one, the listener is started (once),
    /// so that later answers may be kept.
    fn kept_token(&self, fingerprint: &str) -> Option<TokenRecord> {
        let kept = self.memo.recall_token(fingerprint);
        if kept.is_none() {
            self.db.hear_changes();
        }
        kept
    }

    /// A token query's answer (sent at `stamp`), kept in memory and for outages, or
    /// recalled during one.
    fn token_from(
        &self,
        fingerprint: &str,
        asked: Result<Vec<super::db::Row>, RegistryError>,
        stamp: super::grant_memo::Stamp,
    ) -> Result<Option<TokenRecord>, RegistryError> {
        let asked = asked.and_then(|rows| rows.first().map(token_from_row).transpose());
        match asked {
            Ok(token) => {
                self.recall.token_seen(fingerprint, token.as_ref());
                if let Some(token) = &token {
                    self.memo.remember_token(fingerprint, token, stamp);
                }
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
        let deleted = self.db.query_opt(
            &format!("DELETE FROM gateway_tokens WHERE id = ?1 RETURNING {TOKEN_COLUMNS}"),
            &params![id],
        );
        self.memo.forget();
        deleted?.map(|row| token_from_row(&row)).transpose()
    }
}

/// The query finding a token by its fingerprint.
fn token_query() -> String {
    format!("SELECT {TOKEN_COLUMNS} FROM gateway_tokens WHERE fingerprint = ?1")
}
