//! [`Airlock`]: the library facade an agent platform embeds, and the one the CLI and the
//! gateway are clients of. It holds the services (their definitions, plugin pipelines,
//! known secrets and health), the catalog, the session pool, the results store and the
//! registry, and runs every call through the data path:
//! catalog -> access -> session (per agent x service, opened on first use) -> server ->
//! content plugin -> redaction chain -> results store.
//!
//! The facade imports every layer below it (config, launch, transport, session, plugin,
//! catalog, results, registry, secrets); nothing below imports it.
//!
//! Layer 7 (facade). May import every layer below it.

mod access;
mod approvals;
mod calls;
mod egress;
mod follow;
mod health;
mod inventory;
mod listings;
pub mod meters;
mod output;
mod policy;
mod questions;
mod reconcile;
mod reindex;
mod report;
mod sessions;
mod start;
mod upstream;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};

use tokio::sync::broadcast;

pub use access::{AccessCheck, AccessMode, AccessOptions, AccessRefused, AccessRequest};
pub use approvals::{Approval, ApprovalRequest, Approver, RememberArguments};
pub use calls::{CallOptions, CallerRequest};
pub use health::{DegradedService, Readiness, ReadinessCheck};
pub use inventory::{PluginSlot, ServicePlugins, SessionInfo};
pub use output::{CallOutput, Redaction, call_json};
pub use questions::URL_ELICITATION;
pub use reconcile::Reconciled;
pub use reindex::Reindexed;
pub use report::{ServiceReport, ServiceStatus, TestReport};
pub use start::StartError;
#[cfg(feature = "cli")]
pub(crate) use start::resolve_secret;

use crate::catalog::{CatalogTool, Cataloger};
use crate::config::ServerConfig;
use crate::events::Event;
use crate::plugin::{PluginRuntime, ServiceInfo, ServicePipeline};
use crate::registry::Registry;
use crate::results::{Page, ResultLimits, ResultStore};
use crate::secrets::{KnownSecrets, SecretStore};
use crate::session::{AgentLink, ServerIdentity, SessionPool};

/// The agent used when the caller names none.
pub const DEFAULT_AGENT: &str = "default";
/// Default live-session limit.
pub const DEFAULT_MAX_SESSIONS: usize = 64;

/// How to run an [`Airlock`].
#[derive(Clone)]
pub struct AirlockOptions {
    /// Where Airlock keeps its state (created if missing).
    pub data_dir: PathBuf,
    /// Folders offered as roots to agents that set none (absolute paths). The first is
    /// also the working directory of servers configured without `cwd`.
    pub roots: Vec<String>,
    /// Retention and preview limits.
    pub result_limits: ResultLimits,
    /// Most live sessions at once; a new connection past it is refused.
    pub max_sessions: usize,
    /// Grants and the embedder's access callback.
    pub access: AccessOptions,
    /// Where compiled plugins are cached, when not `<data_dir>/plugin-cache` (a folder
    /// several data directories may share).
    pub plugin_cache: Option<PathBuf>,
    /// Answers the questions policies ask a person; without one, such calls are denied.
    pub approver: Option<Arc<dyn Approver>>,
}

impl std::fmt::Debug for AirlockOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AirlockOptions")
            .field("data_dir", &self.data_dir)
            .field("roots", &self.roots)
            .field("result_limits", &self.result_limits)
            .field("max_sessions", &self.max_sessions)
            .field("access", &self.access)
            .field("plugin_cache", &self.plugin_cache)
            .field("approver", &self.approver.is_some())
            .finish()
    }
}

impl AirlockOptions {
    /// Options with default limits and no roots.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        AirlockOptions {
            data_dir: data_dir.into(),
            roots: Vec::new(),
            result_limits: ResultLimits::default(),
            max_sessions: DEFAULT_MAX_SESSIONS,
            access: AccessOptions::default(),
            plugin_cache: None,
            approver: None,
        }
    }
}

/// What Airlock knows about one service's health.
#[derive(Default)]
struct Health {
    failed: Option<String>,
    untested: Option<String>,
    /// Whether the untested service has a tested catalog for an earlier launch.
    stale: bool,
    connecting: usize,
    identity: Option<ServerIdentity>,
}

/// One configured service: its definition, its plugins, what it must never let out, and
/// how it is doing.
struct Service {
    config: ServerConfig,
    pipeline: Option<Arc<ServicePipeline>>,
    secrets: RwLock<KnownSecrets>,
    health: Mutex<Health>,
    /// Disabled while running (`Airlock::set_enabled`), on top of the config.
    paused: std::sync::atomic::AtomicBool,
    /// Its `[limits]`: calls in flight, rates and the connection breaker.
    guard: crate::session::UpstreamGuard,
}

