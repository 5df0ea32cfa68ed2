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

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::Gateway;
use super::handler::AuthenticatedAgent;
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
        "serving on {0} needs at least one bearer token: create one with `airlock serve tokens add --agent NAME`"
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

/// What the request checks need.
pub(super) struct Guard {
    loopback: bool,
    /// Whether every request needs a bearer token (remote, or `require_token`).
    pub(super) token_required: bool,
    pub(super) default_agent: String,
    pub(super) tokens: TokenBook,
    allowed_hosts: Vec<String>,
    max_sessions: usize,
    sessions: Arc<LocalSessionManager>,
}

/// A refusal: `status` with a JSON-RPC error body naming what is wrong.
pub(super) fn refuse(status: StatusCode, code: i64, message: &str) -> Response {
    let body = json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}});
    let mut response = (status, axum::Json(body)).into_response();
    if status == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"airlock\""),
        );
    }
    response
}

/// The host part of a `Host` header or an origin's authority (`[::1]:80` -> `::1`).
fn host_of(authority: &str) -> &str {
    let authority = authority.trim();
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split(']').next().unwrap_or("");
    }
    authority.rsplit_once(':').map_or(authority, |(h, port)| {
        if port.chars().all(|c| c.is_ascii_digit()) {
            h
        } else {
            authority
        }
    })
}

fn is_loopback_name(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

impl Guard {
    fn host_allowed(&self, host: &str) -> bool {
        is_loopback_name(host)
            || (!self.loopback
                && (self.allowed_hosts.is_empty()
                    || self
                        .allowed_hosts
                        .iter()
                        .any(|h| h.eq_ignore_ascii_case(host))))
    }

    /// Checks `Host` and `Origin` (DNS rebinding), then the bearer token.
    fn check(&self, headers: &HeaderMap) -> Result<AuthenticatedAgent, Box<Response>> {
        self.check_host_and_origin(headers)?;
        match bearer_of(headers) {
            Some(token) => self.agent_of_token(token),
            None if !self.token_required => Ok(AuthenticatedAgent(self.default_agent.clone())),
            None => Err(Box::new(refuse(
                StatusCode::UNAUTHORIZED,
                -32001,
                "Unauthorized: a bearer token is required (Authorization: Bearer TOKEN)",
            ))),
        }
    }

    /// Refuses a request whose `Host` or `Origin` names a host this gateway does not
    /// serve (DNS rebinding, cross-site requests).
    pub(super) fn check_host_and_origin(&self, headers: &HeaderMap) -> Result<(), Box<Response>> {
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .map(host_of)
            .unwrap_or("");
        if !self.host_allowed(host) {
            tracing::warn!(
                host,
                "refused a request for a host this gateway does not serve"
            );
            return Err(Box::new(refuse(
                StatusCode::FORBIDDEN,
                -32600,
                "Forbidden: the Host header names a host this gateway does not serve",
            )));
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("");
            let origin_host = origin
                .split_once("://")
                .map(|(_, rest)| host_of(rest.split('/').next().unwrap_or("")))
                .unwrap_or("");
            if origin != "null" && !self.host_allowed(origin_host) {
                tracing::warn!(origin, "refused a cross-origin request");
                return Err(Box::new(refuse(
                    StatusCode::FORBIDDEN,
                    -32600,
                    "Forbidden: requests from this Origin are not allowed",
                )));
            }
        }
        Ok(())
    }

    /// The agent a bearer token names; 401 for an unknown token.
    pub(super) fn agent_of_token(&self, token: &str) -> Result<AuthenticatedAgent, Box<Response>> {
        match self.tokens.agent_of(token) {
            Ok(Some(agent)) => Ok(AuthenticatedAgent(agent)),
            Ok(None) => Err(Box::new(refuse(
                StatusCode::UNAUTHORIZED,
                -32001,
                "Unauthorized: the bearer token is not valid",
            ))),
            Err(super::tokens::TokenError::Registry(e)) if e.is_unavailable() => {
                tracing::warn!("cannot check a bearer token not seen before the outage: {e}");
                let mut refusal = refuse(
                    StatusCode::SERVICE_UNAVAILABLE,
                    -32000,
                    "registry_unavailable: the gateway's registry cannot be reached to check this bearer token; retry shortly",
                );
                refusal
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("2"));
                Err(Box::new(refusal))
            }
            Err(e) => {
                tracing::error!("cannot check a bearer token: {e}");
                Err(Box::new(refuse(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    -32603,
                    "the gateway cannot check tokens right now",
                )))
            }
        }
    }
}

/// The token of an `Authorization: Bearer TOKEN` header.
pub(super) fn bearer_of(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| {
            h.strip_prefix("Bearer ")
                .or_else(|| h.strip_prefix("bearer "))
        })
        .map(str::trim)
}

async fn guard(State(guard): State<Arc<Guard>>, mut request: Request, next: Next) -> Response {
    let agent = match guard.check(request.headers()) {
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
        "Not found: the MCP endpoint is /mcp (the operator console is /console; health checks are /healthz and /readyz; metrics are /metrics)",
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
    let guard_state = Arc::new(Guard {
        loopback,
        token_required: !loopback || http.require_token,
        default_agent: serve.agent.clone(),
        tokens,
        allowed_hosts: http.allowed_hosts.clone(),
        max_sessions: http.max_sessions.max(1),
        sessions,
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
        .merge(super::health::router(Arc::new(health)))
        .merge(super::metrics::router(Arc::new(scrape)))
        .merge(super::console::router(console, guard_state))
        .fallback(not_found)
        .layer(middleware::from_fn(super::metrics::count_requests));
    let listener = tokio::net::TcpListener::bind(http.addr)
        .await
        .map_err(|source| HttpError::Bind {
            addr: http.addr,
            source,
        })?;
    let local = listener.local_addr().map_err(HttpError::Serve)?;
    tracing::info!("airlock serve: listening on http://{local}/mcp");
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_and_origins_are_read_without_their_ports() {
        assert_eq!(host_of("127.0.0.1:8765"), "127.0.0.1");
        assert_eq!(host_of("[::1]:80"), "::1");
        assert_eq!(host_of("localhost"), "localhost");
        assert_eq!(host_of("evil.example.com"), "evil.example.com");
        assert!(is_loopback_name("LOCALHOST"));
        assert!(is_loopback_name("::1"));
        assert!(!is_loopback_name("evil.example.com"));
    }
}
