//! [`Airlock`]: the library facade an agent platform embeds, and the one the CLI and the
//! gateway are clients of. It hands out a few capability services, each owning its
//! state:
//!
//! - [`Services`] — the configured services (definitions, status, enable/disable, test,
//!   reconcile) and every agent's sessions with them;
//! - [`Access`] — grants, the embedder's access callback, a person's approvals;
//! - [`Catalog`] — the tools, by qualified name: list, search, what an agent may use;
//! - [`Resources`] — resources, prompts and completions of the services;
//! - [`Outputs`] — retained results: read, export, reindex;
//! - [`Calls`] — the data path of a call, as a pipeline of stages (`call/`).
//!
//! [`Stores`] opens what an Airlock keeps (grants, approvals, outputs) without starting
//! one, for offline tools.
//!
//! [`Agents`] keeps what Airlock knows per agent (its client, roots, log level).
//!
//! Layer 7 (facade). May import every layer below it. Within it, each room imports only
//! those listed before it: `options`, `agents`, `services`, `access`, `catalog`,
//! `resources`, `outputs`, `call`, then this file, `start`, `stores`, `follow`,
//! `health`, `meters`.

mod access;
mod agents;
mod call;
mod catalog;
mod follow;
mod health;
pub mod meters;
mod options;
mod outputs;
mod resources;
mod services;
mod start;
mod stores;

use std::sync::Arc;

use tokio::sync::broadcast;

pub use access::{
    Access, AccessCheck, AccessMode, AccessOptions, AccessRefused, AccessRequest, Approval,
    ApprovalRequest, Approver, RememberArguments,
};
pub use agents::{Agents, URL_ELICITATION};
pub use call::{CallOptions, CallOutput, CallerRequest, Calls, Redaction, call_json};
pub use catalog::{Catalog, CatalogTool};
pub use health::{DegradedService, Readiness, ReadinessCheck};
pub use options::{
    AirlockOptions, COMPACT_PREVIEW, DEFAULT_AGENT, DEFAULT_MAX_SESSIONS, DEFAULT_PREVIEW,
};
pub use outputs::{Outputs, Reindexed};
pub use resources::Resources;
pub use services::{
    PluginSlot, Reconciled, ServicePlugins, ServiceReport, ServiceStatus, Services, SessionInfo,
    TestReport,
};
pub use start::StartError;
pub use stores::Stores;

use crate::events::{Event, EventBus};
use crate::registry::Registry;

/// A running Airlock host. Cheap to clone; clones share everything.
///
/// ```no_run
/// # async fn run(airlock: airlock_host::Airlock) -> Result<(), airlock_host::CallError> {
/// for tool in airlock.catalog().tools() {
///     println!("{} ({})", tool.name, tool.service);
/// }
/// let out = airlock.calls().call("mcp__demo__echo", serde_json::json!({"text": "hi"}), None).await?;
/// let page = airlock.outputs().read(&out.service, out.retained.output_id.as_deref().unwrap_or(""), 0).await?;
/// airlock.close().await;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Airlock {
    parts: Arc<Parts>,
}

/// The capability services of one Airlock, and what they share.
struct Parts {
    services: Arc<Services>,
    access: Arc<Access>,
    catalog: Arc<Catalog>,
    resources: Resources,
    outputs: Arc<Outputs>,
    calls: Calls,
    agents: Arc<Agents>,
    registry: Arc<Registry>,
    events: EventBus,
    seen: follow::Seen,
}

impl Airlock {
    /// The configured services and the sessions with them.
    pub fn services(&self) -> &Services {
        &self.parts.services
    }

    /// Who may use what.
    pub fn access(&self) -> &Access {
        &self.parts.access
    }

    /// The tools.
    pub fn catalog(&self) -> &Catalog {
        &self.parts.catalog
    }

    /// Resources, prompts and completions.
    pub fn resources(&self) -> &Resources {
        &self.parts.resources
    }

    /// Retained results.
    pub fn outputs(&self) -> &Outputs {
        &self.parts.outputs
    }

    /// Tool calls.
    pub fn calls(&self) -> &Calls {
        &self.parts.calls
    }

    /// What Airlock keeps per agent (roots, client, log level).
    pub fn agents(&self) -> &Agents {
        &self.parts.agents
    }

    /// Events from now on: sessions, calls, progress, catalog changes.
    ///
    /// ```no_run
    /// # async fn run(airlock: airlock_host::Airlock) {
    /// let mut events = airlock.events();
    /// tokio::spawn(async move {
    ///     while let Ok(event) = events.recv().await {
    ///         println!("{}", serde_json::to_string(&event).unwrap());
    ///     }
    /// });
    /// # }
    /// ```
    pub fn events(&self) -> broadcast::Receiver<Event> {
        self.parts.events.subscribe()
    }

    /// The events that say what this Airlock offers changed (services, sessions, grants,
    /// tool, resource and prompt lists, resources), from now on: [`Airlock::events`] less
    /// each call's own (`call_started`, `tool_called`, `policy_decided`, `progress`), so
    /// a receiver that waits for changes is not woken by every call.
    pub fn changes(&self) -> broadcast::Receiver<Event> {
        self.parts.events.subscribe_changes()
    }

    /// The registry this Airlock keeps its state in (the gateway's tokens and tasks live
    /// there).
    #[cfg(feature = "gateway")]
    pub(crate) fn registry(&self) -> Arc<Registry> {
        self.parts.registry.clone()
    }

    /// Closes every session and waits until they are closed (no server process
    /// outlives this), and until every retained result is on disk.
    ///
    /// ```no_run
    /// # async fn run(airlock: airlock_host::Airlock) {
    /// airlock.close().await; // every child process (and its process group) is gone
    /// # }
    /// ```
    pub async fn close(self) {
        self.parts.services.close_all().await;
        self.parts.outputs.flush().await;
    }
}
