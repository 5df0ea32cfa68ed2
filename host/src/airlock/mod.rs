//! [`Airlock`]: the library entry point an agent platform embeds. It builds each
//! service's plugin pipeline from config, opens the default agent's session to every
//! enabled server concurrently (a failing server is reported and skipped), assembles the
//! catalog, and runs calls through the data path:
//! catalog -> session (per agent x service, opened on first use) -> server ->
//! content plugin -> redaction chain -> results store.

mod access;
mod calls;
mod sessions;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex, RwLock};

use cap_std::fs::Dir;
use serde::Serialize;
use tokio::sync::broadcast;

pub use access::{AccessCheck, AccessMode, AccessOptions, AccessRequest};
pub use calls::{CallOptions, CallOutput, Redaction};

use crate::catalog::{Catalog, CatalogTool};
use crate::config::{Config, ServerConfig};
use crate::events::Event;
use crate::plugin::{PluginError, PluginRuntime, ServicePipeline};
use crate::registry::Registry;
use crate::results::{Page, ResultLimits, ResultStore};
use crate::session::ServerIdentity;

/// The agent used when the caller names none.
pub const DEFAULT_AGENT: &str = "default";
/// Default live-session limit.
pub const DEFAULT_MAX_SESSIONS: usize = 64;

/// How to run an [`Airlock`].
#[derive(Debug, Clone)]
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
        }
    }
}

