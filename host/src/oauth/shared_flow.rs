//! A sign-in whose browser may come back to another replica. When the secret store
//! shares sign-ins ([`SecretStore::shares`]: a PostgreSQL registry with `token_key`),
//! the replica that starts one keeps, sealed in the shared store, what finishing it
//! takes: rmcp's PKCE state (`oauth-state:…`, through [`SharedStateStore`]) and the
//! flow's own record (`oauth-flow:…`: whose tokens, for which server, which client).
//! Whichever replica the browser reaches takes the record (once: the delete decides)
//! and rebuilds the flow from it. Entries are named by a digest of the state, never the
//! state itself.

use std::pin::Pin;

use rmcp::transport::auth::{
    AuthError, AuthorizationManager, StateStore, StoredAuthorizationState,
};
use serde::{Deserialize, Serialize};
use sha2::Digest;

use super::store::{ClientRegistration, StoreAdapter, blocking, now_secs};
use super::{OAuthError, flow};
use crate::secrets::SecretStore;

/// What another replica needs to finish a sign-in.
#[derive(Clone, Serialize, Deserialize)]
pub(super) struct FlowRecord {
    /// Whose tokens (the service's per-agent name).
    pub(super) holder: String,
    /// The server the tokens are for.
    pub(super) url: String,
    /// The client the flow registered or was configured with.
    pub(super) client: ClientRegistration,
    /// When it started (unix seconds).
    pub(super) started_at: u64,
}

/// The key prefixes of a sign-in's shared entries.
pub(super) const PREFIXES: [&str; 2] = ["oauth-flow:", "oauth-state:"];

/// The shared-store key of the flow whose state is `state`.
pub(super) fn flow_key(state: &str) -> String {
    format!("oauth-flow:{}", digest(state))
}

fn state_key(csrf: &str) -> String {
    format!("oauth-state:{}", digest(csrf))
}

fn digest(text: &str) -> String {
    hex::encode(sha2::Sha256::digest(text.as_bytes()))
}

/// Whether `store` shares sign-ins between replicas.
pub(super) fn shares_flows(store: &SecretStore) -> bool {
    store.shares(PREFIXES[0])
}

/// Keeps `record` for the flow `state` in the shared store.
pub(super) async fn save(
    store: &SecretStore,
    state: &str,
    record: &FlowRecord,
) -> Result<(), OAuthError> {
    let text = serde_json::to_string(record)
        .map_err(|e| flow(&record.holder, "sharing the sign-in", e))?;
    let (store, key) = (store.clone(), flow_key(state));
    blocking(move || store.put(&key, &text))
        .await
        .map_err(|e| flow(&record.holder, "sharing the sign-in", e))?
        .map_err(OAuthError::Store)
}

/// Takes the shared record of the flow `state`: `None` when there is none, or another
/// replica took it first.
pub(super) async fn take(
    store: &SecretStore,
    state: &str,
) -> Result<Option<FlowRecord>, OAuthError> {
    let (store, key) = (store.clone(), flow_key(state));
    let taken = blocking(move || store.take(&key))
        .await
        .map_err(|e| flow("(shared sign-in)", "browser callback", e))?
        .map_err(OAuthError::Store)?;
    Ok(taken.and_then(|text| serde_json::from_str(&text).ok()))
}

/// Whether the shared record of the flow `state` is still there (no replica has
/// finished it yet).
pub(super) async fn pending(store: &SecretStore, state: &str) -> bool {
    let (store, key) = (store.clone(), flow_key(state));
    matches!(blocking(move || store.get(&key)).await, Ok(Ok(Some(_))))
}

/// Rebuilds, on this replica, the flow another started: discovery again, the same
/// client, the tokens stored under the record's holder, the PKCE state from the shared
/// store.
pub(super) async fn rebuild(
    store: &SecretStore,
    record: &FlowRecord,
) -> Result<AuthorizationManager, OAuthError> {
    let (mut manager, _) = super::flow::discover(&record.holder, &record.url, None).await?;
    manager
        .configure_client(record.client.config())
        .map_err(|e| super::auth_flow(&record.holder, "client configuration", &e))?;
    manager.set_credential_store(StoreAdapter::new(
        store,
        &record.holder,
        &record.url,
        record.client.clone(),
    ));
    manager.set_state_store(SharedStateStore {
        store: store.clone(),
    });
    Ok(manager)
}

impl FlowRecord {
    /// A record for `holder`'s flow at `url` with `client`, started now.
    pub(super) fn new(holder: &str, url: &str, client: ClientRegistration) -> Self {
        FlowRecord {
            holder: holder.to_string(),
            url: url.to_string(),
            client,
            started_at: now_secs(),
        }
    }
}

/// rmcp's PKCE state store over the shared secret store.
#[derive(Clone)]
pub(super) struct SharedStateStore {
    pub(super) store: SecretStore,
}

type StateFuture<'a, T> =
    Pin<Box<dyn std::future::Future<Output = Result<T, AuthError>> + Send + 'a>>;

fn store_error(e: impl std::fmt::Display) -> AuthError {
    AuthError::InternalError(format!("the shared sign-in store: {e}"))
}

impl SharedStateStore {
    /// Runs `job` on the entry of the flow `csrf` in the shared store, off the async
    /// workers.
    fn on_entry<T: Send + 'static>(
        &self,
        csrf: &str,
        job: impl FnOnce(&SecretStore, &str) -> Result<T, crate::secrets::SecretError> + Send + 'static,
    ) -> StateFuture<'static, T> {
        let (store, key) = (self.store.clone(), state_key(csrf));
        Box::pin(async move {
            blocking(move || job(&store, &key))
                .await
                .map_err(store_error)?
                .map_err(store_error)
        })
    }
}

impl StateStore for SharedStateStore {
    fn save<'life0, 'life1, 'async_trait>(
        &'life0 self,
        csrf_token: &'life1 str,
        state: StoredAuthorizationState,
    ) -> StateFuture<'async_trait, ()>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait,
    {
        match serde_json::to_string(&state) {
            Ok(text) => self.on_entry(csrf_token, move |store, key| store.put(key, &text)),
            Err(e) => Box::pin(std::future::ready(Err(store_error(e)))),
        }
    }

    fn load<'life0, 'life1, 'async_trait>(
        &'life0 self,
        csrf_token: &'life1 str,
    ) -> StateFuture<'async_trait, Option<StoredAuthorizationState>>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait,
    {
        let text = self.on_entry(csrf_token, |store, key| store.get(key));
        Box::pin(async move {
            text.await?
                .map(|text| serde_json::from_str(&text).map_err(store_error))
                .transpose()
        })
    }

    fn delete<'life0, 'life1, 'async_trait>(
        &'life0 self,
        csrf_token: &'life1 str,
    ) -> StateFuture<'async_trait, ()>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait,
    {
        self.on_entry(csrf_token, |store, key| store.delete(key).map(drop))
    }
}
