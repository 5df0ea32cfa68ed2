//! OAuth for remote MCP servers (`auth = "oauth"`): the glue between rmcp's OAuth client
//! (`rmcp::transport::auth`) and Airlock's [`SecretStore`].
//!
//! rmcp does the protocol — metadata discovery from the 401 challenge and the well-known
//! URLs, dynamic client registration, the PKCE (S256) authorization URL, the code
//! exchange and the refresh. This module adds what a host needs around it:
//!
//! - [`authorize`]: the interactive flow, with a one-shot loopback listener on
//!   `127.0.0.1` receiving the browser's redirect;
//! - [`access_token`]: a valid token without interaction (the stored one, or a silent
//!   refresh), used when a session connects;
//! - [`logout`] and [`is_authorized`].
//!
//! Tokens for service `NAME` live in the secret store under `oauth:NAME`, as one JSON
//! record: the client registration (client id, optional secret, redirect URI), rmcp's
//! stored credentials (the token response, granted scopes, when it was received, the
//! issuer), when the token was obtained and when it expires, and the server URL it was
//! issued for. rmcp reads and writes that record through its `CredentialStore` trait,
//! implemented here over the secret store, so tokens are never kept only in memory.
//! (rmcp's PKCE state store stays in memory on purpose: the verifier lives only as long
//! as the one flow, in one process, and is never written to disk.)
//!
//! Nothing here logs a token, a code, a verifier or an authorization URL; tracing gets
//! the step and the service only.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rmcp::transport::auth::{
    AuthError, AuthorizationCallback, AuthorizationManager, CredentialStore, OAuthClientConfig,
    OAuthTokenResponse, StoredCredentials,
};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::secrets::{SecretError, SecretStore};

/// A token expiring within this many seconds is refreshed before use.
pub const REFRESH_MARGIN_SECS: u64 = 60;

/// The path of the loopback redirect URI (`http://127.0.0.1:PORT/callback`).
pub const CALLBACK_PATH: &str = "/callback";

/// The client name sent with dynamic client registration.
const CLIENT_NAME: &str = "Airlock";

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

/// Longest request head read from one loopback connection.
const MAX_REQUEST_BYTES: usize = 16 * 1024;

/// How long one loopback connection may take to send its request line.
const REQUEST_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Longest error message kept from the server or rmcp, in characters.
const MAX_MESSAGE_CHARS: usize = 500;

const SUCCESS_PAGE: &str = "<!doctype html><html><head><meta charset=\"utf-8\"><title>Airlock</title></head><body><p>Airlock: authorized, you can close this tab.</p></body></html>";
const FAILURE_PAGE: &str = "<!doctype html><html><head><meta charset=\"utf-8\"><title>Airlock</title></head><body><p>Airlock: authorization failed; the terminal says why. You can close this tab.</p></body></html>";
const NOT_FOUND_PAGE: &str = "<!doctype html><html><head><meta charset=\"utf-8\"><title>Airlock</title></head><body><p>Not found.</p></body></html>";

/// An OAuth failure. No variant's message carries a token, an authorization code, a PKCE
/// verifier or an authorization URL.
#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    /// No usable stored authorization (none stored, expired without a refresh token, or
    /// the refresh was refused): the user must run `airlock servers auth NAME`.
    #[error(
        "service \"{service}\" needs authorization: run `airlock servers auth {service}` ({detail})"
    )]
    NotAuthorized {
        /// The service's name.
        service: String,
        /// Why the stored authorization cannot be used.
        detail: String,
    },
    /// A step of the flow failed (discovery, registration, the browser callback, the
    /// code exchange, the refresh…).
    #[error("OAuth for service \"{service}\" failed at {step}: {message}")]
    Flow {
        /// The service's name.
        service: String,
        /// The step that failed.
        step: &'static str,
        /// What failed (scrubbed of codes and state; never a token).
        message: String,
    },
    /// The secret store failed.
    #[error("OAuth token store: {0}")]
    Store(#[from] SecretError),
}