/// Why Airlock could not start at all (a single service failing is not one of these).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The data directory could not be created or opened.
    #[error("data directory \"{path}\": {message}")]
    DataDir {
        /// The directory.
        path: PathBuf,
        /// The OS error.
        message: String,
    },
    /// The registry database failed.
    #[error(transparent)]
    Registry(#[from] crate::registry::RegistryError),
    /// The plugin runtime failed.
    #[error(transparent)]
    Plugin(#[from] PluginError),
    /// `airlock servers test` could not connect or list the tools.
    #[error("testing service \"{service}\" failed: {reason}")]
    Test {
        /// The service.
        service: String,
        /// Why (secrets scrubbed).
        reason: String,
    },
    /// The secret store could not be opened.
    #[error(transparent)]
    Secrets(#[from] crate::secrets::SecretError),
}

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
    /// The state's name (`connected`, `failed`…).
    pub fn name(&self) -> &'static str {
        match self {
            ServiceStatus::Disabled => "disabled",
            ServiceStatus::Untested { .. } => "untested",
            ServiceStatus::Disconnected { .. } => "disconnected",
            ServiceStatus::Connecting { .. } => "connecting",
            ServiceStatus::Connected { .. } => "connected",
            ServiceStatus::Failed { .. } => "failed",
        }
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
    /// What the server said about itself in the latest handshake.
    pub server: Option<ServerIdentity>,
    /// The file defining it (`registry:user` or `registry:project` for services managed
    /// by `airlock servers`).
    pub source: PathBuf,
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

/// What Airlock knows about one service's health.
#[derive(Default)]
struct Health {
    failed: Option<String>,
    untested: Option<String>,
    connecting: usize,
    identity: Option<ServerIdentity>,
}

struct Service {
    config: ServerConfig,
    pipeline: Option<Arc<ServicePipeline>>,
    secrets: RwLock<Vec<(String, String)>>,
    health: Mutex<Health>,
}

impl Service {
    /// The known secrets to redact from this service's output and diagnostics.
    fn secrets(&self) -> Vec<(String, String)> {
        self.secrets.read().expect("secrets lock poisoned").clone()
    }

    /// Learns a secret at run time (an OAuth access token, say).
    fn learn_secret(&self, name: &str, value: &str) {
        let mut secrets = self.secrets.write().expect("secrets lock poisoned");
        let entry = (name.to_string(), value.to_string());
        if !value.is_empty() && !secrets.contains(&entry) {
            secrets.push(entry);
        }
    }
}

pub(crate) struct Inner {
    services: BTreeMap<String, Service>,
    catalog: RwLock<Catalog>,
    results: ResultStore,
    runtime: Arc<PluginRuntime>,
    registry: Registry,
    secret_store: crate::secrets::SecretStore,
    preview: usize,
    events: broadcast::Sender<Event>,
    sessions: Mutex<HashMap<(String, String), Arc<sessions::Slot>>>,
    live: AtomicUsize,
    max_sessions: usize,
    session_seq: AtomicU64,
    roots: RwLock<HashMap<String, Vec<String>>>,
    default_roots: Vec<String>,
    access: AccessOptions,
}

/// A running Airlock host. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct Airlock {
    inner: Arc<Inner>,
}

impl Airlock {
    /// Starts Airlock: opens the data directory, builds every enabled service's plugin
    /// pipeline, connects the default agent to every server concurrently and names their
    /// tools. A service that fails is marked failed (see [`Airlock::status`]); the others
    /// work.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// use airlock_host::{Airlock, AirlockOptions, config::{Config, ConfigSources, process_env}};
    /// let config = Config::load(&ConfigSources::discover(&std::env::current_dir()?, vec![]), &process_env)?;
    /// let airlock = Airlock::start(config, AirlockOptions::new("/tmp/airlock-data")).await?;
    /// for tool in airlock.tools() {
    ///     println!("{} ({})", tool.name, tool.service);
    /// }
    /// let out = airlock.call("mcp__demo__echo", serde_json::json!({"text": "hi"}), None).await?;
    /// println!("{}", out.preview);
    /// airlock.close().await;
    /// # Ok(()) }
    /// ```
    pub async fn start(config: Config, options: AirlockOptions) -> Result<Airlock, StartError> {
        let airlock = Airlock::prepare(config, options).await?;
        airlock.inner.catalog_all().await;
        Ok(airlock)
    }

    /// Tests one service the way `airlock servers test` does: opens a temporary
    /// connection, negotiates, lists the tools (running none), saves them as the
    /// service's tested catalog under its current launch digest, and closes.
    pub async fn test_service(
        server: ServerConfig,
        options: AirlockOptions,
    ) -> Result<TestReport, StartError> {
        let name = server.name.clone();
        let mut server = server;
        server.enabled = true;
        let config = Config {
            servers: BTreeMap::from([(name.clone(), server)]),
            ..Default::default()
        };
        let airlock = Airlock::prepare(config, options).await?;
        let inner = airlock.inner.clone();
        let outcome = async {
            let live = inner
                .session(DEFAULT_AGENT, &name)
                .await
                .map_err(|e| e.message)?;
            let tools = live.session.list_tools().await.map_err(|e| e.to_string())?;
            inner.check_catalog_limits(&tools)?;
            let identity = live.session.identity().clone();
            let service = &inner.services[&name];
            inner
                .registry
                .save_catalog(&crate::registry::StoredCatalog {
                    service: name.clone(),
                    launch_digest: service.config.launch_digest(),
                    tested_at: inner.registry.now().map_err(|e| e.to_string())?,
                    protocol_version: identity.protocol_version.clone(),
                    server_name: identity.name.clone(),
                    server_version: identity.version.clone(),
                    transport: serde_json::to_value(identity.transport)
                        .ok()
                        .and_then(|v| v.as_str().map(String::from))
                        .unwrap_or_default(),
                    tools: tools.clone(),
                })
                .map_err(|e| e.to_string())?;
            Ok::<_, String>(TestReport {
                service: name.clone(),
                verified: true,
                server: identity,
                tools,
            })
        }
        .await;
        let secrets = inner.services[&name].secrets();
        airlock.close().await;
        outcome.map_err(|reason| StartError::Test {
            service: name.clone(),
            reason: crate::launch::scrub(&reason, &secrets),
        })
    }

    /// Opens state and builds pipelines; connects nothing.
    async fn prepare(config: Config, options: AirlockOptions) -> Result<Airlock, StartError> {
        let data_err = |e: std::io::Error| StartError::DataDir {
            path: options.data_dir.clone(),
            message: e.to_string(),
        };
        std::fs::create_dir_all(&options.data_dir).map_err(data_err)?;
        let data = Dir::open_ambient_dir(&options.data_dir, cap_std::ambient_authority())
            .map_err(data_err)?;
        let registry = Registry::open(&options.data_dir)?;
        let runtime = PluginRuntime::new(config.sandbox, Some(&data))?;
        let results = ResultStore::open(&data, options.result_limits).map_err(data_err)?;
        let secret_store = crate::secrets::SecretStore::open(&options.data_dir)?;

        let builds = config.servers.values().filter(|s| s.enabled).map(|server| {
            let (runtime, name, adapters, cfg) = (
                runtime.clone(),
                server.name.clone(),
                server.adapters.clone(),
                server.adapter_config.clone(),
            );
            async move {
                let built = tokio::task::spawn_blocking(move || {
                    ServicePipeline::build(&runtime, &name, &adapters, &cfg)
                })
                .await
                .map_err(|e| format!("plugin setup failed: {e}"))
                .and_then(|r| r.map_err(|e| e.to_string()));
                (server.name.clone(), built)
            }
        });
        let mut pipelines: HashMap<String, Result<ServicePipeline, String>> =
            futures::future::join_all(builds)
                .await
                .into_iter()
                .collect();

        // Every known secret is redacted from every service's output: a token of one
        // service that shows up in another's result is still a secret.
        let mut all_secrets: Vec<(String, String)> = config
            .servers
            .values()
            .flat_map(crate::secrets::known_secrets)
            .collect();
        all_secrets.sort();
        all_secrets.dedup();
        let services = config
            .servers
            .iter()
            .map(|(name, server)| {
                let mut secrets = crate::secrets::known_secrets(server);
                secrets.extend(
                    all_secrets
                        .iter()
                        .filter(|s| !secrets.contains(s))
                        .cloned()
                        .collect::<Vec<_>>(),
                );
                let mut health = Health::default();
                if !server.repair.is_empty() {
                    health.failed = Some(crate::launch::scrub(
                        &format!(
                            "needs repair: {}; fix it with `airlock servers edit {name}`",
                            server.repair.join("; ")
                        ),
                        &secrets,
                    ));
                }
                let pipeline = match pipelines.remove(name) {
                    Some(Ok(p)) => Some(Arc::new(p)),
                    Some(Err(reason)) => {
                        health.failed = Some(crate::launch::scrub(&reason, &secrets));
                        None
                    }
                    None => None,
                };
                (
                    name.clone(),
                    Service {
                        config: server.clone(),
                        pipeline,
                        secrets: RwLock::new(secrets),
                        health: Mutex::new(health),
                    },
                )
            })
            .collect();
        let airlock = Airlock {
            inner: Arc::new(Inner {
                services,
                catalog: RwLock::new(Catalog::default()),
                results,
                runtime,
                registry,
                secret_store,
                preview: options.result_limits.preview,
                events: broadcast::channel(1024).0,
                sessions: Mutex::new(HashMap::new()),
                live: AtomicUsize::new(0),
                max_sessions: options.max_sessions.max(1),
                session_seq: AtomicU64::new(0),
                roots: RwLock::new(HashMap::new()),
                default_roots: options.roots,
                access: options.access,
            }),
        };
        Ok(airlock)
    }

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
        self.inner
            .catalog
            .read()
            .expect("catalog lock poisoned")
            .tools()
            .cloned()
            .collect()
    }

    /// Tools matching `query` (see [`Catalog::search`]).
    pub fn search_tools(&self, query: &str) -> Vec<CatalogTool> {
        self.inner
            .catalog
            .read()
            .expect("catalog lock poisoned")
            .search(query)
            .into_iter()
            .cloned()
            .collect()
    }

    /// The state of every configured service.
    ///
    /// ```no_run
    /// # fn run(airlock: &airlock_host::Airlock) {
    /// use airlock_host::ServiceStatus;
    /// for report in airlock.status() {
    ///     match report.status {
    ///         ServiceStatus::Failed { reason } => eprintln!("{} failed: {reason}", report.service),
    ///         other => println!("{}: {}", report.service, other.name()),
    ///     }
    /// }
    /// # }
    /// ```
    pub fn status(&self) -> Vec<ServiceReport> {
        self.inner
            .services
            .keys()
            .map(|name| self.inner.report(name))
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
    ) -> Result<Page, crate::CallError> {
        self.read_output_as(DEFAULT_AGENT, service, output_id, offset)
    }

    /// Closes every session and waits until they are closed; no server process
    /// outlives this.
    ///
    /// ```no_run
    /// # async fn run(airlock: airlock_host::Airlock) {
    /// airlock.close().await; // every child process (and its process group) is gone
    /// # }
    /// ```
    pub async fn close(self) {
        self.inner.close_all().await;
    }
}

