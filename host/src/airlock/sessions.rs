//! Sessions per (agent, service): opened on first use and kept across calls, a
//! live-session limit that refuses rather than evicts, disconnect and reset, roots per
//! agent (a change is announced without reconnecting unless it moves the server's
//! working directory), and the listener for server notifications.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use tokio::sync::mpsc;

use super::{Airlock, Inner};
use crate::config::TransportConfig;
use crate::error::{CallError, ErrorCode};
use crate::events::Event;
use crate::launch::LaunchSpec;
use crate::session::{AirlockClient, ServerNotice, Session};

/// One agent's connection slot for one service.
#[derive(Default)]
pub(crate) struct Slot {
    live: tokio::sync::Mutex<Option<Arc<Live>>>,
    opened_before: AtomicBool,
}

/// A live session and what it was opened with.
pub(crate) struct Live {
    pub session: Session,
    pub number: u64,
    /// The working directory the server was started in (stdio only).
    pub cwd: Option<PathBuf>,
}

impl Airlock {
    /// Closes `agent`'s session with `service`, keeping everything else; the next call
    /// reconnects (as a new session).
    ///
    /// ```no_run
    /// # async fn run(airlock: airlock_host::Airlock) -> Result<(), airlock_host::CallError> {
    /// airlock.disconnect("agent-7", "github").await;   // keeps the grant; next call reconnects
    /// airlock.reset("agent-7", "github").await?;       // fresh server state, connected now
    /// # Ok(()) }
    /// ```
    pub async fn disconnect(&self, agent: &str, service: &str) {
        self.inner.disconnect_now(agent, service).await;
    }

    /// Drops the server-held state of `agent`'s session with `service` and opens a fresh
    /// connection at once.
    pub async fn reset(&self, agent: &str, service: &str) -> Result<(), CallError> {
        self.inner.disconnect_now(agent, service).await;
        self.inner.session(agent, service).await.map(|_| ())
    }

