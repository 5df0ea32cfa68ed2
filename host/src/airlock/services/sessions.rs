//! Agents' sessions with services: opening one through the pool (checking the service,
//! tracking its health, learning OAuth tokens as secrets), disconnect and reset, an
//! agent's roots and client (a change is announced without reconnecting unless it
//! moves the server's working directory or the capabilities its handshake declared),
//! and the listener that acts on a session's notifications.

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::mpsc;

use super::Services;
use crate::catalog::Cataloger;
use crate::error::{CallError, ErrorCode};
use crate::events::{Event, EventBus};
use crate::plugin::{ServiceInfo, ServicePipeline};
use crate::session::{
    AcquireError, AgentClient, ConnectOptions, LiveSession, ServerNotice, Session, SessionHandle,
    connect,
};

/// Why a session could not be opened.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// The service refused this agent only: it must authorize the service itself
    /// (`per_agent = true`) and has not, or the server refused its tokens.
    ThisAgent(CallError),
    /// Anything else.
    Failed(CallError),
}

impl Refusal {
    /// The error the caller gets.
    pub(crate) fn into_error(self) -> CallError {
        match self {
            Refusal::ThisAgent(e) | Refusal::Failed(e) => e,
        }
    }
}

impl Services {
    /// `agent`'s live session with `service`, opening one if needed.
    pub(crate) async fn open(
        &self,
        agent: &str,
        service_name: &str,
    ) -> Result<Arc<LiveSession>, CallError> {
        self.open_reporting(agent, service_name)
            .await
            .map_err(Refusal::into_error)
    }

    /// Without OAuth there is nothing to sign in to: the refusal stands.
    #[cfg(not(feature = "http"))]
    pub(crate) async fn sign_in_then_open(
        &self,
        _agent: &str,
        _service_name: &str,
        refused: CallError,
        _asker: Option<&Arc<dyn AgentClient>>,
        _cancel: Option<&tokio_util::sync::CancellationToken>,
    ) -> Result<Arc<LiveSession>, CallError> {
        Err(refused)
    }

    /// [`Services::open`], telling apart a service that refused this agent only (it has
    /// not authorized a service it must authorize itself).
    pub(crate) async fn open_reporting(
        &self,
        agent: &str,
        service_name: &str,
    ) -> Result<Arc<LiveSession>, Refusal> {
        let unavailable = |m: String| CallError::new(ErrorCode::ServiceUnavailable, m);
        let service = self
            .get(service_name)
            .ok_or_else(|| unavailable(format!("no service named \"{service_name}\"")))
            .map_err(Refusal::Failed)?;
        if !service.enabled() {
            return Err(Refusal::Failed(unavailable(format!(
                "service \"{service_name}\" is disabled"
            ))));
        }
        let Some(pipeline) = service.usable_pipeline() else {
            let reason = service.health().failed.clone().unwrap_or_default();
            return Err(Refusal::Failed(unavailable(format!(
                "service \"{service_name}\" is unavailable: {reason}"
            ))));
        };
        if let Some(live) = self.pool.live(agent, service_name).await
            && !live.session.is_closed()
        {
            return Ok(live);
        }
        // A service that keeps failing to connect is left alone for a cooldown.
        let attempt = service.guard.connect().map_err(Refusal::Failed)?;
        // A service reached as each calling user refuses one agent (no token of its own)
        // without failing for the others: such a refusal neither trips the breaker nor
        // marks the service failed.
        let refused_this_agent = std::sync::atomic::AtomicBool::new(false);
        let opened = self
            .pool
            .acquire(agent, service_name, || async {
                service.health().connecting += 1;
                self.emit_service_changed(service_name);
                let roots = self.agents.roots(agent);
                let cwd = self.working_dir(service_name, &roots);
                let (tx, rx) = mpsc::unbounded_channel();
                // The token the agent presented is exchanged, never sent upstream; it is
                // a known secret of such a service's output from before it connects.
                let subject_token = service
                    .config
                    .acts_as_caller()
                    .then(|| self.agents.access_token(agent))
                    .flatten();
                if let Some(token) = &subject_token {
                    service.learn_secret("agent access token", token);
                }
                let options = ConnectOptions {
                    roots,
                    cwd: cwd.clone(),
                    secrets: service.secrets(),
                    notices: tx,
                    secret_store: &self.secret_store,
                    agent: Some(self.agents.link(agent)),
                    subject_token,
                    agent_name: agent,
                };
                // The session outlives the call that opened it: what it spawns (rmcp's
                // session task, its spans) must not hold the call's spans open, so it
                // gets a root span of its own, which ends when the session does.
                let lifetime = tracing::info_span!(
                    parent: None,
                    "upstream session",
                    airlock.service = %service_name,
                    airlock.agent = %agent,
                );
                let connected =
                    tracing::Instrument::instrument(connect(&service.config, options), lifetime)
                        .await;
                service.health().connecting -= 1;
                match connected {
                    Ok(connected) => {
                        if let Some(token) = &connected.oauth_token {
                            service.learn_secret("oauth access token", token);
                        }
                        if let Some(level) = self.agents.log_level(agent) {
                            self.apply_log_level(service_name, &connected.session, &level)
                                .await;
                        }
                        tokio::spawn(listen(Listener {
                            service: service_name.to_string(),
                            secrets: service.secrets(),
                            info: service.info(),
                            pipeline: pipeline.clone(),
                            cataloger: self.cataloger.clone(),
                            events: self.events.clone(),
                            handle: connected.session.handle(),
                            notices: rx,
                        }));
                        Ok((connected.session, cwd))
                    }
                    Err(e) => {
                        if matches!(e, crate::session::SessionError::AgentUnauthorized(_)) {
                            refused_this_agent.store(true, std::sync::atomic::Ordering::Relaxed);
                        }
                        Err(service.secrets().scrub_owned(&e.to_string()))
                    }
                }
            })
            .await;
        let outcome = match opened {
            Ok(live) => {
                attempt.succeeded();
                let mut health = service.health();
                health.failed = None;
                health.identity = Some(live.session.identity().clone());
                Ok(live)
            }
            Err(AcquireError::Limit(max)) => {
                return Err(Refusal::Failed(CallError::new(
                    ErrorCode::ServiceSessionLimit,
                    AcquireError::<String>::Limit(max).to_string(),
                )));
            }
            Err(AcquireError::Open(reason))
                if refused_this_agent.load(std::sync::atomic::Ordering::Relaxed) =>
            {
                drop(attempt);
                self.emit_service_changed(service_name);
                return Err(Refusal::ThisAgent(unavailable(format!(
                    "cannot connect to service \"{service_name}\": {reason}"
                ))));
            }
            Err(AcquireError::Open(reason)) => {
                attempt.failed();
                service.health().failed = Some(reason.clone());
                Err(unavailable(format!(
                    "cannot connect to service \"{service_name}\": {reason}"
                )))
            }
        };
        self.emit_service_changed(service_name);
        outcome.map_err(Refusal::Failed)
    }