impl Inner {
    fn service(&self, name: &str) -> Option<&Service> {
        self.services.get(name)
    }

    fn tool_count(&self, service: &str) -> usize {
        self.catalog
            .read()
            .expect("catalog lock poisoned")
            .tools()
            .filter(|t| t.service == service)
            .count()
    }

    fn report(&self, name: &str) -> ServiceReport {
        let service = &self.services[name];
        let health = service.health.lock().expect("health lock poisoned");
        let live = self.live_sessions(name);
        let tools = self.tool_count(name);
        let status = if !service.config.enabled {
            ServiceStatus::Disabled
        } else if let Some(reason) = health.untested.as_ref().filter(|_| live == 0) {
            ServiceStatus::Untested {
                reason: reason.clone(),
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
        ServiceReport {
            service: name.to_string(),
            status,
            server: health.identity.clone(),
            source: service.config.source.clone(),
        }
    }

    fn emit(&self, event: Event) {
        let _ = self.events.send(event);
    }

    fn emit_service_changed(&self, name: &str) {
        let report = self.report(name);
        let reason = match &report.status {
            ServiceStatus::Failed { reason } => Some(reason.clone()),
            _ => None,
        };
        self.emit(Event::ServiceChanged {
            service: name.to_string(),
            state: report.status.name().to_string(),
            reason,
        });
    }

    /// Catalogs every enabled service: from its tested catalog when that is fresh (no
    /// connection needed), else — for services from config files — by opening the
    /// default agent's session. A registry service without a fresh tested catalog
    /// offers no tools until it is tested.
    async fn catalog_all(self: &Arc<Self>) {
        let mut names: Vec<String> = Vec::new();
        for (name, service) in &self.services {
            let config = &service.config;
            if !config.enabled || service.pipeline.is_none() || !config.repair.is_empty() {
                continue;
            }
            let digest = config.launch_digest();
            let stored = match self.registry.catalog(name, &digest) {
                Ok(stored) => stored,
                Err(e) => {
                    tracing::warn!(service = %name, "cannot read the tested catalog: {e}");
                    None
                }
            };
            let outcome = match &stored {
                Some(catalog) => Some(self.name_tools(name, &catalog.tools).await),
                None if crate::servers::is_registry_source(&config.source) => {
                    let why = if self.registry.has_catalog(name).unwrap_or(false) {
                        "its launch changed since it was tested"
                    } else {
                        "it has not been tested"
                    };
                    service
                        .health
                        .lock()
                        .expect("health lock poisoned")
                        .untested = Some(format!(
                        "{why}; run `airlock servers test {name}` to offer its tools"
                    ));
                    continue;
                }
                None => None,
            };
            match outcome {
                Some(Ok(_)) => {}
                Some(Err(reason)) => {
                    let reason = crate::launch::scrub(&reason, &service.secrets());
                    service.health.lock().expect("health lock poisoned").failed = Some(reason);
                }
                None => names.push(name.clone()),
            }
        }
        let opened = futures::future::join_all(names.iter().map(|name| {
            let inner = self.clone();
            async move {
                (
                    name.clone(),
                    inner.session(crate::airlock::DEFAULT_AGENT, name).await,
                )
            }
        }))
        .await;
        // Names are settled one service at a time, in name order, so namespace
        // allocation is deterministic and never races.
        for (name, session) in opened {
            let outcome = match session {
                Ok(live) => self.refresh_tools(&name, &live.session).await,
                Err(e) => Err(e.message),
            };
            if let Err(reason) = outcome {
                let service = &self.services[&name];
                let reason = crate::launch::scrub(&reason, &service.secrets());
                tracing::warn!(service = %name, "service failed: {reason}");
                service.health.lock().expect("health lock poisoned").failed = Some(reason);
                self.disconnect_now(crate::airlock::DEFAULT_AGENT, &name)
                    .await;
                self.emit_service_changed(&name);
            }
        }
    }

    /// Lists the service's tools through `session`, names them under the service's
    /// frozen namespace and replaces its catalog entries. Returns the tool count.
    async fn refresh_tools(
        &self,
        name: &str,
        session: &crate::session::Session,
    ) -> Result<usize, String> {
        let listed = session.list_tools().await.map_err(|e| e.to_string())?;
        self.name_tools(name, &listed).await
    }

    /// Refuses a tool list over the catalog limits.
    fn check_catalog_limits(&self, listed: &[serde_json::Value]) -> Result<(), String> {
        use crate::catalog::{MAX_CATALOG_BYTES, MAX_TOOLS_PER_SERVICE};
        let bytes: usize = listed.iter().map(|t| t.to_string().len()).sum();
        if listed.len() > MAX_TOOLS_PER_SERVICE || bytes > MAX_CATALOG_BYTES {
            return Err(format!(
                "the server lists {} tools ({bytes} bytes); the limit is {MAX_TOOLS_PER_SERVICE} tools and {MAX_CATALOG_BYTES} bytes",
                listed.len()
            ));
        }
        Ok(())
    }

    /// Names `listed` (MCP tool JSON) under the service's frozen namespace and replaces
    /// its catalog entries. Returns the tool count.
    async fn name_tools(&self, name: &str, listed: &[serde_json::Value]) -> Result<usize, String> {
        use crate::plugin::{ServiceInfo, convert};
        let service = &self.services[name];
        let pipeline = service
            .pipeline
            .as_ref()
            .ok_or("the service has no plugin pipeline")?;
        self.check_catalog_limits(listed)?;
        let tools: Vec<_> = listed
            .iter()
            .filter_map(|t| {
                let tool = convert::tool_from_mcp(t);
                if tool.is_none() {
                    tracing::warn!(service = %name, "skipping a listed tool without a name: {t}");
                }
                tool
            })
            .collect();
        let info = ServiceInfo {
            id: name.to_string(),
            label: service.config.label.clone(),
            description: service.config.description.clone(),
        };
        let namespace = match self.registry.namespace(name).map_err(|e| e.to_string())? {
            Some(ns) => ns,
            None => {
                let taken = self
                    .registry
                    .namespaces_except(name)
                    .map_err(|e| e.to_string())?;
                let chosen = pipeline
                    .namespace(info.clone(), taken)
                    .await
                    .map_err(|e| e.to_string())?;
                self.registry
                    .freeze_namespace(name, &chosen)
                    .map_err(|e| e.to_string())?
            }
        };
        let named = pipeline
            .qualify(info, namespace, tools)
            .await
            .map_err(|e| e.to_string())?;
        let count = named.len();
        let mut catalog = self.catalog.write().expect("catalog lock poisoned");
        catalog.remove_service(name);
        catalog.add_service(name, named)?;
        Ok(count)
    }
}
