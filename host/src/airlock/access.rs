//! Access: which agent may use which service. Two layers, both checked before a call
//! reaches a server and again on every output read:
//! - grants per (agent, service), kept in the registry, enforced when
//!   [`AccessMode::Grants`] is on;
//! - the embedder's [`AccessCheck`] callback (its "room" or permission mode).

use std::sync::Arc;

use super::{Airlock, Inner};
use crate::catalog::CatalogTool;
use crate::error::{CallError, ErrorCode};
use crate::events::Event;
use crate::results::{Page, ReadError};

/// Whether grants are required.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AccessMode {
    /// Every agent may use every enabled service (the CLI's default).
    #[default]
    Open,
    /// An agent sees and calls only the services granted to it.
    Grants,
}

/// What an agent is about to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessRequest<'a> {
    /// Call `tool` (qualified name) of `service`.
    Call {
        /// The agent.
        agent: &'a str,
        /// The service.
        service: &'a str,
        /// The qualified tool name.
        tool: &'a str,
    },
    /// Anything else that touches `service`: list or read its resources, list or get
    /// its prompts, complete an argument, subscribe, set its log level.
    Service {
        /// The agent.
        agent: &'a str,
        /// The service.
        service: &'a str,
        /// The MCP method, e.g. `resources/read`.
        operation: &'a str,
    },
    /// Read a retained output of `service`.
    ReadOutput {
        /// The agent.
        agent: &'a str,
        /// The service.
        service: &'a str,
        /// The output id.
        output_id: &'a str,
    },
}

/// The embedder's refusal of one request; its reason reaches the caller with
/// `service_access_denied`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct AccessRefused {
    /// Why, in words for the caller.
    pub reason: String,
}

impl From<String> for AccessRefused {
    fn from(reason: String) -> Self {
        AccessRefused { reason }
    }
}

impl From<&str> for AccessRefused {
    fn from(reason: &str) -> Self {
        AccessRefused {
            reason: reason.to_string(),
        }
    }
}

/// The embedder's permission gate, consulted before every call and every output read.
/// Return an [`AccessRefused`] to refuse. A closure returning `Result<(), String>` is an
/// `AccessCheck` too.
pub trait AccessCheck: Send + Sync {
    /// Allows or refuses one request.
    fn check(&self, request: &AccessRequest<'_>) -> Result<(), AccessRefused>;
}

impl<F> AccessCheck for F
where
    F: Fn(&AccessRequest<'_>) -> Result<(), String> + Send + Sync,
{
    fn check(&self, request: &AccessRequest<'_>) -> Result<(), AccessRefused> {
        self(request).map_err(AccessRefused::from)
    }
}

/// The access settings of an [`Airlock`].
#[derive(Clone, Default)]
pub struct AccessOptions {
    /// Whether grants are required.
    pub mode: AccessMode,
    /// The embedder's callback, if any.
    pub check: Option<Arc<dyn AccessCheck>>,
}

impl std::fmt::Debug for AccessOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessOptions")
            .field("mode", &self.mode)
            .field("check", &self.check.is_some())
            .finish()
    }
}

fn denied(message: String) -> CallError {
    CallError::new(ErrorCode::ServiceAccessDenied, message)
}

/// A registry failure as a call's error: `registry_unavailable` when the database could
/// not be reached (a retry may work), else `service_unavailable`.
pub(super) fn registry_failure(e: crate::registry::RegistryError) -> CallError {
    let code = if e.is_unavailable() {
        ErrorCode::RegistryUnavailable
    } else {
        ErrorCode::ServiceUnavailable
    };
    CallError::new(code, e.to_string())
}

impl Inner {
    /// Whether `agent` holds what grants require for `service`.
    fn granted(&self, agent: &str, service: &str) -> Result<bool, CallError> {
        match self.access.mode {
            AccessMode::Open => Ok(true),
            AccessMode::Grants => self
                .registry
                .is_granted(agent, service)
                .map_err(registry_failure),
        }
    }

    /// Checks grants and the embedder's callback for `request`.
    pub(super) fn authorize(&self, request: &AccessRequest<'_>) -> Result<(), CallError> {
        let (agent, service) = match request {
            AccessRequest::Call { agent, service, .. }
            | AccessRequest::Service { agent, service, .. }
            | AccessRequest::ReadOutput { agent, service, .. } => (*agent, *service),
        };
        if !self.granted(agent, service)? {
            return Err(denied(format!(
                "agent \"{agent}\" has no grant for service \"{service}\""
            )));
        }
        if let Some(check) = &self.access.check {
            check
                .check(request)
                .map_err(|m| denied(format!("access to service \"{service}\" was refused: {m}")))?;
        }
        Ok(())
    }
}

