//! Where tokens live: the record stored under `oauth:NAME` in the secret store, rmcp's
//! `CredentialStore` over it (with vendor extras pruned), and logout / is_authorized.

use std::pin::Pin;
use std::time::{SystemTime, UNIX_EPOCH};

use rmcp::transport::auth::{AuthError, CredentialStore, OAuthTokenResponse, StoredCredentials};
use serde::{Deserialize, Serialize};

use crate::secrets::{SecretError, SecretStore};

use super::{OAuthError, StepFailure};

/// The version of the stored record's format.
const RECORD_VERSION: u32 = 1;

/// The token-response fields kept in the store (vendor extras such as `id_token` are
/// dropped: Airlock never uses them, and some OS credential stores limit entry sizes).
const KEPT_TOKEN_FIELDS: &[&str] = &[
    "access_token",
    "token_type",
    "expires_in",
    "refresh_token",
    "scope",
];

/// Forgets the stored tokens of `service`. Returns whether there were any.
pub fn logout(store: &SecretStore, service: &str) -> Result<bool, OAuthError> {
    Ok(store.delete(&store_key(service))?)
}

/// Whether usable-looking tokens are stored for `service` (for status; never returns
/// them, and does not check expiry or the server).
pub fn is_authorized(store: &SecretStore, service: &str) -> Result<bool, OAuthError> {
    Ok(match read_record(store, service)? {
        Stored::Found(record) => record.credentials.token_response.is_some(),
        Stored::Missing | Stored::Unreadable => false,
    })
}

/// The secret-store key of `service`'s OAuth record.
fn store_key(service: &str) -> String {
    format!("oauth:{service}")
}

/// The client Airlock registered with the authorization server.
#[derive(Clone, Serialize, Deserialize)]
pub(super) struct ClientRegistration {
    pub(super) client_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) client_secret: Option<String>,
    pub(super) redirect_uri: String,
    /// Whom the tokens act for, when a credential of the user's obtained them (an
    /// identity assertion: the SHA-256 of the ID token, never the token): tokens
    /// obtained for another subject are not reused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) subject: Option<String>,
}

impl ClientRegistration {
    /// rmcp's client settings for this client (no scopes: those are the flow's).
    pub(super) fn config(&self) -> rmcp::transport::auth::OAuthClientConfig {
        let config = rmcp::transport::auth::OAuthClientConfig::new(
            self.client_id.clone(),
            self.redirect_uri.clone(),
        );
        match &self.client_secret {
            Some(secret) => config.with_client_secret(secret.clone()),
            None => config,
        }
    }
}

/// The record stored under `oauth:NAME`. Deliberately not `Debug`.
#[derive(Clone, Serialize, Deserialize)]
pub(super) struct StoredAuthorization {
    version: u32,
    /// The MCP server URL the tokens were issued for.
    pub(super) resource: String,
    pub(super) client: ClientRegistration,
    /// rmcp's credentials: token response, granted scopes, received-at, issuer.
    pub(super) credentials: StoredCredentials,
    /// When the token response was obtained (unix seconds).
    pub(super) obtained_at: u64,
    /// When the access token expires (unix seconds), if the server said.
    #[serde(default)]
    pub(super) expires_at: Option<u64>,
}

/// What the store holds for a service.
pub(super) enum Stored {
    Missing,
    Unreadable,
    Found(Box<StoredAuthorization>),
}

pub(super) fn read_record(store: &SecretStore, service: &str) -> Result<Stored, SecretError> {
    let Some(text) = store.get(&store_key(service))? else {
        return Ok(Stored::Missing);
    };
    Ok(match serde_json::from_str::<StoredAuthorization>(&text) {
        Ok(record) if record.version == RECORD_VERSION => Stored::Found(Box::new(record)),
        _ => Stored::Unreadable,
    })
}

/// The standard fields of a token response, read through its serialized (RFC 6749)
/// form so this crate needs no direct `oauth2` dependency.
#[derive(Deserialize)]
pub(super) struct TokenFields {
    pub(super) access_token: String,
    #[serde(default)]
    pub(super) refresh_token: Option<String>,
    #[serde(default)]
    expires_in: Option<u64>,
}

pub(super) fn token_fields(response: &OAuthTokenResponse) -> Option<TokenFields> {
    serde_json::to_value(response)
        .ok()
        .and_then(|v| serde_json::from_value(v).ok())
}

pub(super) fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// rmcp's `CredentialStore` over the secret store: rmcp saves the token response here
/// after the code exchange and after each refresh, together with the registration this
/// adapter was made with.
#[derive(Clone)]
pub(super) struct StoreAdapter {
    store: SecretStore,
    service: String,
    resource: String,
    client: ClientRegistration,
}

impl StoreAdapter {
    pub(super) fn new(
        store: &SecretStore,
        service: &str,
        resource: &str,
        client: ClientRegistration,
    ) -> Self {
        StoreAdapter {
            store: store.clone(),
            service: service.to_string(),
            resource: resource.to_string(),
            client,
        }
    }

