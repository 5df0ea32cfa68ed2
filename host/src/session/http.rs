//! Opening a session to a remote server (feature `http`): streamable HTTP first, the
//! legacy SSE transport only when the first attempt failed in a way that means "not a
//! streamable endpoint", decided on rmcp's typed errors, never on error text; an OAuth
//! server's access token from the secret store first, with one silent retry on a fresh
//! token.

use std::collections::BTreeMap;
use std::time::Duration;

use rmcp::service::{ClientInitializeError, serve_client, serve_client_with_lifecycle};
use rmcp::transport::streamable_http_client::StreamableHttpError;

use super::probe::{DiscoverGuard, newest_offered};
use super::progress::ProgressTap;
use super::{AirlockClient, Session, SessionError, TransportKind};
use crate::config::Auth;
use crate::secrets::SecretStore;

/// Opens a session to the HTTP server `name` at `url`; returns it with the OAuth access
/// token it was opened with, if any. `subject_token` is the agent's own access token, for
/// a service that exchanges it (`token_exchange`).
#[allow(clippy::too_many_arguments)]
pub(super) async fn connect_remote(
    name: &str,
    url: &str,
    headers: &BTreeMap<String, String>,
    auth: &Auth,
    startup_timeout: Duration,
    store: &SecretStore,
    subject_token: Option<&str>,
    agent: &str,
    client: AirlockClient,
) -> Result<(Session, Option<String>), SessionError> {
    // A per-agent service's tokens are the agent's own; others', the service's.
    let holder = crate::oauth::token_holder(name, auth, agent);
    let holder = holder.as_str();
    // A token without a person: the stored one, or (client credentials) a new
    // grant. Never interactive: an authorization-code service without usable
    // tokens fails with a message naming `airlock servers auth NAME`.
    let token_for = |fresh: bool| async move {
        let token = match auth {
            Auth::None => return Ok(None),
            Auth::OAuth(_) if fresh => crate::oauth::refresh_access_token(store, holder, url).await,
            Auth::OAuth(_) => crate::oauth::access_token(store, holder, url).await,
            Auth::ClientCredentials(cc) => {
                crate::oauth::client_credentials_token(store, name, url, cc, fresh).await
            }
            Auth::IdentityAssertion(assertion) => {
                crate::oauth::identity_assertion_token(store, name, url, assertion, fresh).await
            }
            Auth::TokenExchange(exchange) => {
                let Some(subject) = subject_token else {
                    return Err(SessionError::AgentUnauthorized(format!(
                        "service \"{name}\" acts as the calling user: it exchanges the access token the agent presented to `airlock serve --http` ([serve.auth]) for its own, and this agent presented none"
                    )));
                };
                crate::oauth::exchanged_token(name, url, exchange, subject, fresh).await
            }
        };
        token.map(Some).map_err(|e| match e {
            crate::oauth::OAuthError::NotAuthorized { detail, .. } if holder != name => {
                SessionError::AgentUnauthorized(per_agent_unauthorized(name, agent, &detail))
            }
            e => SessionError::Authorization(e.to_string()),
        })
    };
    let with_token = |token: &Option<String>| {
        let mut headers = headers.clone();
        if let Some(token) = token {
            let (key, value) = crate::oauth::authorization_header(token);
            headers.insert(key, value);
        }
        headers
    };
    let mut token = token_for(false).await?;
    let first =
        Session::connect_http(url, &with_token(&token), startup_timeout, client.clone()).await;
    let session = match first {
        // A refused token (revoked, or expired early): one silent retry with a
        // refreshed (or newly granted) token.
        Err(SessionError::Unauthorized { .. }) if !matches!(auth, Auth::None) => {
            tracing::info!(service = %name, "the server refused the token; getting a new one");
            token = token_for(true).await?;
            match Session::connect_http(url, &with_token(&token), startup_timeout, client).await {
                Err(SessionError::Unauthorized { .. }) if holder != name => {
                    return Err(SessionError::AgentUnauthorized(per_agent_unauthorized(
                        name,
                        agent,
                        "the server refused the stored token",
                    )));
                }
                Err(SessionError::Unauthorized { .. }) => {
                    return Err(SessionError::Authorization(refused_token(name, auth)));
                }
                other => other?,
            }
        }
        other => other?,
    };
    Ok((session, token))
}