    /// Closes `agent`'s session with `service`, keeping everything else; the next call
    /// reconnects (as a new session).
    ///
    /// ```no_run
    /// # async fn run(airlock: airlock_host::Airlock) -> Result<(), airlock_host::CallError> {
    /// airlock.services().disconnect("agent-7", "github").await;   // next call reconnects
    /// airlock.services().reset("agent-7", "github").await?;       // fresh server state, now
    /// # Ok(()) }
    /// ```
    pub async fn disconnect(&self, agent: &str, service: &str) {
        if self.pool.disconnect(agent, service, "disconnected").await {
            self.emit_service_changed(service);
        }
    }

    /// Drops the server-held state of `agent`'s session with `service` and opens a fresh
    /// connection at once.
    pub async fn reset(&self, agent: &str, service: &str) -> Result<(), CallError> {
        self.disconnect(agent, service).await;
        self.open(agent, service).await.map(|_| ())
    }

    /// Closes every session of `agent` and waits until they are closed (an agent's
    /// client went away).
    pub async fn disconnect_agent(&self, agent: &str) {
        self.pool.close_agent(agent).await;
        for name in self.names() {
            self.emit_service_changed(&name);
        }
    }

    /// Closes every session and waits until they are closed (no server process outlives
    /// this).
    pub(crate) async fn close_all(&self) {
        self.pool.close_all().await;
    }

    /// Sets the folders offered to `agent`'s servers as roots. Live sessions are told
    /// with `notifications/roots/list_changed`, except those whose working directory
    /// follows the first root and would move: they reconnect.
    ///
    /// ```no_run
    /// # async fn run(airlock: airlock_host::Airlock) {
    /// airlock.services().set_roots("agent-7", vec!["/home/me/project".into(), "/home/me/notes".into()]).await;
    /// # }
    /// ```
    pub async fn set_roots(&self, agent: &str, roots: Vec<String>) {
        self.agents.set_roots(agent, roots.clone());
        for (service, live) in self.pool.sessions_of(agent).await {
            let wanted = self.working_dir(&service, &roots);
            let stdio = self
                .get(&service)
                .is_some_and(|s| s.config.transport.is_stdio());
            if stdio && wanted != live.cwd {
                tracing::info!(
                    service,
                    agent,
                    "roots moved the working directory: reconnecting"
                );
                drop(live);
                self.disconnect(agent, &service).await;
                if let Err(e) = self.open(agent, &service).await {
                    tracing::warn!(
                        service,
                        agent,
                        "reconnection after a roots change failed: {}",
                        e.message
                    );
                }
            } else if let Err(e) = live.session.set_roots(roots.clone()).await {
                tracing::warn!(service, agent, "cannot announce new roots: {e}");
            }
        }
    }