/// Opens the authorization URL for the user. The CLI passes a function that runs
/// `$AIRLOCK_BROWSER` (a command given the URL as its one argument) if set, else
/// `xdg-open`/`open`, else prints the URL to stderr (the one place the URL may be shown,
/// to the user's terminal, never through tracing).
pub type OpenUrl<'a> = &'a (dyn Fn(&str) -> Result<(), String> + Send + Sync);

/// The HTTP header carrying `token`: `("Authorization", "Bearer TOKEN")`.
pub fn authorization_header(token: &str) -> (String, String) {
    ("Authorization".to_string(), format!("Bearer {token}"))
}

/// Interactive authorization for `service` at `url`: binds a one-shot loopback listener
/// (`http://127.0.0.1:PORT/callback`), discovers the authorization server, registers a
/// client dynamically, builds the PKCE authorization URL and hands it to `open`, waits up
/// to `wait` for the browser's redirect (answering it with a small page), exchanges the
/// code and stores the tokens. Returns when the tokens are stored.
///
/// Same as [`authorize_with_challenge`] without a challenge: discovery probes the server
/// for one itself.
pub async fn authorize(
    store: &SecretStore,
    service: &str,
    url: &str,
    open: OpenUrl<'_>,
    wait: Duration,
) -> Result<(), OAuthError> {
    authorize_with_challenge(store, service, url, None, open, wait).await
}

/// [`authorize`], seeding discovery with the `WWW-Authenticate` value of a 401 (or 403
/// `insufficient_scope`) answer the caller already has: its `resource_metadata` pointer
/// is followed first and its `scope` is what gets requested.
pub async fn authorize_with_challenge(
    store: &SecretStore,
    service: &str,
    url: &str,
    challenge: Option<&str>,
    open: OpenUrl<'_>,
    wait: Duration,
) -> Result<(), OAuthError> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .map_err(|e| flow(service, "loopback listener", e))?;
    let port = listener
        .local_addr()
        .map_err(|e| flow(service, "loopback listener", e))?
        .port();
    let redirect_uri = format!("http://127.0.0.1:{port}{CALLBACK_PATH}");

    tracing::info!(service = %service, "OAuth: discovering the authorization server");
    let mut manager = AuthorizationManager::new(url)
        .await
        .map_err(|e| auth_flow(service, "discovery", &e))?;
    let resolution = manager
        .resolve_metadata_from_challenge(challenge)
        .await
        .map_err(|e| auth_flow(service, "discovery", &e))?;
    if !resolution.source.is_discovered() {
        tracing::info!(
            service = %service,
            "OAuth: the server publishes no metadata; using the default endpoints"
        );
    }
    manager.set_metadata(resolution.metadata);
    let scopes = manager.select_initial_scopes(&[]).await;
    let scope_refs: Vec<&str> = scopes.iter().map(String::as_str).collect();

    tracing::info!(service = %service, "OAuth: registering a client");
    let registered = manager
        .register_client(CLIENT_NAME, &redirect_uri, &scope_refs)
        .await
        .map_err(|e| auth_flow(service, "client registration", &e))?;
    let client = ClientRegistration {
        client_id: registered.client_id.clone(),
        client_secret: registered.client_secret.clone(),
        redirect_uri: redirect_uri.clone(),
    };
    manager.set_credential_store(StoreAdapter::new(store, service, url, client));

    let auth_url = manager
        .get_authorization_url(&scope_refs)
        .await
        .map_err(|e| auth_flow(service, "authorization request", &e))?;
    let state = state_of(&auth_url).ok_or_else(|| {
        flow(
            service,
            "authorization request",
            "the authorization URL carries no state",
        )
    })?;

    // The callback is served by its own task, from before the browser is opened: an
    // opener that waits for the page to load (a script running curl, say) must not wait
    // on this task, and the page is answered only once the tokens are stored.
    tracing::info!(service = %service, "OAuth: waiting for the browser");
    let mut task = tokio::spawn(receive_and_exchange(
        manager,
        listener,
        state.clone(),
        service.to_string(),
    ));
    let multi_thread = matches!(
        tokio::runtime::Handle::current().runtime_flavor(),
        tokio::runtime::RuntimeFlavor::MultiThread
    );
    let opened = if multi_thread {
        tokio::task::block_in_place(|| open(&auth_url))
    } else {
        open(&auth_url)
    };
    if let Err(e) = opened {
        task.abort();
        return Err(flow(
            service,
            "opening the browser",
            scrub(&e, None, &state),
        ));
    }
    match tokio::time::timeout(wait, &mut task).await {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(_)) => Err(flow(
            service,
            "browser callback",
            "the callback task stopped unexpectedly",
        )),
        Err(_) => {
            task.abort();
            Err(flow(
                service,
                "browser callback",
                format!("no answer from the browser within {} s", wait.as_secs()),
            ))
        }
    }
}