    /// The record for `credentials`: vendor extras dropped, expiry computed.
    fn record(&self, credentials: StoredCredentials) -> StoredAuthorization {
        let credentials = prune(credentials);
        let obtained_at = credentials.token_received_at.unwrap_or_else(now_secs);
        let expires_in = credentials
            .token_response
            .as_ref()
            .and_then(token_fields)
            .and_then(|t| t.expires_in);
        StoredAuthorization {
            version: RECORD_VERSION,
            resource: self.resource.clone(),
            client: self.client.clone(),
            credentials,
            obtained_at,
            expires_at: expires_in.map(|secs| obtained_at.saturating_add(secs)),
        }
    }

    fn load_blocking(&self) -> Result<Option<StoredCredentials>, AuthError> {
        match read_record(&self.store, &self.service) {
            Ok(Stored::Found(record)) => Ok(Some(record.credentials)),
            Ok(Stored::Missing | Stored::Unreadable) => Ok(None),
            Err(e) => Err(AuthError::CredentialStoreError(e.to_string())),
        }
    }

    fn save_blocking(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let text = serde_json::to_string(&self.record(credentials)).map_err(|_| {
            AuthError::CredentialStoreError("the OAuth record does not serialize".into())
        })?;
        self.store
            .put(&store_key(&self.service), &text)
            .map_err(|e| AuthError::CredentialStoreError(e.to_string()))
    }

    fn clear_blocking(&self) -> Result<(), AuthError> {
        self.store
            .delete(&store_key(&self.service))
            .map(|_| ())
            .map_err(|e| AuthError::CredentialStoreError(e.to_string()))
    }
}

/// The future type of an `#[async_trait]` method (written out: this crate does not
/// depend on `async-trait`).
type StoreFuture<'a, T> =
    Pin<Box<dyn std::future::Future<Output = Result<T, AuthError>> + Send + 'a>>;

impl CredentialStore for StoreAdapter {
    fn load<'life0, 'async_trait>(
        &'life0 self,
    ) -> StoreFuture<'async_trait, Option<StoredCredentials>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        let this = self.clone();
        Box::pin(async move {
            match blocking(move || this.load_blocking()).await {
                Ok(result) => result,
                Err(failure) => Err(AuthError::CredentialStoreError(failure.0)),
            }
        })
    }

    fn save<'life0, 'async_trait>(
        &'life0 self,
        credentials: StoredCredentials,
    ) -> StoreFuture<'async_trait, ()>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        let this = self.clone();
        Box::pin(async move {
            match blocking(move || this.save_blocking(credentials)).await {
                Ok(result) => result,
                Err(failure) => Err(AuthError::CredentialStoreError(failure.0)),
            }
        })
    }

    fn clear<'life0, 'async_trait>(&'life0 self) -> StoreFuture<'async_trait, ()>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        let this = self.clone();
        Box::pin(async move {
            match blocking(move || this.clear_blocking()).await {
                Ok(result) => result,
                Err(failure) => Err(AuthError::CredentialStoreError(failure.0)),
            }
        })
    }
}

/// `credentials` with only the standard token-response fields.
fn prune(credentials: StoredCredentials) -> StoredCredentials {
    let Ok(mut value) = serde_json::to_value(&credentials) else {
        return credentials;
    };
    if let Some(serde_json::Value::Object(token)) = value.get_mut("token_response") {
        token.retain(|k, _| KEPT_TOKEN_FIELDS.contains(&k.as_str()));
    }
    serde_json::from_value(value).unwrap_or(credentials)
}

/// Runs secret-store work (file I/O, or an OS credential store that may prompt) off the
/// async workers.
pub(super) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, StepFailure> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|_| StepFailure::from("the token store task failed"))
}

/// The access token stored for `service` at `url`, issued to `client_id` for `subject`
/// (see [`ClientRegistration::subject`]), while it does not need refreshing (see
/// [`super::flow::needs_refresh`]); `None` otherwise. The store is read on a blocking
/// thread.
pub(super) async fn stored_fresh_token(
    store: &SecretStore,
    service: &str,
    url: &str,
    client_id: &str,
    subject: Option<&str>,
) -> Result<Option<String>, OAuthError> {
    let record = {
        let (store, key) = (store.clone(), service.to_string());
        blocking(move || read_record(&store, &key))
            .await
            .map_err(|e| super::flow(service, "reading the token store", e))??
    };
    let Stored::Found(record) = record else {
        return Ok(None);
    };
    if record.resource != url
        || record.client.client_id != client_id
        || record.client.subject.as_deref() != subject
    {
        return Ok(None);
    }
    let fresh = record
        .credentials
        .token_response
        .as_ref()
        .and_then(token_fields)
        .filter(|_| !super::flow::needs_refresh(record.obtained_at, record.expires_at, now_secs()));
    Ok(fresh.map(|tokens| tokens.access_token))
}
