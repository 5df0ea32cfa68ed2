//! `airlock serve --http ADDR`: the gateway over streamable HTTP on one endpoint, `/mcp`
//! (rmcp's server transport in session mode), behind the rules a network service needs:
//!
//! - it binds loopback unless `--allow-remote` is given, and a remote bind needs at least
//!   one bearer token (`airlock serve tokens add`);
//! - `Host` and `Origin` are checked against DNS rebinding (403);
//! - a bearer token names the agent; a wrong one is 401, and on loopback a request
//!   without one acts as the configured agent;
//! - request bodies are capped, the number of sessions is capped (503), and idle
//!   sessions expire;
//! - every refusal is a clear status with a JSON-RPC error body, logged without secrets.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::Response;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use super::Gateway;
use super::guard::{Guard, refuse};
use super::tokens::TokenBook;
use super::{DEFAULT_SESSION_IDLE, MAX_MESSAGE_BYTES, ServeOptions};
use crate::Airlock;

/// How the HTTP endpoint runs.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Where to listen (port 0 picks a free port).
    pub addr: SocketAddr,
    /// Whether a non-loopback address may be bound.
    pub allow_remote: bool,
    /// Most downstream sessions at once.
    pub max_sessions: usize,
    /// How long an idle session is kept.
    pub session_idle: Duration,
    /// Largest request body, in bytes.
    pub max_body_bytes: usize,
    /// Host names (besides loopback) accepted in `Host` and `Origin` when serving
    /// remotely.
    pub allowed_hosts: Vec<String>,
    /// Whether a bearer token is required on loopback too (it always is remotely).
    pub require_token: bool,
    /// Access tokens from an identity provider (`[serve.auth]`): every request then
    /// needs a token, the provider's or (unless turned off) one of Airlock's own.
    pub auth: Option<crate::config::ServeAuth>,
    /// The gateway's base URL as browsers reach it (`https://airlock.example.com`):
    /// where an agent's sign-in to a per-agent service comes back to
    /// (`/oauth/callback`). Default: the bound address on loopback, else the origin of
    /// `[serve.auth] audience`.
    pub public_url: Option<String>,
}

impl HttpOptions {
    /// Defaults for `addr`: loopback only, 64 sessions, 30 minutes idle, 40 MiB bodies.
    pub fn new(addr: SocketAddr) -> Self {
        HttpOptions {
            addr,
            allow_remote: false,
            max_sessions: 64,
            session_idle: DEFAULT_SESSION_IDLE,
            max_body_bytes: MAX_MESSAGE_BYTES,
            allowed_hosts: Vec::new(),
            require_token: false,
            auth: None,
            public_url: None,
        }
    }
}

/// Why the HTTP endpoint could not start.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// A non-loopback address without `--allow-remote`.
    #[error(
        "{0} is not a loopback address; serving beyond this machine needs --allow-remote and a bearer token (`airlock serve tokens add --agent NAME`)"
    )]
    RemoteNotAllowed(SocketAddr),
    /// A remote bind without any token.
    #[error(
        "serving on {0} needs at least one bearer token: create one with `airlock serve tokens add --agent NAME`, or accept an identity provider's access tokens with [serve.auth]"
    )]
    NoTokens(SocketAddr),
    /// The tokens could not be read.
    #[error("cannot read the gateway tokens: {0}")]
    Tokens(String),
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// The server failed while running.
    #[error("the HTTP server failed: {0}")]
    Serve(std::io::Error),
}

async fn guard(State(guard): State<Arc<Guard>>, mut request: Request, next: Next) -> Response {
    let agent = match guard.authenticate(request.headers()).await {
        Ok(agent) => agent,
        Err(refusal) => return *refusal,
    };
    let opens_session = request.method() == axum::http::Method::POST
        && !request.headers().contains_key("mcp-session-id");
    if opens_session && guard.sessions.sessions.read().await.len() >= guard.max_sessions {
        return refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            -32000,
            "the gateway's session limit is reached; close an unused session and retry",
        );
    }
    request.extensions_mut().insert(agent);
    next.run(request).await
}

async fn not_found() -> Response {
    refuse(
        StatusCode::NOT_FOUND,
        -32601,
        "Not found: the MCP endpoint is /mcp (the operator console is /console; health checks are /healthz and /readyz; metrics are /metrics; sign-ins come back to /oauth/callback)",
    )
}

