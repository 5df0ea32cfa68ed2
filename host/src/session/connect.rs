//! Opening a session: a stdio server is spawned and greeted here; an HTTP server is
//! reached through [`super::http`] (feature `http`).

use std::path::PathBuf;
use std::time::Duration;

use rmcp::service::serve_client_with_lifecycle;
use tokio::sync::mpsc;

use super::probe::{DiscoverGuard, newest_offered};
use super::progress::ProgressTap;
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
    /// The access token the agent presented (`[serve.auth]`), for a service that
    /// exchanges it for its own (`auth = { type = "token_exchange" }`).
    pub subject_token: Option<String>,
    /// The agent's name, whose own tokens a `per_agent` OAuth service is called with.
    pub agent_name: &'a str,
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
        #[cfg(feature = "http")]
        Transport::Http { url, headers, auth } => {
            super::http::connect_remote(
                &server.name,
                url,
                headers,
                auth,
                server.startup_timeout,
                options.secret_store,
                options.subject_token.as_deref(),
                options.agent_name,
                client,
            )
            .await?
        }
        #[cfg(not(feature = "http"))]
        Transport::Http { url, .. } => {
            return Err(SessionError::Handshake(
                format!(
                    "{url} is an HTTP server, and this build of Airlock has no HTTP client \
                     transports (cargo feature `http`, on in the `airlock` binary)"
                ),
                String::new(),
            ));
        }
    };
    session.set_cancel_grace(server.cancel_grace);
    Ok(Connected {
        session,
        oauth_token,
    })
}

impl Session {
    /// Spawns a stdio server and performs the handshake within `timeout`.
    pub async fn connect_stdio(
        spec: &LaunchSpec,
        timeout: Duration,
        client: AirlockClient,
    ) -> Result<Session, SessionError> {
        let (mut process, stdout, stdin) = ServerProcess::spawn(spec)?;
        let transport = ProgressTap::new(
            DiscoverGuard::new(crate::transport::stdio(stdout, stdin)),
            client.clone(),
        );
        let outcome = tokio::time::timeout(
            timeout,
            serve_client_with_lifecycle(client.clone(), transport, newest_offered()),
        )
        .await;
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
}