    /// Gives `agent` its own MCP client: servers may then ask it for sampling and
    /// elicitation, and their log messages reach it. Replaces an earlier one. A live
    /// session that declared other capabilities in its handshake is closed, to reopen
    /// (with the right ones) on its next use.
    pub async fn attach_client(&self, agent: &str, client: Arc<dyn AgentClient>) {
        let wanted = client.capabilities();
        self.agents.set_client(agent, Some(client));
        for (service, live) in self.pool.sessions_of(agent).await {
            // What the handshake declared (URL questions are the host's own, to the
            // agent: they do not change what servers were told).
            let declared = live.session.agent_capabilities();
            if (declared.sampling, declared.elicitation) != (wanted.sampling, wanted.elicitation) {
                drop(live);
                self.disconnect(agent, &service).await;
            }
        }
    }

    /// Gives `agent` `client` unless it has one already (a gateway's 2026-07-28 client
    /// holds no session, so each of its requests offers one; a handshake-era client of
    /// the same agent keeps its place).
    pub async fn offer_client(&self, agent: &str, client: Arc<dyn AgentClient>) {
        if self.agents.client(agent).is_none() {
            self.attach_client(agent, client).await;
        }
    }

    /// Forgets `agent`'s client (sessions opened later have none).
    pub fn detach_client(&self, agent: &str) {
        self.agents.set_client(agent, None);
    }

    /// Sets the lowest level of server log messages `agent` wants (an MCP logging level:
    /// `debug`, `info`, `warning`…): sent to its live sessions whose servers log, and to
    /// every session it opens later.
    pub async fn set_log_level(&self, agent: &str, level: &str) {
        self.agents.set_log_level(agent, level);
        for (service, live) in self.pool.sessions_of(agent).await {
            self.apply_log_level(&service, &live.session, level).await;
        }
    }

    /// The services `agent` has a live session with.
    pub async fn live_services(&self, agent: &str) -> Vec<String> {
        self.pool
            .sessions_of(agent)
            .await
            .into_iter()
            .map(|(service, _)| service)
            .collect()
    }

    /// The process id of `agent`'s live stdio session with `service`, if any.
    pub async fn session_pid(&self, agent: &str, service: &str) -> Option<u32> {
        self.pool.live(agent, service).await?.session.pid()
    }

    /// Where a stdio server starts: its configured `cwd`, else the agent's first root
    /// when that is an existing folder.
    fn working_dir(&self, service: &str, roots: &[String]) -> Option<PathBuf> {
        self.get(service)
            .and_then(|s| s.config.cwd.clone())
            .or_else(|| roots.first().map(PathBuf::from).filter(|p| p.is_dir()))
    }

    /// Sends `logging/setLevel` to a session whose server declared logging; a failure is
    /// logged (scrubbed), not fatal.
    async fn apply_log_level(&self, service: &str, session: &Session, level: &str) {
        if !session.server_supports("logging") {
            return;
        }
        if let Err(e) = session.set_log_level(level, self.timeout_of(service)).await {
            let e = self.scrub_error(service, e);
            tracing::warn!(service, "cannot set the server's log level: {}", e.message);
        }
    }
}

/// What a session's listener needs: no reference back to [`Services`], so dropped
/// services take their sessions (and their processes) with them.
struct Listener {
    service: String,
    secrets: crate::secrets::KnownSecrets,
    info: ServiceInfo,
    pipeline: Arc<ServicePipeline>,
    cataloger: Arc<Cataloger>,
    events: EventBus,
    handle: SessionHandle,
    notices: mpsc::UnboundedReceiver<ServerNotice>,
}

/// Acts on one session's server notifications until the session ends.
async fn listen(mut l: Listener) {
    let service = l.service.clone();
    while let Some(notice) = l.notices.recv().await {
        let event = match notice {
            ServerNotice::ToolsChanged => {
                let refreshed = match l.handle.list_tools().await {
                    Ok(listed) => {
                        let listed =
                            super::redact_listing(Some(&l.pipeline), &l.secrets, &service, listed)
                                .await;
                        l.cataloger
                            .name_tools(l.info.clone(), &l.pipeline, &listed)
                            .await
                            .map_err(|e| e.to_string())
                    }
                    Err(e) => Err(e.to_string()),
                };
                match refreshed {
                    Ok(tools) => Event::ToolsChanged {
                        service: service.clone(),
                        tools,
                    },
                    Err(e) => {
                        let e = l.secrets.scrub_owned(&e);
                        tracing::warn!(service, "cannot refresh the tool list: {e}");
                        continue;
                    }
                }
            }
            ServerNotice::ResourceUpdated { uri } => Event::ResourceUpdated {
                service: service.clone(),
                uri,
            },
            ServerNotice::ResourcesChanged => Event::ResourcesChanged {
                service: service.clone(),
            },
            ServerNotice::PromptsChanged => Event::PromptsChanged {
                service: service.clone(),
            },
        };
        l.events.emit(event);
    }
}