/// Serves `airlock` at `http://ADDR/mcp` until `shutdown` is cancelled, then closes every
/// upstream session. `bound` receives the address actually bound (port 0 picks one).
pub async fn serve_http(
    airlock: Airlock,
    serve: ServeOptions,
    http: HttpOptions,
    data_dir: &std::path::Path,
    shutdown: CancellationToken,
    bound: Option<tokio::sync::oneshot::Sender<SocketAddr>>,
) -> Result<(), HttpError> {
    let loopback = http.addr.ip().is_loopback();
    if !loopback && !http.allow_remote {
        return Err(HttpError::RemoteNotAllowed(http.addr));
    }
    let tokens = TokenBook::with_registry(airlock.registry(), data_dir)
        .map_err(|e| HttpError::Tokens(e.to_string()))?;
    if (!loopback || http.require_token)
        && http.auth.is_none()
        && tokens
            .list()
            .map_err(|e| HttpError::Tokens(e.to_string()))?
            .is_empty()
    {
        return Err(HttpError::NoTokens(http.addr));
    }
    let gateway = Arc::new(Gateway::new(airlock, serve.clone()));
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = Some(http.session_idle);
    sessions.session_config.channel_capacity = 64;
    let sessions = Arc::new(sessions);
    let config = StreamableHttpServerConfig::default()
        .with_max_request_body_bytes(http.max_body_bytes)
        .disable_allowed_hosts()
        .disable_allowed_origins()
        .with_cancellation_token(shutdown.child_token());
    let factory_gateway = gateway.clone();
    let mcp = StreamableHttpService::new(
        move || Ok(factory_gateway.http_session()),
        sessions.clone(),
        config,
    );
    let identity = http
        .auth
        .clone()
        .map(|auth| Arc::new(super::identity::Identity::new(auth)));
    let guard_state = Arc::new(Guard {
        loopback,
        token_required: !loopback || http.require_token || identity.is_some(),
        default_agent: serve.agent.clone(),
        tokens,
        allowed_hosts: http.allowed_hosts.clone(),
        max_sessions: http.max_sessions.max(1),
        sessions,
        identity: identity.clone(),
        airlock: gateway.airlock.clone(),
    });
    let console =
        super::console::Console::start(gateway.airlock.clone(), data_dir, shutdown.clone());
    let health = super::health::Health::new(gateway.airlock.clone(), guard_state.clone());
    let recording = super::metrics::start(&gateway.airlock);
    let scrape = super::metrics::Scrape {
        guard: guard_state.clone(),
    };
    let app = axum::Router::new()
        .nest_service("/mcp", mcp)
        .layer(middleware::map_response(super::wire::rewrite_responses))
        .layer(middleware::from_fn_with_state(guard_state.clone(), guard))
        .merge(super::identity::router(identity))
        .merge(super::health::router(Arc::new(health)))
        .merge(super::metrics::router(Arc::new(scrape)))
        .merge(super::console::router(console, guard_state))
        .fallback(not_found);
    #[cfg(feature = "http")]
    let app = app.merge(super::callback::router(
        gateway.airlock.services().authorizations().clone(),
    ));
    let app = app.layer(middleware::from_fn(super::metrics::count_requests));
    let listener = tokio::net::TcpListener::bind(http.addr)
        .await
        .map_err(|source| HttpError::Bind {
            addr: http.addr,
            source,
        })?;
    let local = listener.local_addr().map_err(HttpError::Serve)?;
    tracing::info!("airlock serve: listening on http://{local}/mcp");
    // Agents sign in to per-agent services through this gateway from now on.
    #[cfg(feature = "http")]
    gateway
        .airlock
        .services()
        .authorizations()
        .redirect_to(super::callback::redirect_for(
            http.public_url.as_deref(),
            local,
            http.auth.as_ref().map(|auth| auth.audience.as_str()),
        ));
    if let Some(bound) = bound {
        let _ = bound.send(local);
    }
    let stop = shutdown.clone();
    let served = axum::serve(listener, app.into_make_service())
        .with_graceful_shutdown(async move { stop.cancelled().await })
        .await;
    gateway.close_all().await;
    if let Some(recording) = recording {
        recording.abort();
    }
    served.map_err(HttpError::Serve)
}