impl Service {
    /// Whether the service may be used: enabled in its config and not disabled since.
    fn enabled(&self) -> bool {
        self.config.enabled && !self.paused.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The known secrets to redact from this service's output and diagnostics.
    fn secrets(&self) -> KnownSecrets {
        self.secrets.read().expect("secrets lock poisoned").clone()
    }

    /// Learns a secret at run time (an OAuth access token, say).
    fn learn_secret(&self, name: &str, value: &str) {
        let mut secrets = self.secrets.write().expect("secrets lock poisoned");
        *secrets = secrets.with(name, value);
        crate::secrets::register_log_secrets(&secrets);
    }

    /// What the naming plugin is told about the service.
    fn info(&self) -> ServiceInfo {
        ServiceInfo {
            id: self.config.name.clone(),
            label: self.config.label.clone(),
            description: self.config.description.clone(),
        }
    }

    fn health(&self) -> std::sync::MutexGuard<'_, Health> {
        self.health.lock().expect("health lock poisoned")
    }
}

pub(crate) struct Inner {
    /// Every configured service by name; replaced as a whole entry by
    /// [`Airlock::reconcile`] when definitions change while running.
    services: RwLock<BTreeMap<String, Arc<Service>>>,
    cataloger: Arc<Cataloger>,
    results: ResultStore,
    runtime: Arc<PluginRuntime>,
    registry: Arc<Registry>,
    secret_store: SecretStore,
    preview: usize,
    events: broadcast::Sender<Event>,
    pool: SessionPool,
    roots: RwLock<HashMap<String, Vec<String>>>,
    default_roots: Vec<String>,
    access: AccessOptions,
    approver: Option<Arc<dyn Approver>>,
    agent_clients: RwLock<HashMap<String, Arc<AgentLink>>>,
    log_levels: RwLock<HashMap<String, String>>,
    /// Held while [`Airlock::reconcile`] runs, so reconciles take turns.
    reconciling: tokio::sync::Mutex<()>,
    /// Services disabled at run time (by any host sharing the registry), as last read.
    pauses: RwLock<std::collections::BTreeSet<String>>,
    /// What [`Airlock::take_in_changes`] last saw of the registry.
    seen: Mutex<follow::Seen>,
}

/// A running Airlock host. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct Airlock {
    inner: Arc<Inner>,
}

impl Airlock {
    /// Every tool in the catalog, by qualified name.
    ///
    /// ```no_run
    /// # fn run(airlock: &airlock_host::Airlock) {
    /// for tool in airlock.tools() {
    ///     println!("{} -> {} / {}", tool.name, tool.service, tool.raw_name);
    /// }
    /// # }
    /// ```
    pub fn tools(&self) -> Vec<CatalogTool> {
        self.inner.cataloger.read().tools().cloned().collect()
    }

    /// Tools matching `query` (see [`crate::catalog::Catalog::search`]).
    pub fn search_tools(&self, query: &str) -> Vec<CatalogTool> {
        self.inner
            .cataloger
            .read()
            .search(query)
            .into_iter()
            .cloned()
            .collect()
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
        self.inner.events.subscribe()
    }

    /// The plugin runtime (to load plugins for offline replay, for example).
    pub fn runtime(&self) -> &Arc<PluginRuntime> {
        &self.inner.runtime
    }

    /// Reads a page of a retained output of `service` as the default agent (see
    /// [`Airlock::read_output_as`]).
    pub fn read_output(
        &self,
        service: &str,
        output_id: &str,
        offset: usize,
    ) -> Result<Page, crate::error::CallError> {
        self.read_output_as(DEFAULT_AGENT, service, output_id, offset)
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
        self.inner.pool.close_all().await;
        self.inner.results.flush().await;
    }

    /// Waits until every result retained so far is on disk and indexed (results are
    /// written off the caller's path; reads see them at once either way).
    pub async fn flush_results(&self) {
        self.inner.results.flush().await;
    }
}

impl Inner {
    fn service(&self, name: &str) -> Option<Arc<Service>> {
        self.services
            .read()
            .expect("services lock poisoned")
            .get(name)
            .cloned()
    }

    /// Every configured service, in name order (a snapshot: services added or removed
    /// meanwhile are not in it, or still are).
    fn all_services(&self) -> Vec<(String, Arc<Service>)> {
        self.services
            .read()
            .expect("services lock poisoned")
            .iter()
            .map(|(name, service)| (name.clone(), service.clone()))
            .collect()
    }

    /// Whether a service of that name is configured.
    fn has_service(&self, name: &str) -> bool {
        self.services
            .read()
            .expect("services lock poisoned")
            .contains_key(name)
    }

    fn emit(&self, event: Event) {
        let _ = self.events.send(event);
    }

    /// Emits the event `make` builds, building it only when someone listens (for
    /// events on every call's path).
    fn emit_with(&self, make: impl FnOnce() -> Event) {
        if self.events.receiver_count() > 0 {
            let _ = self.events.send(make());
        }
    }

    /// `error` (from `service`'s server or session) with the service's known secrets
    /// scrubbed from its message.
    fn scrub_error(
        &self,
        service: &str,
        mut error: crate::error::CallError,
    ) -> crate::error::CallError {
        if let Some(svc) = self.service(service) {
            error.message = svc.secrets().scrub_owned(&error.message);
        }
        error
    }
}