/// Waits for the browser's redirect on `listener`, exchanges its code through `manager`
/// (which stores the tokens) and answers the browser with the outcome.
async fn receive_and_exchange(
    manager: AuthorizationManager,
    listener: TcpListener,
    state: String,
    service: String,
) -> Result<(), OAuthError> {
    let hit = wait_for_callback(&listener, &state)
        .await
        .map_err(|message| flow(&service, "browser callback", scrub(&message, None, &state)))?;
    drop(listener);

    tracing::info!(service = %service, "OAuth: exchanging the authorization code");
    let lock = service_lock(&service);
    let _guard = lock.lock().await;
    match manager
        .exchange_code_for_token_with_issuer(&hit.code, &state, hit.issuer.as_deref())
        .await
    {
        Ok(_) => {
            respond(hit.stream, "200 OK", SUCCESS_PAGE).await;
            tracing::info!(service = %service, "OAuth: authorized");
            Ok(())
        }
        Err(e) => {
            respond(hit.stream, "400 Bad Request", FAILURE_PAGE).await;
            Err(flow(
                &service,
                "token exchange",
                scrub(&describe(&e), Some(&hit.code), &state),
            ))
        }
    }
}

/// A valid access token for `service` at `url` without user interaction: the stored one
/// if it does not expire within [`REFRESH_MARGIN_SECS`], else a silent refresh with the
/// refresh token (storing the new tokens). No stored tokens, tokens issued for another
/// URL, or a refused refresh → [`OAuthError::NotAuthorized`]; a refresh that fails for
/// another reason (network, server error) → [`OAuthError::Flow`].
pub async fn access_token(
    store: &SecretStore,
    service: &str,
    url: &str,
) -> Result<String, OAuthError> {
    // One refresh at a time per service in this process; a waiter then reads the
    // refreshed record instead of spending the refresh token again.
    let lock = service_lock(service);
    let _guard = lock.lock().await;
    // Another Airlock process on the same data directory may be refreshing too: with
    // rotating refresh tokens only one may spend the token, the other then reads the
    // refreshed record.
    let _file_guard = {
        let (store, name) = (store.clone(), format!("oauth-{service}"));
        blocking(move || store.exclusive(&name))
            .await
            .map_err(|e| flow(service, "locking the token store", e))??
    };

    let record = {
        let (store, key_service) = (store.clone(), service.to_string());
        blocking(move || read_record(&store, &key_service))
            .await
            .map_err(|e| flow(service, "reading the token store", e))??
    };
    let record = match record {
        Stored::Missing => return Err(not_authorized(service, "no stored authorization")),
        Stored::Unreadable => {
            return Err(not_authorized(
                service,
                "the stored authorization is unreadable",
            ));
        }
        Stored::Found(record) => record,
    };
    if record.resource != url {
        return Err(not_authorized(
            service,
            "the stored authorization was issued for another URL",
        ));
    }
    let Some(tokens) = record
        .credentials
        .token_response
        .as_ref()
        .and_then(token_fields)
    else {
        return Err(not_authorized(service, "no stored access token"));
    };
    if !needs_refresh(record.obtained_at, record.expires_at, now_secs()) {
        return Ok(tokens.access_token);
    }
    if tokens.refresh_token.is_none() {
        return Err(not_authorized(
            service,
            "the access token expired and there is no refresh token",
        ));
    }

    tracing::info!(service = %service, "OAuth: refreshing the access token");
    let mut manager = AuthorizationManager::new(url)
        .await
        .map_err(|e| auth_flow(service, "refresh", &e))?;
    let resolution = manager
        .resolve_metadata()
        .await
        .map_err(|e| auth_flow(service, "discovery", &e))?;
    if let (Some(stored), Some(current)) = (
        record.credentials.issuer.as_deref(),
        resolution.metadata.issuer.as_deref(),
    ) && stored != current
    {
        return Err(not_authorized(
            service,
            "the server now names another authorization server",
        ));
    }
    manager.set_metadata(resolution.metadata);
    let mut config = OAuthClientConfig::new(
        record.client.client_id.clone(),
        record.client.redirect_uri.clone(),
    );
    if let Some(secret) = &record.client.client_secret {
        config = config.with_client_secret(secret.clone());
    }
    manager
        .configure_client(config)
        .map_err(|e| auth_flow(service, "refresh", &e))?;
    manager.set_credential_store(StoreAdapter::new(
        store,
        service,
        &record.resource,
        record.client.clone(),
    ));
    match manager.refresh_token().await {
        Ok(response) => token_fields(&response)
            .map(|t| t.access_token)
            .ok_or_else(|| {
                flow(
                    service,
                    "refresh",
                    "the token response carries no access token",
                )
            }),
        Err(AuthError::AuthorizationRequired | AuthError::TokenRefreshRejected(_)) => {
            Err(not_authorized(
                service,
                "the authorization server refused the refresh token",
            ))
        }
        Err(e) => Err(auth_flow(service, "refresh", &e)),
    }
}

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
struct ClientRegistration {
    client_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    client_secret: Option<String>,
    redirect_uri: String,
}

