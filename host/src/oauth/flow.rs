//! The flows: the interactive authorization (loopback listener, discovery, dynamic
//! registration, PKCE URL, code exchange) and the non-interactive access token with its
//! silent refresh.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rmcp::transport::auth::{AuthError, AuthorizationManager, AuthorizationMetadata};
use tokio::net::TcpListener;

use crate::config::OAuthClient;
use crate::secrets::SecretStore;

use super::callback::{FAILURE_PAGE, SUCCESS_PAGE, respond, state_of, wait_for_callback};
use super::store::{
    ClientRegistration, StoreAdapter, Stored, blocking, now_secs, read_record, token_fields,
};
use super::{
    CALLBACK_PATH, OAuthError, OpenUrl, REFRESH_MARGIN_SECS, auth_flow, describe, flow,
    not_authorized, scrub,
};

/// The client name sent with dynamic client registration.
const CLIENT_NAME: &str = "Airlock";

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
    client: &OAuthClient,
    open: OpenUrl<'_>,
    wait: Duration,
) -> Result<(), OAuthError> {
    authorize_with_challenge(store, service, url, None, client, open, wait).await
}

/// [`authorize`], seeding discovery with the `WWW-Authenticate` value of a 401 (or 403
/// `insufficient_scope`) answer the caller already has: its `resource_metadata` pointer
/// is followed first and its `scope` is what gets requested.
pub async fn authorize_with_challenge(
    store: &SecretStore,
    service: &str,
    url: &str,
    challenge: Option<&str>,
    configured: &OAuthClient,
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

    let (manager, auth_url, state, _) =
        prepare(store, service, url, challenge, configured, &redirect_uri).await?;

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
            scrub(&e.to_string(), None, &state),
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

/// The start of an authorization-code flow whose browser returns to `redirect_uri`:
/// discovery (seeded with `challenge`), the client (configured, metadata document or
/// registered), the token record over `store` under `service`, and the PKCE
/// authorization URL (its PKCE state kept in the shared store when `store` shares
/// sign-ins between replicas). Returns the manager that finishes the flow, the URL,
/// its state and the client.
pub(super) async fn prepare(
    store: &SecretStore,
    service: &str,
    url: &str,
    challenge: Option<&str>,
    configured: &OAuthClient,
    redirect_uri: &str,
) -> Result<(AuthorizationManager, String, String, ClientRegistration), OAuthError> {
    let (mut manager, metadata) = discover(service, url, challenge).await?;
    let cimd_supported = metadata
        .additional_fields
        .get("client_id_metadata_document_supported")
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false);
    let scopes = scopes_for(&manager, &configured.scopes).await;
    let scope_refs: Vec<&str> = scopes.iter().map(String::as_str).collect();
    let client = choose_client(
        &mut manager,
        service,
        configured,
        cimd_supported,
        redirect_uri,
        &scope_refs,
    )
    .await?;
    manager.set_credential_store(StoreAdapter::new(store, service, url, client.clone()));
    if super::shared_flow::shares_flows(store) {
        manager.set_state_store(super::shared_flow::SharedStateStore {
            store: store.clone(),
        });
    }

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
    Ok((manager, auth_url, state, client))
}

/// Exchanges the browser's `code` (and RFC 9207 `issuer`) through `manager`, which
/// stores the tokens; one save at a time per `service` in this process.
pub(super) async fn exchange(
    manager: &AuthorizationManager,
    service: &str,
    code: &str,
    state: &str,
    issuer: Option<&str>,
) -> Result<(), OAuthError> {
    tracing::info!(service = %service, "OAuth: exchanging the authorization code");
    let lock = service_lock(service);
    let _guard = lock.lock().await;
    match manager
        .exchange_code_for_token_with_issuer(code, state, issuer)
        .await
    {
        Ok(_) => {
            tracing::info!(service = %service, "OAuth: authorized");
            Ok(())
        }
        Err(e) => Err(flow(
            service,
            "token exchange",
            scrub(&describe(&e), Some(code), state),
        )),
    }
}

/// Discovers the authorization server for `service` at `url` (seeded with the
/// `WWW-Authenticate` value `challenge` when there is one): a manager with its metadata
/// set, and a copy of that metadata.
pub(super) async fn discover(
    service: &str,
    url: &str,
    challenge: Option<&str>,
) -> Result<(AuthorizationManager, AuthorizationMetadata), OAuthError> {
    tracing::info!(service = %service, "OAuth: discovering the authorization server");
    let mut manager = AuthorizationManager::new(url)
        .await
        .map_err(|e| auth_flow(service, "discovery", &e))?;
    let metadata = match manager.resolve_metadata_from_challenge(challenge).await {
        Ok(resolution) => {
            if !resolution.source.is_discovered() {
                tracing::info!(
                    service = %service,
                    "OAuth: the server publishes no metadata; using the default endpoints"
                );
            }
            resolution.metadata
        }
        Err(e) => match super::legacy::legacy_metadata(url, &e).await {
            Some(metadata) => {
                tracing::info!(
                    service = %service,
                    "OAuth: a 2025-03-26 server's metadata names an issuer under its origin; taking it as named"
                );
                metadata
            }
            None => return Err(auth_flow(service, "discovery", &e)),
        },
    };
    manager.set_metadata(metadata.clone());
    Ok((manager, metadata))
}

