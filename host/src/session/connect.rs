//! Opening a session: a stdio server is spawned; an HTTP server is tried over
//! streamable HTTP first and over the legacy SSE transport only when the first attempt
//! failed in a way that means "not a streamable endpoint". Every decision is made on
//! rmcp's typed errors, never on error text. An OAuth server gets its access token from
//! the secret store first.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use rmcp::service::{ClientInitializeError, serve_client};
use rmcp::transport::streamable_http_client::StreamableHttpError;
use tokio::sync::mpsc;

use super::{AirlockClient, ServerNotice, Session, SessionError, TransportKind};
use crate::config::{ServerConfig, Transport};
use crate::launch::{DEFAULT_KILL_GRACE, LaunchSpec, ServerProcess};
use crate::secrets::{KnownSecrets, SecretStore};

/// What a connection attempt needs beyond the server's definition.
pub struct ConnectOptions<'a> {
    /// The roots to answer `roots/list` with.
    pub roots: Vec<String>,
    /// Where a stdio server starts (its `cwd`, or the agent's first root).
    pub cwd: Option<PathBuf>,
    /// The values to scrub from everything the server says.
    pub secrets: KnownSecrets,
    /// Where change notifications go.
    pub notices: mpsc::UnboundedSender<ServerNotice>,
    /// Where OAuth tokens live.
    pub secret_store: &'a SecretStore,
    /// Where the agent's own client is found, for sampling, elicitation and server logs.
    pub agent: Option<std::sync::Arc<super::AgentLink>>,
}

/// An open session, and the OAuth access token it was opened with (a secret the
/// service must now also redact).
pub struct Connected {
    /// The session.
    pub session: Session,
    /// The access token used, for OAuth servers.
    pub oauth_token: Option<String>,
}

/// Opens a session to `server` as its definition says.
pub async fn connect(
    server: &ServerConfig,
    options: ConnectOptions<'_>,
) -> Result<Connected, SessionError> {
    let client = AirlockClient::new(&server.name, options.roots, options.secrets.clone())
        .with_notices(options.notices)
        .with_agent(options.agent);
    let (mut session, oauth_token) = match &server.transport {
        Transport::Stdio { command, args, env } => {
            let spec = LaunchSpec {
                command: command.clone(),
                args: args.clone(),
                env: env.clone(),
                cwd: options.cwd,
                secrets: options.secrets,
            };
            let session = Session::connect_stdio(&spec, server.startup_timeout, client).await?;
            (session, None)
        }
        Transport::Http { url, headers, auth } => {
            let mut headers = headers.clone();
            let mut token = None;
            if auth.is_oauth() {
                // Never interactive here: without usable tokens this fails with a
                // message naming `airlock servers auth NAME`.
                let access = crate::oauth::access_token(options.secret_store, &server.name, url)
                    .await
                    .map_err(|e| SessionError::Authorization(e.to_string()))?;
                let (key, value) = crate::oauth::authorization_header(&access);
                headers.insert(key, value);
                token = Some(access);
            }
            let session = match Session::connect_http(url, &headers, server.startup_timeout, client)
                .await
            {
                Err(SessionError::Unauthorized { .. }) if auth.is_oauth() => {
                    // A refused token (revoked, or one without a lifetime that
                    // expired) needs a person: say which command to run.
                    return Err(SessionError::Authorization(format!(
                        "service \"{name}\" needs authorization: run `airlock servers auth {name}` (the server refused the stored token)",
                        name = server.name
                    )));
                }
                other => other?,
            };
            (session, token)
        }
    };
    session.set_cancel_grace(server.cancel_grace);
    Ok(Connected {
        session,
        oauth_token,
    })
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
    /// Spawns a stdio server and performs the handshake within `timeout`.
    pub async fn connect_stdio(
        spec: &LaunchSpec,
        timeout: Duration,
        client: AirlockClient,
    ) -> Result<Session, SessionError> {
        let (mut process, stdout, stdin) = ServerProcess::spawn(spec)?;
        let transport = crate::transport::stdio(stdout, stdin);
        let outcome = tokio::time::timeout(timeout, serve_client(client.clone(), transport)).await;
        let service = match outcome {
            Ok(Ok(service)) => service,
            Ok(Err(e)) => {
                // Give a crashing server a moment to finish writing its stderr.
                tokio::time::sleep(Duration::from_millis(100)).await;
                let exit = process
                    .try_exit_status()
                    .map(|s| format!(" (process exited: {s})"))
                    .unwrap_or_default();
                let suffix = format!("{exit}{}", super::stderr_suffix(&process));
                process.terminate(DEFAULT_KILL_GRACE).await;
                return Err(SessionError::Handshake(e.to_string(), suffix));
            }
            Err(_) => {
                let suffix = super::stderr_suffix(&process);
                process.terminate(DEFAULT_KILL_GRACE).await;
                return Err(SessionError::HandshakeTimeout(timeout, suffix));
            }
        };
        Session::finish(service, client, Some(process), TransportKind::Stdio).await
    }

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
        let first = match tokio::time::timeout(timeout, serve_client(client.clone(), transport))
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
                return Err(SessionError::Handshake(
                    format!("streamable HTTP at {url}: {first}"),
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
            serve_client(client.clone(), transport)
                .await
                .map_err(|e| e.to_string())
        };
        match tokio::time::timeout(remaining, legacy).await {
            Ok(Ok(service)) => Session::finish(service, client, None, TransportKind::Sse).await,
            Ok(Err(second)) => Err(SessionError::Handshake(
                format!(
                    "streamable HTTP at {url}: {first}; the legacy SSE fallback failed too: {second}"
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