/// The record stored under `oauth:NAME`. Deliberately not `Debug`.
#[derive(Clone, Serialize, Deserialize)]
struct StoredAuthorization {
    version: u32,
    /// The MCP server URL the tokens were issued for.
    resource: String,
    client: ClientRegistration,
    /// rmcp's credentials: token response, granted scopes, received-at, issuer.
    credentials: StoredCredentials,
    /// When the token response was obtained (unix seconds).
    obtained_at: u64,
    /// When the access token expires (unix seconds), if the server said.
    #[serde(default)]
    expires_at: Option<u64>,
}

/// What the store holds for a service.
enum Stored {
    Missing,
    Unreadable,
    Found(Box<StoredAuthorization>),
}

fn read_record(store: &SecretStore, service: &str) -> Result<Stored, SecretError> {
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
struct TokenFields {
    access_token: String,
    #[serde(default)]
    refresh_token: Option<String>,
    #[serde(default)]
    expires_in: Option<u64>,
}

fn token_fields(response: &OAuthTokenResponse) -> Option<TokenFields> {
    serde_json::to_value(response)
        .ok()
        .and_then(|v| serde_json::from_value(v).ok())
}

/// Whether a token obtained at `obtained_at` and expiring at `expires_at` (unix seconds;
/// `None` = the server gave no lifetime) must be refreshed at `now`: within
/// [`REFRESH_MARGIN_SECS`] of expiry, or within half its lifetime for short-lived tokens
/// (so a 30-second token is not refreshed on every use).
fn needs_refresh(obtained_at: u64, expires_at: Option<u64>, now: u64) -> bool {
    expires_at.is_some_and(|at| {
        let margin = REFRESH_MARGIN_SECS.min(at.saturating_sub(obtained_at) / 2);
        at <= now.saturating_add(margin)
    })
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// rmcp's `CredentialStore` over the secret store: rmcp saves the token response here
/// after the code exchange and after each refresh, together with the registration this
/// adapter was made with.
#[derive(Clone)]
struct StoreAdapter {
    store: SecretStore,
    service: String,
    resource: String,
    client: ClientRegistration,
}

impl StoreAdapter {
    fn new(store: &SecretStore, service: &str, resource: &str, client: ClientRegistration) -> Self {
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
                Err(message) => Err(AuthError::CredentialStoreError(message)),
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
                Err(message) => Err(AuthError::CredentialStoreError(message)),
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
                Err(message) => Err(AuthError::CredentialStoreError(message)),
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
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, String> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|_| "the token store task failed".to_string())
}

/// The per-service lock serializing refreshes (and the final save of an authorization)
/// within this process.
fn service_lock(service: &str) -> Arc<tokio::sync::Mutex<()>> {
    type Locks = std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>;
    static LOCKS: OnceLock<Locks> = OnceLock::new();
    let mut locks = LOCKS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    locks.entry(service.to_string()).or_default().clone()
}

/// The `state` parameter of an authorization URL.
fn state_of(auth_url: &str) -> Option<String> {
    let url = reqwest::Url::parse(auth_url).ok()?;
    url.query_pairs()
        .find(|(k, _)| k == "state")
        .map(|(_, v)| v.into_owned())
}

/// What one request to the loopback listener carried.
#[derive(Debug, PartialEq, Eq)]
enum Callback {
    /// Not the callback path (a favicon…): answered 404, the wait goes on.
    Other,
    /// The authorization code, and the RFC 9207 issuer if the server sent one.
    Code {
        code: String,
        issuer: Option<String>,
    },
}

/// Reads a request target (`/callback?code=…&state=…`). An `error=` answer, a missing
/// code or state, or a state other than `expected_state` is an error message (never
/// carrying the code).
fn parse_callback(target: &str, expected_state: &str) -> Result<Callback, String> {
    if !target.starts_with('/') {
        return Ok(Callback::Other);
    }
    let Ok(url) = reqwest::Url::parse(&format!("http://127.0.0.1{target}")) else {
        return Ok(Callback::Other);
    };
    if url.path() != CALLBACK_PATH {
        return Ok(Callback::Other);
    }
    let pairs: Vec<(String, String)> = url.query_pairs().into_owned().collect();
    let param = |name: &str| {
        pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    if let Some(error) = param("error") {
        let detail = param("error_description")
            .map(|d| format!(": {}", clip(&d, 200)))
            .unwrap_or_default();
        return Err(format!(
            "the authorization server answered error \"{}\"{detail}",
            clip(&error, 100)
        ));
    }
    let callback = AuthorizationCallback::from_redirect_url(url.as_str())
        .map_err(|e| format!("the callback is incomplete: {e}"))?;
    if callback.csrf_token != expected_state {
        return Err("the callback's state does not match this authorization request".into());
    }
    Ok(Callback::Code {
        code: callback.code,
        issuer: callback.issuer,
    })
}

/// The callback request that carried the code; its connection waits for the answer page.
struct CallbackHit {
    code: String,
    issuer: Option<String>,
    stream: TcpStream,
}

/// Accepts loopback connections until one brings a request for [`CALLBACK_PATH`]; other
/// paths get a 404. Connections are read concurrently, so a browser's idle preconnect
/// does not hold the real request up.
async fn wait_for_callback(
    listener: &TcpListener,
    expected_state: &str,
) -> Result<CallbackHit, String> {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(Option<(String, String)>, TcpStream)>(8);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((mut stream, _peer)) => {
                    let tx = tx.clone();
                    tokio::spawn(async move {
                        let request =
                            tokio::time::timeout(REQUEST_READ_TIMEOUT, read_request_line(&mut stream))
                                .await
                                .ok()
                                .flatten();
                        let _ = tx.send((request, stream)).await;
                    });
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            },
            Some((request, stream)) = rx.recv() => {
                let Some((method, target)) = request else {
                    continue;
                };
                if method != "GET" {
                    respond(stream, "405 Method Not Allowed", NOT_FOUND_PAGE).await;
                    continue;
                }
                match parse_callback(&target, expected_state) {
                    Ok(Callback::Other) => respond(stream, "404 Not Found", NOT_FOUND_PAGE).await,
                    Ok(Callback::Code { code, issuer }) => {
                        return Ok(CallbackHit { code, issuer, stream });
                    }
                    Err(message) => {
                        respond(stream, "400 Bad Request", FAILURE_PAGE).await;
                        return Err(message);
                    }
                }
            }
        }
    }
}

/// The method and target of an HTTP/1 request (reads the head, up to
/// [`MAX_REQUEST_BYTES`]).
async fn read_request_line(stream: &mut TcpStream) -> Option<(String, String)> {
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_REQUEST_BYTES {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&chunk[..n]);
    }
    let head = String::from_utf8_lossy(&head);
    let line = head.split("\r\n").next()?;
    let mut parts = line.split_ascii_whitespace();
    let method = parts.next()?.to_string();
    let target = parts.next()?.to_string();
    Some((method, target))
}