    /// Sets the folders offered to `agent`'s servers as roots. Live sessions are told
    /// with `notifications/roots/list_changed`, except those whose working directory
    /// follows the first root and would move: they reconnect.
    ///
    /// ```no_run
    /// # async fn run(airlock: airlock_host::Airlock) {
    /// airlock.set_roots("agent-7", vec!["/home/me/project".into(), "/home/me/notes".into()]).await;
    /// # }
    /// ```
    pub async fn set_roots(&self, agent: &str, roots: Vec<String>) {
        self.inner
            .roots
            .write()
            .expect("roots lock poisoned")
            .insert(agent.to_string(), roots.clone());
        let slots: Vec<(String, Arc<Slot>)> = self
            .inner
            .sessions
            .lock()
            .expect("sessions lock poisoned")
            .iter()
            .filter(|((a, _), _)| a == agent)
            .map(|((_, s), slot)| (s.clone(), slot.clone()))
            .collect();
        for (service, slot) in slots {
            let live = slot.live.lock().await.clone();
            let Some(live) = live else { continue };
            let wanted = self.inner.working_dir(&service, &roots);
            if matches!(
                self.inner.services[&service].config.transport,
                TransportConfig::Stdio { .. }
            ) && wanted != live.cwd
            {
                tracing::info!(
                    service,
                    agent,
                    "roots moved the working directory: reconnecting"
                );
                self.inner.disconnect_now(agent, &service).await;
                if let Err(e) = self.inner.session(agent, &service).await {
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

    /// The process id of `agent`'s live stdio session with `service`, if any.
    pub async fn session_pid(&self, agent: &str, service: &str) -> Option<u32> {
        let slot = self
            .inner
            .sessions
            .lock()
            .expect("sessions lock poisoned")
            .get(&(agent.to_string(), service.to_string()))
            .cloned()?;
        let live = slot.live.lock().await.clone()?;
        live.session.pid()
    }
}

impl Inner {
    pub(super) fn live_sessions(&self, service: &str) -> usize {
        self.sessions
            .lock()
            .expect("sessions lock poisoned")
            .iter()
            .filter(|((_, s), slot)| {
                s == service && slot.live.try_lock().map(|l| l.is_some()).unwrap_or(true)
            })
            .count()
    }

    fn agent_roots(&self, agent: &str) -> Vec<String> {
        self.roots
            .read()
            .expect("roots lock poisoned")
            .get(agent)
            .cloned()
            .unwrap_or_else(|| self.default_roots.clone())
    }

    /// Where a stdio server starts: its configured `cwd`, else the agent's first root
    /// when that is an existing folder.
    fn working_dir(&self, service: &str, roots: &[String]) -> Option<PathBuf> {
        let config = &self.services[service].config;
        config
            .cwd
            .clone()
            .or_else(|| roots.first().map(PathBuf::from).filter(|p| p.is_dir()))
    }

    /// `agent`'s live session with `service`, opening one if needed.
    pub(super) async fn session(
        self: &Arc<Self>,
        agent: &str,
        service_name: &str,
    ) -> Result<Arc<Live>, CallError> {
        let unavailable = |m: String| CallError::new(ErrorCode::ServiceUnavailable, m);
        let service = self
            .service(service_name)
            .ok_or_else(|| unavailable(format!("no service named \"{service_name}\"")))?;
        if !service.config.enabled {
            return Err(unavailable(format!(
                "service \"{service_name}\" is disabled"
            )));
        }
        if service.pipeline.is_none() || !service.config.repair.is_empty() {
            let reason = service
                .health
                .lock()
                .expect("health lock poisoned")
                .failed
                .clone()
                .unwrap_or_default();
            return Err(unavailable(format!(
                "service \"{service_name}\" is unavailable: {reason}"
            )));
        }
        let slot = self
            .sessions
            .lock()
            .expect("sessions lock poisoned")
            .entry((agent.to_string(), service_name.to_string()))
            .or_default()
            .clone();
        let mut guard = slot.live.lock().await;
        if let Some(live) = guard.as_ref() {
            if !live.session.is_closed() {
                return Ok(live.clone());
            }
            let dead = guard.take().expect("checked above");
            self.release(agent, service_name, dead, "the connection closed");
        }
        // Reserve a place under the limit; refuse rather than close someone else's.
        let reserved = self
            .live
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < self.max_sessions).then_some(n + 1)
            });
        if reserved.is_err() {
            return Err(CallError::new(
                ErrorCode::ServiceSessionLimit,
                format!(
                    "the live session limit ({}) is reached; disconnect an unused session or raise the limit",
                    self.max_sessions
                ),
            ));
        }
        service
            .health
            .lock()
            .expect("health lock poisoned")
            .connecting += 1;
        self.emit_service_changed(service_name);
        let opened = self.open(agent, service_name).await;
        service
            .health
            .lock()
            .expect("health lock poisoned")
            .connecting -= 1;
        match opened {
            Ok(live) => {
                let live = Arc::new(live);
                {
                    let mut health = service.health.lock().expect("health lock poisoned");
                    health.failed = None;
                    health.identity = Some(live.session.identity().clone());
                }
                *guard = Some(live.clone());
                let reconnect = slot.opened_before.swap(true, Ordering::SeqCst);
                self.emit(Event::SessionChanged {
                    agent: agent.to_string(),
                    service: service_name.to_string(),
                    session: live.number,
                    state: "connected".into(),
                    reconnect,
                    reason: None,
                });
                self.emit_service_changed(service_name);
                Ok(live)
            }
            Err(reason) => {
                self.live.fetch_sub(1, Ordering::SeqCst);
                let reason = crate::launch::scrub(&reason, &service.secrets());
                service.health.lock().expect("health lock poisoned").failed = Some(reason.clone());
                self.emit(Event::SessionChanged {
                    agent: agent.to_string(),
                    service: service_name.to_string(),
                    session: 0,
                    state: "failed".into(),
                    reconnect: false,
                    reason: Some(reason.clone()),
                });
                self.emit_service_changed(service_name);
                Err(unavailable(format!(
                    "cannot connect to service \"{service_name}\": {reason}"
                )))
            }
        }
    }

    /// Connects (spawning or dialling) with the agent's roots.
    async fn open(self: &Arc<Self>, agent: &str, name: &str) -> Result<Live, String> {
        let service = &self.services[name];
        let roots = self.agent_roots(agent);
        let (tx, rx) = mpsc::unbounded_channel();
        let client = AirlockClient::new(name, roots.clone(), service.secrets()).with_notices(tx);
        let config = &service.config;
        let (session, cwd) = match &config.transport {
            TransportConfig::Stdio { command, args, env } => {
                let cwd = self.working_dir(name, &roots);
                let spec = LaunchSpec {
                    command: command.clone(),
                    args: args.clone(),
                    env: env.clone(),
                    cwd: cwd.clone(),
                    secrets: service.secrets(),
                };
                (
                    Session::connect_stdio(&spec, config.startup_timeout, client)
                        .await
                        .map_err(|e| e.to_string())?,
                    cwd,
                )
            }
            TransportConfig::Http { url, headers, auth } => {
                let mut headers = headers.clone();
                if auth.is_some() {
                    // Never interactive here: without usable tokens this fails with a
                    // message naming `airlock servers auth NAME`.
                    let token = crate::oauth::access_token(&self.secret_store, name, url)
                        .await
                        .map_err(|e| e.to_string())?;
                    service.learn_secret("oauth access token", &token);
                    let (key, value) = crate::oauth::authorization_header(&token);
                    headers.insert(key, value);
                }
                let session = Session::connect_http(url, &headers, config.startup_timeout, client)
                    .await
                    .map_err(|e| {
                        let e = e.to_string();
                        // A refused token (revoked, or one without a lifetime that
                        // expired) needs a person: say which command to run.
                        if auth.is_some() && (e.contains("Auth required") || e.contains("401")) {
                            format!(
                                "service \"{name}\" needs authorization: run `airlock servers auth {name}` (the server refused the stored token)"
                            )
                        } else {
                            e
                        }
                    })?;
                (session, None)
            }
        };
        let mut session = session;
        session.set_cancel_grace(config.cancel_grace);
        let number = self.session_seq.fetch_add(1, Ordering::SeqCst) + 1;
        tokio::spawn(listen(
            Arc::downgrade(self),
            agent.to_string(),
            name.to_string(),
            number,
            rx,
        ));
        Ok(Live {
            session,
            number,
            cwd,
        })
    }

    /// Forgets a session (it no longer counts toward the limit) and closes it in the
    /// background so nobody waits for it.
    fn release(&self, agent: &str, service: &str, live: Arc<Live>, why: &str) {
        self.live.fetch_sub(1, Ordering::SeqCst);
        self.emit(Event::SessionChanged {
            agent: agent.to_string(),
            service: service.to_string(),
            session: live.number,
            state: "closed".into(),
            reconnect: false,
            reason: Some(why.to_string()),
        });
        tokio::spawn(async move {
            if let Ok(live) = Arc::try_unwrap(live) {
                live.session.close().await;
            }
        });
        self.emit_service_changed(service);
    }

    /// Closes `agent`'s session with `service` now (the close finishes in the background).
    pub(super) async fn disconnect_now(&self, agent: &str, service: &str) {
        let slot = self
            .sessions
            .lock()
            .expect("sessions lock poisoned")
            .get(&(agent.to_string(), service.to_string()))
            .cloned();
        if let Some(slot) = slot
            && let Some(live) = slot.live.lock().await.take()
        {
            self.release(agent, service, live, "disconnected");
        }
    }

    /// Closes every session and waits for each to finish closing.
    pub(super) async fn close_all(&self) {
        let slots: Vec<Arc<Slot>> = self
            .sessions
            .lock()
            .expect("sessions lock poisoned")
            .drain()
            .map(|(_, s)| s)
            .collect();
        let mut closing = Vec::new();
        for slot in slots {
            if let Some(live) = slot.live.lock().await.take() {
                self.live.fetch_sub(1, Ordering::SeqCst);
                closing.push(live);
            }
        }
        futures::future::join_all(closing.into_iter().map(|live| async move {
            // Wait for in-flight calls holding the session to let go, briefly.
            let mut live = live;
            for _ in 0..50 {
                match Arc::try_unwrap(live) {
                    Ok(owned) => return owned.session.close().await,
                    Err(shared) => live = shared,
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            tracing::warn!(
                "a session was still in use at close; its process group is killed on drop"
            );
        }))
        .await;
    }
}

/// Acts on one session's server notifications until the session ends.
async fn listen(
    inner: Weak<Inner>,
    agent: String,
    service: String,
    number: u64,
    mut rx: mpsc::UnboundedReceiver<ServerNotice>,
) {
    while let Some(notice) = rx.recv().await {
        let Some(inner) = inner.upgrade() else { return };
        match notice {
            ServerNotice::ToolsChanged => {
                let slot = inner
                    .sessions
                    .lock()
                    .expect("sessions lock poisoned")
                    .get(&(agent.clone(), service.clone()))
                    .cloned();
                let live = match slot {
                    Some(slot) => slot.live.lock().await.clone(),
                    None => None,
                };
                let Some(live) = live.filter(|l| l.number == number) else {
                    continue;
                };
                match inner.refresh_tools(&service, &live.session).await {
                    Ok(tools) => inner.emit(Event::ToolsChanged {
                        service: service.clone(),
                        tools,
                    }),
                    Err(e) => tracing::warn!(service, "cannot refresh the tool list: {e}"),
                }
            }
            ServerNotice::ResourceUpdated { uri } => inner.emit(Event::ResourceUpdated {
                service: service.clone(),
                uri,
            }),
            ServerNotice::ResourcesChanged => inner.emit(Event::ResourcesChanged {
                service: service.clone(),
            }),
            ServerNotice::PromptsChanged => inner.emit(Event::PromptsChanged {
                service: service.clone(),
            }),
        }
    }
}