/// What an agent that has not authorized a per-agent service is told: how to authorize
/// it itself (another agent's tokens are never used).
fn per_agent_unauthorized(name: &str, agent: &str, detail: &str) -> String {
    format!(
        "service \"{name}\" is called with each agent's own authorization, and agent \"{agent}\" has not authorized it ({detail}): run `airlock --agent {} servers auth {name}`",
        shell_word(agent)
    )
}

/// `word` as one shell word: as it is when it holds only safe characters, else single-
/// quoted (an agent name can come from an identity provider's claim).
fn shell_word(word: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "-_.@:/+=".contains(c);
    if !word.is_empty() && word.chars().all(safe) {
        return word.to_string();
    }
    format!("'{}'", word.replace('\'', "'\\''"))
}

/// What to do when the server refuses even a fresh token.
fn refused_token(name: &str, auth: &Auth) -> String {
    match auth {
        Auth::ClientCredentials(cc) => format!(
            "service \"{name}\": the server refused the token granted to client \"{}\" (check \"auth.{}\" and the client's grants at the authorization server)",
            cc.client_id,
            cc.key.field()
        ),
        Auth::IdentityAssertion(assertion) => format!(
            "service \"{name}\": the server refused the token its authorization server granted client \"{}\" for the identity assertion (check \"auth.id_token\" and the client's grants)",
            assertion.client_id
        ),
        Auth::TokenExchange(exchange) => format!(
            "service \"{name}\": the server refused the token exchanged for the agent's (client \"{}\"; check its audience and scopes at the identity provider)",
            exchange.client_id
        ),
        _ => format!(
            "service \"{name}\" needs authorization: run `airlock servers auth {name}` (the server refused the stored token)"
        ),
    }
}

/// Why a streamable-HTTP handshake failed, as far as choosing what to do next goes.
enum HttpFailure {
    /// The server wants (other) credentials; the challenge, when it sent one.
    Unauthorized(Option<String>),
    /// The endpoint is not a streamable-HTTP MCP endpoint (a 4xx other than 401/403,
    /// a 501, or a response of the wrong content type): try the legacy SSE transport.
    NotStreamable,
    /// Anything else (refused connection, timeout, server error): report it as it is.
    Other,
}

/// A failed streamable HTTP handshake in the words a user needs: "cannot connect to URL:
/// connection refused" rather than the transport's nested type names. The HTTP error
/// itself when there is one, else the deepest cause; the whole chain goes to the debug
/// log.
fn in_words(url: &str, error: &ClientInitializeError) -> String {
    let mut chain: Vec<&(dyn std::error::Error + 'static)> = Vec::new();
    // As in `classify`: the transport's own error is boxed inside the initialize error.
    let mut cause: Option<&(dyn std::error::Error + 'static)> = match error {
        ClientInitializeError::TransportError { error, .. } => Some(error.error.as_ref()),
        ClientInitializeError::LegacyFallbackFailed { fallback, .. } => {
            return in_words(url, fallback);
        }
        other => Some(other),
    };
    while let Some(current) = cause {
        chain.push(current);
        cause = current.source();
        // rmcp's HTTP error holds the client's error without naming it as its source.
        if cause.is_none()
            && let Some(StreamableHttpError::Client(inner)) =
                current.downcast_ref::<StreamableHttpError<reqwest::Error>>()
        {
            cause = Some(inner);
        }
    }
    let io = chain
        .iter()
        .rev()
        .find_map(|e| e.downcast_ref::<std::io::Error>());
    let request = chain
        .iter()
        .find_map(|e| e.downcast_ref::<reqwest::Error>());
    if let Some(request) = request {
        if request.is_connect() {
            return match io {
                Some(io) => format!("cannot connect to {url}: {}", io.kind()),
                None => format!(
                    "cannot connect to {url}: {}",
                    chain.last().map(|e| e.to_string()).unwrap_or_default()
                ),
            };
        }
        if request.is_timeout() {
            return format!("{url} did not answer in time");
        }
        if let Some(status) = request.status() {
            return format!("streamable HTTP at {url}: the server answered {status}");
        }
    }
    let http = chain
        .iter()
        .find_map(|e| e.downcast_ref::<StreamableHttpError<reqwest::Error>>());
    let words = match http {
        Some(StreamableHttpError::Client(_)) | None => chain
            .last()
            .map(|e| e.to_string())
            .unwrap_or_else(|| error.to_string()),
        Some(http) => http.to_string(),
    };
    format!("streamable HTTP at {url}: {words}")
}

fn classify(error: &ClientInitializeError) -> HttpFailure {
    if error.is_authorization_required() {
        return HttpFailure::Unauthorized(error.auth_challenge().map(str::to_string));
    }
    // The transport's own error is carried (boxed) by the initialize error's
    // `TransportError` variant; walk from there.
    let mut cause: Option<&(dyn std::error::Error + 'static)> = match error {
        ClientInitializeError::TransportError { error, .. } => Some(error.error.as_ref()),
        ClientInitializeError::LegacyFallbackFailed { fallback, .. } => return classify(fallback),
        _ => None,
    };
    while let Some(current) = cause {
        if let Some(http) = current.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
            return match http {
                StreamableHttpError::AuthRequired(_)
                | StreamableHttpError::InsufficientScope(_) => {
                    HttpFailure::Unauthorized(http.auth_challenge().map(str::to_string))
                }
                StreamableHttpError::UnexpectedServerResponse(_)
                | StreamableHttpError::UnexpectedContentType(_)
                | StreamableHttpError::ServerDoesNotSupportSse => HttpFailure::NotStreamable,
                StreamableHttpError::HttpStatus(status) if status.status == 501 => {
                    HttpFailure::NotStreamable
                }
                StreamableHttpError::Client(e)
                    if e.status().is_some_and(|s| {
                        s.is_client_error()
                            && s != reqwest::StatusCode::UNAUTHORIZED
                            && s != reqwest::StatusCode::FORBIDDEN
                    }) =>
                {
                    HttpFailure::NotStreamable
                }
                _ => HttpFailure::Other,
            };
        }
        cause = current.source();
    }
    HttpFailure::Other
}