/// Answers a loopback request with an HTML page and closes the connection.
async fn respond(mut stream: TcpStream, status: &str, body: &str) {
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

fn not_authorized(service: &str, detail: &str) -> OAuthError {
    OAuthError::NotAuthorized {
        service: service.to_string(),
        detail: detail.to_string(),
    }
}

fn flow(service: &str, step: &'static str, message: impl std::fmt::Display) -> OAuthError {
    OAuthError::Flow {
        service: service.to_string(),
        step,
        message: clip(&message.to_string(), MAX_MESSAGE_CHARS),
    }
}

fn auth_flow(service: &str, step: &'static str, error: &AuthError) -> OAuthError {
    flow(service, step, describe(error))
}

/// An error and its sources, `: `-joined (rmcp's discovery errors keep the cause in the
/// source chain).
fn describe(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let part = cause.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = cause.source();
    }
    text
}

/// `text` without the authorization code and state, should a server echo them.
fn scrub(text: &str, code: Option<&str>, state: &str) -> String {
    let mut known = vec![("state".to_string(), state.to_string())];
    if let Some(code) = code {
        known.push(("authorization code".to_string(), code.to_string()));
    }
    crate::launch::scrub(text, &known)
}

/// At most `max` characters of `text`, with `…` when cut.
fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token_response(value: serde_json::Value) -> OAuthTokenResponse {
        serde_json::from_value(value).expect("a token response")
    }

    fn adapter(store: &SecretStore, service: &str, url: &str) -> StoreAdapter {
        StoreAdapter::new(
            store,
            service,
            url,
            ClientRegistration {
                client_id: "client-1".into(),
                client_secret: Some("client-secret".into()),
                redirect_uri: "http://127.0.0.1:1/callback".into(),
            },
        )
    }

    async fn save(
        store: &SecretStore,
        service: &str,
        url: &str,
        token: serde_json::Value,
        received_at: u64,
    ) {
        let credentials = StoredCredentials::new(
            "client-1".into(),
            Some(token_response(token)),
            vec![],
            Some(received_at),
        );
        adapter(store, service, url)
            .save(credentials)
            .await
            .expect("saved");
    }

    #[test]
    fn expiry_decision() {
        let now = 1_000_000;
        let long_ago = now - 7200;
        assert!(
            !needs_refresh(long_ago, None, now),
            "no lifetime: used as is"
        );
        assert!(!needs_refresh(long_ago, Some(now + 3600), now));
        assert!(!needs_refresh(
            long_ago,
            Some(now + REFRESH_MARGIN_SECS + 1),
            now
        ));
        assert!(needs_refresh(
            long_ago,
            Some(now + REFRESH_MARGIN_SECS),
            now
        ));
        assert!(needs_refresh(long_ago, Some(now + 30), now));
        assert!(
            needs_refresh(long_ago, Some(now - 10), now),
            "already expired"
        );
        // A 4-second token just obtained is used, not refreshed at once.
        assert!(!needs_refresh(now, Some(now + 4), now));
        assert!(needs_refresh(now - 2, Some(now + 2), now));
    }

    #[test]
    fn callback_parsing() {
        let ok = parse_callback("/callback?code=abc&state=s1&iss=https%3A%2F%2Fas", "s1");
        assert_eq!(
            ok,
            Ok(Callback::Code {
                code: "abc".into(),
                issuer: Some("https://as".into())
            })
        );
        assert_eq!(parse_callback("/favicon.ico", "s1"), Ok(Callback::Other));
        assert_eq!(parse_callback("*", "s1"), Ok(Callback::Other));

        let wrong = parse_callback("/callback?code=abc&state=other", "s1").unwrap_err();
        assert!(wrong.contains("state"), "{wrong}");
        assert!(!wrong.contains("abc"), "never the code: {wrong}");
        assert!(
            parse_callback("/callback?code=abc", "s1").is_err(),
            "no state"
        );
        assert!(
            parse_callback("/callback?state=s1", "s1").is_err(),
            "no code"
        );

        let denied = parse_callback(
            "/callback?error=access_denied&error_description=no+thanks&state=s1",
            "s1",
        )
        .unwrap_err();
        assert!(
            denied.contains("access_denied") && denied.contains("no thanks"),
            "{denied}"
        );
    }

    #[test]
    fn state_comes_from_the_authorization_url() {
        assert_eq!(
            state_of("https://as.example/authorize?response_type=code&state=xyz%3D&client_id=c")
                .as_deref(),
            Some("xyz=")
        );
        assert_eq!(state_of("https://as.example/authorize?client_id=c"), None);
    }

    #[test]
    fn header_and_messages() {
        assert_eq!(
            authorization_header("t0k"),
            ("Authorization".to_string(), "Bearer t0k".to_string())
        );
        let e = not_authorized("github", "no stored authorization");
        assert!(
            e.to_string().contains(
                "service \"github\" needs authorization: run `airlock servers auth github`"
            ),
            "{e}"
        );
        let scrubbed = scrub(
            "bad code c0de-123 for state st4te-9",
            Some("c0de-123"),
            "st4te-9",
        );
        assert!(
            !scrubbed.contains("c0de-123") && !scrubbed.contains("st4te-9"),
            "{scrubbed}"
        );
        assert_eq!(clip("abcdef", 3), "abc…");
    }

    #[tokio::test]
    async fn stored_tokens_round_trip_without_extras() {
        let dir = tempfile::tempdir().unwrap();
        let store = SecretStore::open_file(dir.path()).unwrap();
        let url = "https://mcp.example/mcp";
        assert!(!is_authorized(&store, "svc").unwrap());
        let now = now_secs();
        save(
            &store,
            "svc",
            url,
            serde_json::json!({
                "access_token": "at-1", "token_type": "Bearer", "expires_in": 3600,
                "refresh_token": "rt-1", "scope": "a b", "id_token": "big-vendor-extra"
            }),
            now,
        )
        .await;
        assert!(is_authorized(&store, "svc").unwrap());

        let text = store.get("oauth:svc").unwrap().unwrap();
        assert!(!text.contains("big-vendor-extra"), "extras dropped: {text}");
        let Stored::Found(record) = read_record(&store, "svc").unwrap() else {
            panic!("record expected");
        };
        assert_eq!(record.resource, url);
        assert_eq!(record.client.client_id, "client-1");
        assert_eq!(
            record.client.client_secret.as_deref(),
            Some("client-secret")
        );
        assert_eq!(record.obtained_at, now);
        assert_eq!(record.expires_at, Some(now + 3600));

        let loaded = adapter(&store, "svc", url).load().await.unwrap().unwrap();
        let fields = token_fields(loaded.token_response.as_ref().unwrap()).unwrap();
        assert_eq!(fields.access_token, "at-1");
        assert_eq!(fields.refresh_token.as_deref(), Some("rt-1"));

        // Fresh: returned without touching the network.
        assert_eq!(access_token(&store, "svc", url).await.unwrap(), "at-1");
        // Another URL: never sent there.
        let other = access_token(&store, "svc", "https://elsewhere.example/mcp")
            .await
            .unwrap_err();
        assert!(matches!(other, OAuthError::NotAuthorized { .. }), "{other}");

        assert!(logout(&store, "svc").unwrap());
        assert!(!logout(&store, "svc").unwrap());
        assert!(!is_authorized(&store, "svc").unwrap());
        let none = access_token(&store, "svc", url).await.unwrap_err();
        assert!(
            none.to_string().contains("airlock servers auth svc"),
            "{none}"
        );
    }

    #[tokio::test]
    async fn expired_without_refresh_token_needs_authorization() {
        let dir = tempfile::tempdir().unwrap();
        let store = SecretStore::open_file(dir.path()).unwrap();
        let url = "https://mcp.example/mcp";
        save(
            &store,
            "svc",
            url,
            serde_json::json!({"access_token": "at-old", "token_type": "bearer", "expires_in": 3600}),
            now_secs() - 4000,
        )
        .await;
        let e = access_token(&store, "svc", url).await.unwrap_err();
        assert!(matches!(e, OAuthError::NotAuthorized { .. }), "{e}");
        assert!(!e.to_string().contains("at-old"), "{e}");

        // No lifetime given: the token is used as is.
        save(
            &store,
            "svc",
            url,
            serde_json::json!({"access_token": "at-forever", "token_type": "bearer"}),
            now_secs() - 1_000_000,
        )
        .await;
        assert_eq!(
            access_token(&store, "svc", url).await.unwrap(),
            "at-forever"
        );
    }

    #[tokio::test]
    async fn unreadable_record_needs_authorization() {
        let dir = tempfile::tempdir().unwrap();
        let store = SecretStore::open_file(dir.path()).unwrap();
        store.put("oauth:svc", "{not json").unwrap();
        assert!(!is_authorized(&store, "svc").unwrap());
        let e = access_token(&store, "svc", "https://x.example")
            .await
            .unwrap_err();
        assert!(matches!(e, OAuthError::NotAuthorized { .. }), "{e}");
    }

    #[tokio::test]
    async fn loopback_listener_takes_the_callback() {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let client = tokio::spawn(async move {
            // An idle preconnect must not hold the real request up.
            let _idle = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
            let mut other = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
            other
                .write_all(b"GET /favicon.ico HTTP/1.1\r\nHost: x\r\n\r\n")
                .await
                .unwrap();
            let mut answer = String::new();
            other.read_to_string(&mut answer).await.unwrap();
            assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
            let mut hit = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
            hit.write_all(b"GET /callback?code=c1&state=s1 HTTP/1.1\r\nHost: x\r\n\r\n")
                .await
                .unwrap();
            let mut answer = String::new();
            hit.read_to_string(&mut answer).await.unwrap();
            answer
        });
        let hit = tokio::time::timeout(Duration::from_secs(5), wait_for_callback(&listener, "s1"))
            .await
            .expect("in time")
            .expect("a callback");
        assert_eq!(hit.code, "c1");
        assert_eq!(hit.issuer, None);
        respond(hit.stream, "200 OK", SUCCESS_PAGE).await;
        let answer = client.await.unwrap();
        assert!(
            answer.starts_with("HTTP/1.1 200") && answer.contains("authorized"),
            "{answer}"
        );
    }

    #[tokio::test]
    async fn loopback_listener_refuses_a_foreign_state() {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
            s.write_all(b"GET /callback?code=c1&state=evil HTTP/1.1\r\n\r\n")
                .await
                .unwrap();
            let mut answer = String::new();
            let _ = s.read_to_string(&mut answer).await;
        });
        let e = tokio::time::timeout(Duration::from_secs(5), wait_for_callback(&listener, "s1"))
            .await
            .expect("in time")
            .err()
            .expect("refused");
        assert!(e.contains("state"), "{e}");
    }

    /// The public futures can be spawned (compile-time check).
    #[allow(dead_code)]
    fn futures_are_send(store: &SecretStore, open: OpenUrl<'_>) {
        fn send<T: Send>(_: T) {}
        send(authorize(store, "s", "u", open, Duration::from_secs(1)));
        send(access_token(store, "s", "u"));
    }
}