impl Airlock {
    /// Grants `service` to `agent` (persisted). Emits `grants_changed`.
    ///
    /// ```no_run
    /// # async fn run(airlock: airlock_host::Airlock) -> Result<(), airlock_host::CallError> {
    /// airlock.grant("agent-7", "github")?;
    /// let visible = airlock.tools_for("agent-7");
    /// airlock.revoke("agent-7", "github").await?; // also closes agent-7's github session
    /// # Ok(()) }
    /// ```
    pub fn grant(&self, agent: &str, service: &str) -> Result<(), CallError> {
        if !self.inner.has_service(service) {
            return Err(CallError::new(
                ErrorCode::ServiceUnavailable,
                format!("no service named \"{service}\""),
            ));
        }
        if self
            .inner
            .registry
            .grant(agent, service)
            .map_err(registry_failure)?
        {
            self.inner.emit(Event::GrantsChanged {
                agent: agent.to_string(),
                service: service.to_string(),
                granted: true,
            });
        }
        Ok(())
    }

    /// Revokes `agent`'s grant of `service` and closes that agent's session with it.
    pub async fn revoke(&self, agent: &str, service: &str) -> Result<(), CallError> {
        if self
            .inner
            .registry
            .revoke(agent, service)
            .map_err(registry_failure)?
        {
            self.inner.emit(Event::GrantsChanged {
                agent: agent.to_string(),
                service: service.to_string(),
                granted: false,
            });
        }
        self.inner.disconnect_now(agent, service).await;
        Ok(())
    }

    /// The tools `agent` may see: every tool of an enabled service in open mode, else
    /// those of granted services.
    pub fn tools_for(&self, agent: &str) -> Vec<CatalogTool> {
        // One registry query for the agent's grants, not one per tool: with the registry
        // in PostgreSQL each is a round trip.
        let granted: Option<std::collections::HashSet<String>> = match self.inner.access.mode {
            AccessMode::Open => None,
            AccessMode::Grants => match self.inner.registry.grants(agent) {
                Ok(services) => Some(services.into_iter().collect()),
                Err(e) => {
                    tracing::warn!(agent, "cannot read grants; listing no tools: {e}");
                    Some(Default::default())
                }
            },
        };
        self.tools()
            .into_iter()
            .filter(|t| self.inner.service(&t.service).is_some_and(|s| s.enabled()))
            .filter(|t| granted.as_ref().is_none_or(|g| g.contains(&t.service)))
            .collect()
    }

    /// Saves a retained output of `service` (owned by `agent`) into `folder`, whole or as
    /// ordered parts of at most `part_size` bytes with an index (at most 512 parts); the
    /// agent's access is checked as for a read.
    pub fn export_output(
        &self,
        agent: &str,
        service: &str,
        output_id: &str,
        folder: &std::path::Path,
        part_size: Option<usize>,
    ) -> Result<crate::results::Export, CallError> {
        self.inner.authorize(&AccessRequest::ReadOutput {
            agent,
            service,
            output_id,
        })?;
        self.inner
            .results
            .export_for(agent, service, output_id, folder, part_size)
            .map_err(|e| match e {
                crate::results::ExportError::Read(ReadError::NotOwner { .. }) => {
                    denied(e.to_string())
                }
                crate::results::ExportError::Write { .. } => {
                    CallError::new(ErrorCode::ToolError, e.to_string())
                }
                other => CallError::new(ErrorCode::InvalidArguments, other.to_string()),
            })
    }

    /// Reads a page of a retained output for `agent`: only the agent whose call produced
    /// it may read it, and its access to the service is checked again.
    pub fn read_output_as(
        &self,
        agent: &str,
        service: &str,
        output_id: &str,
        offset: usize,
    ) -> Result<Page, CallError> {
        self.inner.authorize(&AccessRequest::ReadOutput {
            agent,
            service,
            output_id,
        })?;
        self.inner
            .results
            .read_for(agent, service, output_id, offset, self.inner.preview)
            .map_err(|e| match e {
                ReadError::NotOwner { .. } => denied(e.to_string()),
                ReadError::BadOffset { .. } => {
                    CallError::new(ErrorCode::InvalidArguments, e.to_string())
                }
                other => CallError::new(ErrorCode::InvalidArguments, other.to_string()),
            })
    }
}
