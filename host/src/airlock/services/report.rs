//! What Airlock reports about its services: [`ServiceStatus`] per service (the `status`
//! command, `service_changed` events) and [`TestReport`] (`airlock servers test`).

use serde::Serialize;

use super::Services;
use crate::config::Source;
use crate::events::{Event, ServiceState};
use crate::session::{GuardReport, ServerIdentity};

/// The state of one configured service.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ServiceStatus {
    /// `enabled = false` in the config.
    Disabled,
    /// A service managed by `airlock servers` whose catalog was never tested, or went
    /// stale when its launch changed: it offers no tools until `airlock servers test`.
    Untested {
        /// Why, naming the command to run.
        reason: String,
        /// Whether a catalog was tested for an earlier launch (it went stale), rather
        /// than never.
        stale: bool,
    },
    /// No live session; the next call connects.
    Disconnected {
        /// Tools in the catalog.
        tools: usize,
    },
    /// A connection is being opened.
    Connecting {
        /// Tools in the catalog.
        tools: usize,
    },
    /// At least one live session.
    Connected {
        /// Tools in the catalog.
        tools: usize,
        /// Live sessions (one per agent using the service).
        sessions: usize,
    },
    /// Could not be started, connected or cataloged.
    Failed {
        /// Why.
        reason: String,
    },
}

impl ServiceStatus {
    /// The state without its details.
    pub fn state(&self) -> ServiceState {
        match self {
            ServiceStatus::Disabled => ServiceState::Disabled,
            ServiceStatus::Untested { .. } => ServiceState::Untested,
            ServiceStatus::Disconnected { .. } => ServiceState::Disconnected,
            ServiceStatus::Connecting { .. } => ServiceState::Connecting,
            ServiceStatus::Connected { .. } => ServiceState::Connected,
            ServiceStatus::Failed { .. } => ServiceState::Failed,
        }
    }

    /// The state's name (`connected`, `failed`…).
    pub fn name(&self) -> &'static str {
        self.state().as_str()
    }
}

/// A status line for one service.
#[derive(Debug, Clone, Serialize)]
pub struct ServiceReport {
    /// The service name.
    pub service: String,
    /// Its state.
    #[serde(flatten)]
    pub status: ServiceStatus,
    /// How Airlock reaches it: `stdio` or `http` (streamable HTTP, or legacy SSE when
    /// `server.transport` says so).
    pub transport: &'static str,
    /// What the server said about itself in the latest handshake.
    pub server: Option<ServerIdentity>,
    /// The file defining it, or `registry:user` / `registry:project` for services managed
    /// by `airlock servers`.
    pub source: Source,
    /// Its `[limits]` and how they stand: calls in flight, rates, the breaker.
    pub limits: GuardReport,
}

/// What `airlock servers test` found.
#[derive(Debug, Clone, Serialize)]
pub struct TestReport {
    /// The service.
    pub service: String,
    /// Whether the handshake succeeded on a supported protocol version and the tool
    /// list was read and saved.
    pub verified: bool,
    /// The server's identity (including the negotiated protocol version).
    pub server: ServerIdentity,
    /// The tools, as the server listed them (none was run).
    pub tools: Vec<serde_json::Value>,
}

impl Services {
    /// Tools of `service` in the catalog.
    pub(crate) fn tool_count(&self, service: &str) -> usize {
        self.cataloger
            .read()
            .tools()
            .filter(|t| t.service == service)
            .count()
    }

    /// The report of `name`; `None` once it is no longer configured.
    pub fn report(&self, name: &str) -> Option<ServiceReport> {
        let service = self.get(name)?;
        let live = self.pool.live_count(name);
        let tools = self.tool_count(name);
        let health = service.health();
        let status = if !service.enabled() {
            ServiceStatus::Disabled
        } else if let Some(reason) = health.untested.as_ref().filter(|_| live == 0) {
            ServiceStatus::Untested {
                reason: reason.clone(),
                stale: health.stale,
            }
        } else if live > 0 {
            ServiceStatus::Connected {
                tools,
                sessions: live,
            }
        } else if health.connecting > 0 {
            ServiceStatus::Connecting { tools }
        } else if let Some(reason) = &health.failed {
            ServiceStatus::Failed {
                reason: reason.clone(),
            }
        } else {
            ServiceStatus::Disconnected { tools }
        };
        Some(ServiceReport {
            service: name.to_string(),
            status,
            transport: match service.config.transport {
                crate::config::Transport::Stdio { .. } => "stdio",
                crate::config::Transport::Http { .. } => "http",
            },
            server: health.identity.clone(),
            source: service.config.source.clone(),
            limits: service.guard.report(),
        })
    }

    /// The state of every configured service.
    ///
    /// ```no_run
    /// # fn run(airlock: &airlock_host::Airlock) {
    /// use airlock_host::ServiceStatus;
    /// for report in airlock.services().status() {
    ///     match report.status {
    ///         ServiceStatus::Failed { reason } => eprintln!("{} failed: {reason}", report.service),
    ///         other => println!("{}: {}", report.service, other.name()),
    ///     }
    /// }
    /// # }
    /// ```
    pub fn status(&self) -> Vec<ServiceReport> {
        self.names()
            .iter()
            .filter_map(|name| self.report(name))
            .collect()
    }

    /// Sends `service_changed` with `name`'s state now.
    pub(crate) fn emit_service_changed(&self, name: &str) {
        let Some(report) = self.report(name) else {
            return;
        };
        let reason = match &report.status {
            ServiceStatus::Failed { reason } => Some(reason.clone()),
            _ => None,
        };
        self.events.emit(Event::ServiceChanged {
            service: name.to_string(),
            state: report.status.state(),
            reason,
        });
    }

    /// Sends `tools_changed` with `name`'s tool count now (none when it is disabled).
    pub(crate) fn emit_tools_changed(&self, name: &str) {
        let tools = match self.get(name) {
            Some(service) if service.enabled() => self.tool_count(name),
            _ => 0,
        };
        self.events.emit(Event::ToolsChanged {
            service: name.to_string(),
            tools,
        });
    }
}