impl Session {
    /// Connects to an HTTP server: streamable HTTP first; when that attempt fails in a
    /// way that means "not a streamable HTTP endpoint", the legacy SSE transport. When
    /// both fail, the message carries both errors. A refusal for want of credentials is
    /// [`SessionError::Unauthorized`], never retried over SSE.
    pub async fn connect_http(
        url: &str,
        headers: &BTreeMap<String, String>,
        timeout: Duration,
        client: AirlockClient,
    ) -> Result<Session, SessionError> {
        let started = tokio::time::Instant::now();
        let transport = crate::transport::streamable_http(url, headers)
            .map_err(|e| SessionError::Handshake(e.to_string(), String::new()))?;
        let transport = ProgressTap::new(DiscoverGuard::new(transport), client.clone());
        let first = match tokio::time::timeout(
            timeout,
            serve_client_with_lifecycle(client.clone(), transport, newest_offered()),
        )
        .await
        {
            Ok(Ok(service)) => {
                return Session::finish(service, client, None, TransportKind::StreamableHttp).await;
            }
            Ok(Err(e)) => e,
            Err(_) => {
                return Err(SessionError::HandshakeTimeout(
                    timeout,
                    format!(" (streamable HTTP at {url})"),
                ));
            }
        };
        match classify(&first) {
            HttpFailure::Unauthorized(challenge) => {
                return Err(SessionError::Unauthorized {
                    url: url.to_string(),
                    challenge,
                });
            }
            HttpFailure::Other => {
                tracing::debug!(url, "streamable HTTP handshake failed: {first:?}");
                return Err(SessionError::Handshake(
                    in_words(url, &first),
                    String::new(),
                ));
            }
            HttpFailure::NotStreamable => {}
        }
        tracing::info!(
            url,
            "streamable HTTP failed ({first}); trying the legacy SSE transport"
        );
        let remaining = timeout
            .saturating_sub(started.elapsed())
            .max(Duration::from_secs(1));
        let legacy = async {
            let transport = crate::transport::sse::LegacySseTransport::connect(url, headers)
                .await
                .map_err(|e| e.to_string())?;
            let transport = ProgressTap::new(transport, client.clone());
            serve_client(client.clone(), transport)
                .await
                .map_err(|e| e.to_string())
        };
        match tokio::time::timeout(remaining, legacy).await {
            Ok(Ok(service)) => Session::finish(service, client, None, TransportKind::Sse).await,
            Ok(Err(second)) => Err(SessionError::Handshake(
                format!(
                    "{}; the legacy SSE fallback failed too: {second}",
                    in_words(url, &first)
                ),
                String::new(),
            )),
            Err(_) => Err(SessionError::HandshakeTimeout(
                timeout,
                format!(" (streamable HTTP: {first}; SSE fallback timed out)"),
            )),
        }
    }
}
