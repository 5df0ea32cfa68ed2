//! Bearer tokens for `airlock serve --http`: each names one agent. A token's value is
//! kept in the secret store and shown once, when it is made; the registry keeps its
//! agent, its SHA-256 (to recognise it) and the secret reference. `airlock serve tokens
//! add|list|remove` manages them.

use std::path::Path;
use std::sync::Arc;

use serde::Serialize;

use crate::registry::{Registry, RegistryError, TokenRecord};
use crate::secrets::{SecretError, SecretStore, new_reference};

/// A failure managing tokens. Messages never carry a token.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The registry failed.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// The secret store failed.
    #[error(transparent)]
    Secrets(#[from] SecretError),
    /// The agent name is not usable.
    #[error("invalid agent name {0:?}: use 1 to 64 letters, digits, '_', '-', '.' or '@'")]
    Agent(String),
    /// No token has that id.
    #[error("no gateway token with id \"{0}\"")]
    Unknown(String),
    /// The registry would not open.
    #[error(transparent)]
    Open(#[from] crate::StartError),
}

/// A token as listed: never its value.
#[derive(Debug, Clone, Serialize)]
pub struct TokenInfo {
    /// The token's id (for `remove`).
    pub id: String,
    /// The agent it acts as.
    pub agent: String,
    /// When it was made (unix seconds).
    pub created_at: i64,
}

/// The gateway's tokens: in the registry (so replicas sharing one recognise the same
/// tokens), their values in the data directory's secret store.
pub struct TokenBook {
    registry: Arc<Registry>,
    store: SecretStore,
}

/// What every one of the gateway's own tokens starts with.
const OWN_PREFIX: &str = "alk_";

fn fingerprint(token: &str) -> String {
    crate::digest::sha256(token.as_bytes())
}

pub(crate) fn valid_agent(agent: &str) -> bool {
    !agent.is_empty()
        && agent.len() <= 64
        && agent
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.@".contains(c))
}

impl TokenBook {
    /// The tokens of an open registry, with the secret store of `data_dir`.
    pub fn with_registry(
        registry: Arc<Registry>,
        data_dir: &Path,
    ) -> Result<TokenBook, TokenError> {
        Ok(TokenBook {
            registry,
            store: SecretStore::open(data_dir)?,
        })
    }

    /// The tokens of `stores`' registry, with their data directory's secret store.
    pub fn open(stores: &crate::Stores) -> Result<TokenBook, TokenError> {
        TokenBook::with_registry(stores.registry()?.clone(), stores.data_dir())
    }

    /// Whether `token` has the shape of one of the gateway's own tokens (`alk_…`).
    pub(crate) fn is_own(token: &str) -> bool {
        token.starts_with(OWN_PREFIX)
    }

    /// Makes a token for `agent`; returns its id and its value (shown once).
    pub fn add(&self, agent: &str) -> Result<(String, String), TokenError> {
        if !valid_agent(agent) {
            return Err(TokenError::Agent(agent.to_string()));
        }
        let value = format!(
            "{OWN_PREFIX}{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        let id = uuid::Uuid::new_v4().simple().to_string()[..12].to_string();
        let reference = new_reference();
        self.store.put(&reference, &value)?;
        let record = TokenRecord {
            id: id.clone(),
            agent: agent.to_string(),
            fingerprint: fingerprint(&value),
            secret_ref: reference.clone(),
            created_at: 0,
        };
        if let Err(e) = self.registry.insert_token(&record) {
            let _ = self.store.delete(&reference);
            return Err(e.into());
        }
        Ok((id, value))
    }

    /// Every token, oldest first.
    pub fn list(&self) -> Result<Vec<TokenInfo>, TokenError> {
        Ok(self
            .registry
            .tokens()?
            .into_iter()
            .map(|t| TokenInfo {
                id: t.id,
                agent: t.agent,
                created_at: t.created_at,
            })
            .collect())
    }

    /// Removes the token `id` (and its value from the secret store).
    pub fn remove(&self, id: &str) -> Result<TokenInfo, TokenError> {
        let record = self
            .registry
            .delete_token(id)?
            .ok_or_else(|| TokenError::Unknown(id.to_string()))?;
        if let Err(e) = self.store.delete(&record.secret_ref) {
            tracing::warn!("cannot delete a removed token's value from the secret store: {e}");
        }
        Ok(TokenInfo {
            id: record.id,
            agent: record.agent,
            created_at: record.created_at,
        })
    }

    /// Removes every token of `agent`; returns how many there were.
    pub fn remove_agent(&self, agent: &str) -> Result<usize, TokenError> {
        let ids: Vec<String> = self
            .registry
            .tokens()?
            .into_iter()
            .filter(|t| t.agent == agent)
            .map(|t| t.id)
            .collect();
        for id in &ids {
            self.remove(id)?;
        }
        Ok(ids.len())
    }

    /// The agent a presented token acts as, if it is one of ours. Blocking (the
    /// registry): for tools that run no async runtime.
    pub fn agent_of(&self, token: &str) -> Result<Option<String>, TokenError> {
        Ok(self
            .registry
            .token_by_fingerprint(&fingerprint(token))?
            .map(|t| t.agent))
    }

    /// [`TokenBook::agent_of`] for a request: awaited, no thread blocks; a token seen
    /// lately costs a map lookup while the registry's changes are heard.
    pub async fn agent_of_async(&self, token: &str) -> Result<Option<String>, TokenError> {
        Ok(self
            .registry
            .token_by_fingerprint_async(&fingerprint(token))
            .await?
            .map(|t| t.agent))
    }
}
