//! [`Access`]: which agent may use which service. Two layers, both checked before a call
//! reaches a server, before any other request touches a service, and again on every
//! output read:
//! - grants per (agent, service), kept in the registry, enforced when
//!   [`AccessMode::Grants`] is on;
//! - the embedder's [`AccessCheck`] callback (its "room" or permission mode).
//!
//! It also answers the questions policies ask a person (`approvals.rs`), and holds the
//! views of the services an agent may use.

mod approvals;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};

pub(crate) use approvals::Answered;
pub use approvals::{Approval, ApprovalRequest, Approver, RememberArguments};

use super::agents::Agents;
use super::services::{ServiceReport, Services, no_service, registry_failure};
use crate::error::{CallError, ErrorCode};
use crate::events::{Event, EventBus};
use crate::registry::Registry;

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

impl<'a> AccessRequest<'a> {
    /// The agent asking and the service it touches.
    pub fn parties(&self) -> (&'a str, &'a str) {
        match *self {
            AccessRequest::Call { agent, service, .. }
            | AccessRequest::Service { agent, service, .. }
            | AccessRequest::ReadOutput { agent, service, .. } => (agent, service),
        }
    }
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
/// Return an [`AccessRefused`] to refuse (`"reason".into()` makes one). A closure
/// returning `Result<(), AccessRefused>` is an `AccessCheck` too.
pub trait AccessCheck: Send + Sync {
    /// Allows or refuses one request.
    fn check(&self, request: &AccessRequest<'_>) -> Result<(), AccessRefused>;
}

impl<F> AccessCheck for F
where
    F: Fn(&AccessRequest<'_>) -> Result<(), AccessRefused> + Send + Sync,
{
    fn check(&self, request: &AccessRequest<'_>) -> Result<(), AccessRefused> {
        self(request)
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

/// The services an agent's groups grant, and until when (seconds since the epoch).
type GroupGrants = (Arc<BTreeSet<String>>, u64);

/// Now, in seconds since the epoch.
fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

pub(crate) fn denied(message: String) -> CallError {
    CallError::new(ErrorCode::ServiceAccessDenied, message)
}

/// Who may use what, and the questions a person answers.
pub struct Access {
    mode: AccessMode,
    check: Option<Arc<dyn AccessCheck>>,
    approver: Option<Arc<dyn Approver>>,
    registry: Arc<Registry>,
    services: Arc<Services>,
    agents: Arc<Agents>,
    events: EventBus,
    /// Every grant as last read by [`Access::take_in_grants`].
    seen: Mutex<BTreeSet<(String, String)>>,
    /// The services each agent's groups grant, as its latest verified access token
    /// named them (`[serve.auth] groups`), and until when (that token's expiry, seconds
    /// since the epoch).
    group_grants: RwLock<HashMap<String, GroupGrants>>,
}

impl Access {
    pub(crate) fn new(
        options: AccessOptions,
        approver: Option<Arc<dyn Approver>>,
        registry: Arc<Registry>,
        services: Arc<Services>,
        agents: Arc<Agents>,
        events: EventBus,
    ) -> Access {
        Access {
            mode: options.mode,
            check: options.check,
            approver,
            registry,
            services,
            agents,
            events,
            seen: Default::default(),
            group_grants: Default::default(),
        }
    }

    /// Holds the services `agent`'s groups grant, as its latest verified access token
    /// named them, until `until` (that token's expiry, seconds since the epoch): they
    /// count as grants in grants mode until then or until the agent's next token says
    /// otherwise (an empty set drops them). Not persisted: a group's members hold them
    /// only while they present such tokens. `airlock serve --http` calls it for every
    /// request authenticated by `[serve.auth]` (and drops them for a request with one of
    /// Airlock's own tokens); an embedder that authenticates its users itself may too.
    pub fn hold_group_grants(&self, agent: &str, services: &Arc<BTreeSet<String>>, until: u64) {
        let held = self.group_grants.read().expect("group grants poisoned");
        let same = match held.get(agent) {
            Some((now, held_until)) => now == services && *held_until == until,
            None => services.is_empty(),
        };
        drop(held);
        if same {
            return;
        }
        let mut held = self.group_grants.write().expect("group grants poisoned");
        let now = unix_now();
        // Whoever else's tokens have expired go too: the map holds live callers only.
        held.retain(|_, (_, until)| *until > now);
        if services.is_empty() {
            held.remove(agent);
        } else {
            held.insert(agent.to_string(), (services.clone(), until));
        }
    }

    /// Whether `agent`'s groups grant `service` (and the token that said so is live).
    fn group_granted(&self, agent: &str, service: &str) -> bool {
        let held = self.group_grants.read().expect("group grants poisoned");
        held.get(agent)
            .is_some_and(|(services, until)| *until > unix_now() && services.contains(service))
    }

    /// Whether calls need grants.
    pub fn mode(&self) -> AccessMode {
        self.mode
    }

    /// Checks grants and the embedder's callback for `request`. On PostgreSQL the
    /// grant query is awaited, no thread waits for it.
    pub async fn authorize(&self, request: &AccessRequest<'_>) -> Result<(), CallError> {
        let (agent, service) = request.parties();
        let granted = match self.mode {
            AccessMode::Open => true,
            AccessMode::Grants => {
                self.group_granted(agent, service)
                    || self
                        .registry
                        .is_granted_async(agent, service)
                        .await
                        .map_err(registry_failure)?
            }
        };
        self.decide(granted, request)
    }

    /// Whether `agent` may use `service` for `operation` (grants and the embedder's
    /// callback, as for a request). For listings, which are synchronous: the grant
    /// query runs on this thread.
    pub fn may_use(&self, agent: &str, service: &str, operation: &str) -> bool {
        let request = AccessRequest::Service {
            agent,
            service,
            operation,
        };
        let granted = match self.mode {
            AccessMode::Open => Ok(true),
            AccessMode::Grants if self.group_granted(agent, service) => Ok(true),
            AccessMode::Grants => self.registry.is_granted(agent, service),
        };
        granted.is_ok_and(|granted| self.decide(granted, &request).is_ok())
    }

    /// The verdict on `request` once whether its agent holds the grant is known: the
    /// grant first, then the embedder's callback.
    fn decide(&self, granted: bool, request: &AccessRequest<'_>) -> Result<(), CallError> {
        let (agent, service) = request.parties();
        if !granted {
            return Err(denied(format!(
                "agent \"{agent}\" has no grant for service \"{service}\""
            )));
        }
        if let Some(check) = &self.check {
            check
                .check(request)
                .map_err(|m| denied(format!("access to service \"{service}\" was refused: {m}")))?;
        }
        Ok(())
    }

    /// The services `agent` holds grants for, in grants mode (`None` in open mode: every
    /// service). One registry query, not one per service; a registry that cannot be read
    /// grants nothing.
    pub fn granted_services(&self, agent: &str) -> Option<HashSet<String>> {
        match self.mode {
            AccessMode::Open => None,
            AccessMode::Grants => {
                let mut granted: HashSet<String> = match self.registry.grants(agent) {
                    Ok(services) => services.into_iter().collect(),
                    Err(e) => {
                        tracing::warn!(
                            agent,
                            "cannot read grants; granting nothing but group grants: {e}"
                        );
                        Default::default()
                    }
                };
                let held = self.group_grants.read().expect("group grants poisoned");
                if let Some((services, until)) = held.get(agent)
                    && *until > unix_now()
                {
                    granted.extend(services.iter().cloned());
                }
                Some(granted)
            }
        }
    }

    /// Grants `service` to `agent` (persisted). Emits `grants_changed`.
    ///
    /// ```no_run
    /// # async fn run(airlock: airlock_host::Airlock) -> Result<(), airlock_host::CallError> {
    /// airlock.access().grant("agent-7", "github")?;
    /// let visible = airlock.catalog().tools_for("agent-7");
    /// airlock.access().revoke("agent-7", "github").await?; // also closes agent-7's github session
    /// # Ok(()) }
    /// ```
    pub fn grant(&self, agent: &str, service: &str) -> Result<(), CallError> {
        if !self.services.has(service) {
            return Err(no_service(service));
        }
        if self
            .registry
            .grant(agent, service)
            .map_err(registry_failure)?
        {
            self.events.emit(Event::GrantsChanged {
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
            .registry
            .revoke(agent, service)
            .map_err(registry_failure)?
        {
            self.events.emit(Event::GrantsChanged {
                agent: agent.to_string(),
                service: service.to_string(),
                granted: false,
            });
        }
        self.services.disconnect(agent, service).await;
        Ok(())
    }

    /// Every grant, as (agent, service) pairs.
    pub fn all_grants(&self) -> Result<Vec<(String, String)>, CallError> {
        self.registry.all_grants().map_err(registry_failure)
    }

    /// The state of the services `agent` may use (grants and the embedder's callback
    /// consulted, as for calls).
    pub fn status_for(&self, agent: &str) -> Vec<ServiceReport> {
        self.services
            .names()
            .iter()
            .filter(|name| self.may_use(agent, name, "status"))
            .filter_map(|name| self.services.report(name))
            .collect()
    }

    /// Takes in every grant as the registry holds it now (another process may have
    /// changed them): each grant given or revoked since the last look is reported as
    /// `grants_changed`. The first look (`first`) only records them.
    pub(crate) fn take_in_grants(&self, grants: Vec<(String, String)>, first: bool) {
        let grants: BTreeSet<(String, String)> = grants.into_iter().collect();
        let before = std::mem::replace(
            &mut *self.seen.lock().expect("seen grants poisoned"),
            grants.clone(),
        );
        if first {
            return;
        }
        for (agent, service) in before.symmetric_difference(&grants) {
            self.events.emit(Event::GrantsChanged {
                agent: agent.clone(),
                service: service.clone(),
                granted: grants.contains(&(agent.clone(), service.clone())),
            });
        }
    }
}