/// The scopes to ask for: the configured ones, else those the server suggests.
pub(super) async fn scopes_for(
    manager: &AuthorizationManager,
    configured: &[String],
) -> Vec<String> {
    if configured.is_empty() {
        manager.select_initial_scopes(&[]).await
    } else {
        configured.to_vec()
    }
}

/// The client the flow uses, in this order: the pre-registered one when configured;
/// else the client ID metadata document URL when configured and the authorization
/// server says it supports them; else one registered dynamically.
async fn choose_client(
    manager: &mut AuthorizationManager,
    service: &str,
    configured: &OAuthClient,
    cimd_supported: bool,
    redirect_uri: &str,
    scopes: &[&str],
) -> Result<ClientRegistration, OAuthError> {
    let given = if let Some(id) = &configured.client_id {
        tracing::info!(service = %service, "OAuth: using the pre-registered client");
        Some((id.clone(), configured.client_secret.clone()))
    } else if let Some(url) = configured
        .client_metadata_url
        .as_ref()
        .filter(|_| cimd_supported)
    {
        tracing::info!(service = %service, "OAuth: using the client ID metadata document");
        Some((url.clone(), None))
    } else {
        None
    };
    if let Some((client_id, client_secret)) = given {
        let registration = ClientRegistration {
            client_id,
            client_secret,
            redirect_uri: redirect_uri.to_string(),
            subject: None,
        };
        let config = registration
            .config()
            .with_scopes(scopes.iter().map(|s| s.to_string()).collect());
        manager
            .configure_client(config)
            .map_err(|e| auth_flow(service, "client configuration", &e))?;
        return Ok(registration);
    }
    if configured.client_metadata_url.is_some() {
        tracing::info!(
            service = %service,
            "OAuth: the authorization server does not accept client ID metadata documents; registering a client"
        );
    }
    tracing::info!(service = %service, "OAuth: registering a client");
    let registered = manager
        .register_client(CLIENT_NAME, redirect_uri, scopes)
        .await
        .map_err(|e| auth_flow(service, "client registration", &e))?;
    Ok(ClientRegistration {
        client_id: registered.client_id.clone(),
        client_secret: registered.client_secret.clone(),
        redirect_uri: redirect_uri.to_string(),
        subject: None,
    })
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
        .map_err(|message| {
            flow(
                &service,
                "browser callback",
                scrub(&message.0, None, &state),
            )
        })?;
    drop(listener);
    let outcome = exchange(&manager, &service, &hit.code, &state, hit.issuer.as_deref()).await;
    match &outcome {
        Ok(()) => respond(hit.stream, "200 OK", SUCCESS_PAGE).await,
        Err(_) => respond(hit.stream, "400 Bad Request", FAILURE_PAGE).await,
    }
    outcome
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
    token(store, service, url, false).await
}

/// A new access token from the stored refresh token, whatever the stored token's expiry
/// says: after a server refused that token (revoked, or expired early). Errors as
/// [`access_token`].
pub async fn refresh_access_token(
    store: &SecretStore,
    service: &str,
    url: &str,
) -> Result<String, OAuthError> {
    token(store, service, url, true).await
}

async fn token(
    store: &SecretStore,
    service: &str,
    url: &str,
    force_refresh: bool,
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
    if !force_refresh && !needs_refresh(record.obtained_at, record.expires_at, now_secs()) {
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
    manager
        .configure_client(record.client.config())
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
            // Another host sharing these tokens (a replica) may have spent a rotating
            // refresh token first: then its refreshed tokens are stored.
            if let Some(token) = super::store::stored_fresh_token(
                store,
                service,
                url,
                &record.client.client_id,
                record.client.subject.as_deref(),
            )
            .await?
            .filter(|token| *token != tokens.access_token)
            {
                tracing::info!(service = %service, "OAuth: another host refreshed the token first");
                return Ok(token);
            }
            Err(not_authorized(
                service,
                "the authorization server refused the refresh token",
            ))
        }
        Err(e) => Err(auth_flow(service, "refresh", &e)),
    }
}

/// Whether a token obtained at `obtained_at` and expiring at `expires_at` (unix seconds;
/// `None` = the server gave no lifetime) must be refreshed at `now`: within
/// [`REFRESH_MARGIN_SECS`] of expiry, or within half its lifetime for short-lived tokens
/// (so a 30-second token is not refreshed on every use).
pub(super) fn needs_refresh(obtained_at: u64, expires_at: Option<u64>, now: u64) -> bool {
    expires_at.is_some_and(|at| {
        let margin = REFRESH_MARGIN_SECS.min(at.saturating_sub(obtained_at) / 2);
        at <= now.saturating_add(margin)
    })
}

/// The per-service lock serializing refreshes (and the final save of an authorization)
/// within this process.
pub(super) fn service_lock(service: &str) -> Arc<tokio::sync::Mutex<()>> {
    type Locks = std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>;
    static LOCKS: OnceLock<Locks> = OnceLock::new();
    let mut locks = LOCKS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    locks.entry(service.to_string()).or_default().clone()
}
