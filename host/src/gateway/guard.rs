//! The checks every HTTP request passes before it reaches an endpoint: `Host` and
//! `Origin` against DNS rebinding, the bearer token naming the agent, and the refusal
//! each failure gets (a status with a JSON-RPC error body). `/mcp`, the console, the
//! health checks and `/metrics` share one [`Guard`].

use std::net::IpAddr;
use std::sync::Arc;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use serde_json::json;

use super::handler::AuthenticatedAgent;
use super::identity::{self, Caller, Identity, Refusal};
use super::tokens::TokenBook;
use crate::Airlock;

/// What the request checks need.
pub(super) struct Guard {
    /// Whether the gateway listens on loopback only.
    pub(super) loopback: bool,
    /// Whether every request needs a bearer token (remote, or `require_token`).
    pub(super) token_required: bool,
    pub(super) default_agent: String,
    pub(super) tokens: TokenBook,
    /// Host names (besides loopback) accepted when serving remotely.
    pub(super) allowed_hosts: Vec<String>,
    /// Most downstream sessions at once.
    pub(super) max_sessions: usize,
    /// The open downstream sessions.
    pub(super) sessions: Arc<LocalSessionManager>,
    /// The identity provider whose access tokens name agents (`[serve.auth]`).
    pub(super) identity: Option<Arc<Identity>>,
    /// The host whose access stage holds the grants of a token's groups.
    pub(super) airlock: Airlock,
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
    pub(super) async fn check(
        &self,
        headers: &HeaderMap,
    ) -> Result<AuthenticatedAgent, Box<Response>> {
        self.check_host_and_origin(headers)?;
        match bearer_of(headers) {
            Some(token) => self.agent_of_token(token).await,
            None if !self.token_required => Ok(AuthenticatedAgent(self.default_agent.clone())),
            None => Err(Box::new(refuse(
                StatusCode::UNAUTHORIZED,
                -32001,
                "Unauthorized: a bearer token is required (Authorization: Bearer TOKEN)",
            ))),
        }
    }

    /// [`Guard::check`], with access tokens of the identity provider when one is
    /// configured: a JWT is verified against its keys, Airlock's own tokens are accepted
    /// beside it unless `own_tokens = false`, and every 401 names the protected resource
    /// metadata, so a standard MCP client finds where to sign in.
    pub(super) async fn authenticate(
        &self,
        headers: &HeaderMap,
    ) -> Result<AuthenticatedAgent, Box<Response>> {
        let Some(identity) = &self.identity else {
            return self.check(headers).await;
        };
        self.check_host_and_origin(headers)?;
        let refused = |refusal: Refusal| Err(Box::new(refuse_token(identity, &refusal)));
        match bearer_of(headers) {
            Some(token) if Identity::is_jwt(token) => {
                let verified = identity.verify(token, |agent| self.reserved(agent)).await;
                verified
                    .map(|caller| self.admit(caller, token))
                    .or_else(refused)
            }
            Some(token) if identity.introspects() && !TokenBook::is_own(token) => {
                let answered = identity
                    .introspect(token, |agent| self.reserved(agent))
                    .await;
                answered
                    .map(|caller| self.admit(caller, token))
                    .or_else(refused)
            }
            Some(token) if identity.own_tokens() => {
                let agent = self.agent_of_token(token).await.map_err(|mut refusal| {
                    if refusal.status() == StatusCode::UNAUTHORIZED {
                        challenge(&mut refusal, identity.challenge(None));
                    }
                    refusal
                })?;
                // An agent of Airlock's own tokens holds nothing a provider's token gave.
                let access = self.airlock.access();
                access.hold_group_grants(&agent.0, &Default::default(), 0);
                self.airlock.agents().forget_access_token(&agent.0);
                Ok(agent)
            }
            Some(_) => refused(Refusal::Invalid(
                "this gateway accepts its identity provider's access tokens only".into(),
            )),
            None => {
                let mut refusal = refuse(
                    StatusCode::UNAUTHORIZED,
                    -32001,
                    "Unauthorized: an access token is required (Authorization: Bearer TOKEN); the WWW-Authenticate header names where to get one",
                );
                challenge(&mut refusal, identity.challenge(None));
                Err(Box::new(refusal))
            }
        }
    }

    /// The agent a provider's token names, holding what the token gives it until the
    /// token expires: its groups' services, and the token itself for token exchange.
    fn admit(&self, caller: Caller, token: &str) -> AuthenticatedAgent {
        let (agent, until) = (&caller.agent, caller.expires);
        let access = self.airlock.access();
        access.hold_group_grants(agent, &caller.group_services, until);
        self.airlock.agents().set_access_token(agent, token, until);
        AuthenticatedAgent(caller.agent)
    }

    /// Whether `agent` acts with Airlock's own tokens (the operator, the default agent,
    /// or an agent one of the gateway's tokens names), so no provider's token may name
    /// it. Asked once per provider token; a registry that cannot answer is a refusal.
    fn reserved(&self, agent: &str) -> Result<bool, String> {
        if agent == self.default_agent || agent == crate::DEFAULT_AGENT {
            return Ok(true);
        }
        let tokens = self
            .tokens
            .list()
            .map_err(|e| format!("cannot read the gateway's own tokens: {e}"))?;
        Ok(tokens.iter().any(|t| t.agent == agent))
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
    pub(super) async fn agent_of_token(
        &self,
        token: &str,
    ) -> Result<AuthenticatedAgent, Box<Response>> {
        match self.tokens.agent_of_async(token).await {
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

/// Sets the `WWW-Authenticate` challenge of a refusal.
fn challenge(response: &mut Response, value: String) {
    if let Ok(value) = HeaderValue::from_str(&value) {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
}

/// The answer to an access token the identity provider's rules refuse: 401
/// `invalid_token`, 403 `insufficient_scope`, or 503 while its keys cannot be read. It
/// is logged with its reason, never the token.
fn refuse_token(identity: &Identity, refusal: &Refusal) -> Response {
    let mut response = match refusal {
        Refusal::Invalid(why) => {
            tracing::info!("refused an access token: {why}");
            refuse(
                StatusCode::UNAUTHORIZED,
                -32001,
                &format!("Unauthorized: {why}"),
            )
        }
        Refusal::Scope(missing) => {
            tracing::info!(
                "refused an access token without scope {}",
                missing.join(", ")
            );
            refuse(
                StatusCode::FORBIDDEN,
                -32001,
                &format!(
                    "Forbidden: insufficient_scope: the access token lacks the scope {}",
                    missing.join(" ")
                ),
            )
        }
        Refusal::Unavailable(why) => {
            tracing::warn!("cannot verify access tokens: {why}");
            let mut response = refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                -32000,
                &format!(
                    "the identity provider's signing keys cannot be read now ({why}); retry shortly"
                ),
            );
            response.headers_mut().insert(
                header::RETRY_AFTER,
                HeaderValue::from(identity::RETRY_AFTER.as_secs()),
            );
            return response;
        }
    };
    challenge(&mut response, identity.challenge(Some(refusal)));
    response
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
