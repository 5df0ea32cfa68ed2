//! Starting Airlock: opening the data directory, the registry and the secret store,
//! building every enabled service's plugin pipeline, and cataloging each service — from
//! its tested catalog when that is fresh, else by connecting the default agent.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};

use cap_std::fs::Dir;
use tokio::sync::broadcast;

use super::{Airlock, AirlockOptions, DEFAULT_AGENT, Health, Inner, Service, TestReport};
use crate::catalog::{Cataloger, check_limits};
use crate::config::{Config, ServerConfig};
use crate::plugin::{PluginError, PluginRuntime, ServicePipeline};
use crate::registry::{Registry, StoredCatalog};
use crate::results::ResultStore;
use crate::secrets::{KnownSecrets, SecretStore};
use crate::session::SessionPool;

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
    /// The results store (`[results]`) could not be opened.
    #[error("results store: {0}")]
    Results(String),
}

/// Opens the registry and the results store `storage` names (connecting to PostgreSQL
/// and S3 when it names them), on a blocking thread: the registry of `data_dir` and its
/// `outputs/` folder by default. The storage settings' own credentials are registered
/// with the log scrubber first.
pub(crate) async fn open_storage(
    data_dir: &std::path::Path,
    storage: &crate::config::Storage,
    secret_store: &SecretStore,
    limits: crate::results::ResultLimits,
) -> Result<(Arc<Registry>, ResultStore), StartError> {
    crate::secrets::register_log_secrets(&storage.known_secrets());
    let (dir, location) = (data_dir.to_path_buf(), storage.registry.clone());
    let registry = tokio::task::spawn_blocking(move || Registry::open_at(&dir, &location))
        .await
        .map_err(|e| StartError::Results(format!("opening the registry panicked: {e}")))??;
    let registry = Arc::new(registry);
    let secret_key = match &storage.results {
        crate::config::ResultsLocation::S3(s3) => resolve_secret(
            secret_store,
            "results.secret_access_key",
            s3.secret_access_key.as_deref(),
        )
        .map_err(StartError::Results)?,
        crate::config::ResultsLocation::Local => None,
    };
    let (dir, location, index) = (
        data_dir.to_path_buf(),
        storage.results.clone(),
        Arc::new(RegistryIndex(registry.clone())),
    );
    let results = tokio::task::spawn_blocking(move || {
        ResultStore::open_at(&dir, &location, secret_key, limits, Some(index))
    })
    .await
    .map_err(|e| StartError::Results(format!("opening the results store panicked: {e}")))?
    .map_err(|e| StartError::Results(e.to_string()))?;
    Ok((registry, results))
}

/// A settings value that may name a secret-store entry (`secret:NAME`), resolved.
pub(crate) fn resolve_secret(
    store: &SecretStore,
    setting: &str,
    value: Option<&str>,
) -> Result<Option<String>, String> {
    let Some(value) = value else {
        return Ok(None);
    };
    let Some(name) = value.strip_prefix("secret:") else {
        return Ok(Some(value.to_string()));
    };
    // Entries made with `airlock secrets set NAME` are kept as `secret:NAME`, beside the
    // `secret:<uuid>` references the registry makes.
    match store.get(value) {
        Ok(Some(secret)) => {
            crate::secrets::register_log_secrets(&KnownSecrets::new().with(setting, &secret));
            Ok(Some(secret))
        }
        Ok(None) => Err(format!(
            "{setting} names the secret-store entry \"{name}\", which is not there; add it with `airlock secrets set {name}`"
        )),
        Err(e) => Err(format!("{setting}: {e}")),
    }
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
    /// service's tested catalog under its current launch digest (in the registry
    /// `storage` names), and closes.
    pub async fn test_service(
        server: ServerConfig,
        storage: crate::config::Storage,
        options: AirlockOptions,
    ) -> Result<TestReport, StartError> {
        let name = server.name.clone();
        let mut server = server;
        server.enabled = true;
        let config = Config {
            servers: BTreeMap::from([(name.clone(), server)]),
            storage,
            ..Default::default()
        };
        let airlock = Airlock::prepare(config, options).await?;
        let inner = airlock.inner.clone();
        let outcome = inner.test_catalog(&name).await;
        let secrets = inner
            .service(&name)
            .map(|s| s.secrets())
            .unwrap_or_default();
        airlock.close().await;
        outcome.map_err(|reason| StartError::Test {
            service: name.clone(),
            reason: secrets.scrub_owned(&reason),
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
        let secret_store = SecretStore::open(&options.data_dir)?;
        let (registry, results) = open_storage(
            &options.data_dir,
            &config.storage,
            &secret_store,
            options.result_limits,
        )
        .await?;
        let runtime = match &options.plugin_cache {
            None => PluginRuntime::new(config.sandbox, Some(&data))?,
            Some(path) => {
                std::fs::create_dir_all(path).map_err(data_err)?;
                let cache =
                    Dir::open_ambient_dir(path, cap_std::ambient_authority()).map_err(data_err)?;
                PluginRuntime::with_cache(config.sandbox, Some(cache))?
            }
        };
        let mut pipelines = build_pipelines(&runtime, config.servers.values()).await;

        // Every known secret is redacted from every service's output: a token of one
        // service that shows up in another's result is still a secret.
        let everyone = config
            .servers
            .values()
            .fold(KnownSecrets::new(), |all, s| all.union(&s.known_secrets()));
        crate::secrets::register_log_secrets(&everyone);
        // Services an operator disabled at run time stay disabled across restarts. A
        // registry that cannot be read now leaves them enabled until it can
        // (`take_in_changes`).
        let reading = registry.clone();
        let pauses = match tokio::task::spawn_blocking(move || reading.paused()).await {
            Ok(Ok(pauses)) => pauses,
            Ok(Err(e)) => {
                tracing::warn!("cannot read the services disabled at run time: {e}");
                Default::default()
            }
            Err(e) => {
                tracing::warn!("reading the services disabled at run time panicked: {e}");
                Default::default()
            }
        };
        let services = config
            .servers
            .iter()
            .map(|(name, server)| {
                let service = Service::new(server, pipelines.remove(name), &everyone);
                service
                    .paused
                    .store(pauses.contains(name), std::sync::atomic::Ordering::Relaxed);
                (name.clone(), Arc::new(service))
            })
            .collect();
        let events = broadcast::channel(1024).0;
        Ok(Airlock {
            inner: Arc::new(Inner {
                services: RwLock::new(services),
                cataloger: Arc::new(Cataloger::new(registry.clone())),
                results,
                runtime,
                registry,
                secret_store,
                preview: options.result_limits.preview,
                pool: SessionPool::new(options.max_sessions, events.clone()),
                events,
                roots: RwLock::new(HashMap::new()),
                default_roots: options.roots,
                access: options.access,
                approver: options.approver,
                agent_clients: RwLock::new(HashMap::new()),
                log_levels: RwLock::new(HashMap::new()),
                reconciling: Default::default(),
                pauses: RwLock::new(pauses),
                seen: Default::default(),
            }),
        })
    }
}

impl Service {
    /// A service as configured, with its plugin pipeline (`None` when disabled, or the
    /// reason it could not be built), redacting its own known secrets and `everyone`'s.
    pub(super) fn new(
        server: &ServerConfig,
        pipeline: Option<Result<ServicePipeline, String>>,
        everyone: &KnownSecrets,
    ) -> Service {
        let name = &server.name;
        let secrets = server.known_secrets().union(everyone);
        let mut health = Health::default();
        if !server.repair.is_empty() {
            health.failed = Some(secrets.scrub_owned(&format!(
                "needs repair: {}; fix it with `airlock servers edit {name}`",
                server.repair.join("; ")
            )));
        }
        let pipeline = match pipeline {
            Some(Ok(p)) => Some(Arc::new(p)),
            Some(Err(reason)) => {
                health.failed = Some(secrets.scrub_owned(&reason));
                None
            }
            None => None,
        };
        Service {
            config: server.clone(),
            pipeline,
            secrets: RwLock::new(secrets),
            health: Mutex::new(health),
            paused: Default::default(),
            guard: crate::session::UpstreamGuard::new(name, server.limits),
        }
    }
}

/// Builds every enabled service's pipeline concurrently, off the async runtime's threads
/// (loading and instantiating plugins blocks). A failure is that service's reason.
pub(super) async fn build_pipelines<'a>(
    runtime: &Arc<PluginRuntime>,
    servers: impl Iterator<Item = &'a ServerConfig>,
) -> HashMap<String, Result<ServicePipeline, String>> {
    let builds = servers.filter(|s| s.enabled).map(|server| {
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
    futures::future::join_all(builds)
        .await
        .into_iter()
        .collect()
}

impl Inner {
    /// Catalogs every enabled service: from its tested catalog when that is fresh (no
    /// connection needed), else — for services from config files — by opening the
    /// default agent's session. A registry service without a fresh tested catalog
    /// offers no tools until it is tested.
    async fn catalog_all(self: &Arc<Self>) {
        let names = self.all_services().into_iter().map(|(name, _)| name);
        self.catalog_these(names.collect()).await;
    }

    /// Catalogs the services `names`, as [`Inner::catalog_all`] does for all of them.
    pub(super) async fn catalog_these(self: &Arc<Self>, names: Vec<String>) {
        let mut to_connect: Vec<String> = Vec::new();
        for name in &names {
            let Some(service) = self.service(name) else {
                continue;
            };
            let config = &service.config;
            if !config.enabled || service.pipeline.is_none() || !config.repair.is_empty() {
                continue;
            }
            let stored = self
                .registry
                .catalog(name, &config.launch_digest())
                .unwrap_or_else(|e| {
                    tracing::warn!(service = %name, "cannot read the tested catalog: {e}");
                    None
                });
            match stored {
                Some(catalog) => {
                    if let Err(reason) = self.name_tools(name, &catalog.tools).await {
                        service.health().failed = Some(service.secrets().scrub_owned(&reason));
                    }
                }
                None if config.source.is_registry() => {
                    let stale = self.registry.has_catalog(name).unwrap_or(false);
                    let why = if stale {
                        "its launch changed since it was tested"
                    } else {
                        "it has not been tested"
                    };
                    let mut health = service.health();
                    health.untested = Some(format!(
                        "{why}; run `airlock servers test {name}` to offer its tools"
                    ));
                    health.stale = stale;
                }
                None => to_connect.push(name.clone()),
            }
        }
        let opened = futures::future::join_all(to_connect.iter().map(|name| {
            let inner = self.clone();
            async move { (name.clone(), inner.session(DEFAULT_AGENT, name).await) }
        }))
        .await;
        // Names are settled one service at a time, in name order, so namespace
        // allocation is deterministic and never races.
        for (name, session) in opened {
            let outcome = match session {
                Ok(live) => match live.session.list_tools().await {
                    Ok(listed) => self.name_tools(&name, &listed).await.map(|_| ()),
                    Err(e) => Err(e.to_string()),
                },
                Err(e) => Err(e.message),
            };
            if let Err(reason) = outcome {
                let Some(service) = self.service(&name) else {
                    continue;
                };
                let reason = service.secrets().scrub_owned(&reason);
                tracing::warn!(service = %name, "service failed: {reason}");
                service.health().failed = Some(reason);
                self.pool
                    .disconnect(DEFAULT_AGENT, &name, "cataloging failed")
                    .await;
                self.emit_service_changed(&name);
            }
        }
    }

    /// Names `listed` (MCP tool JSON) under the service's frozen namespace and replaces
    /// its catalog entries. Returns the tool count.
    /// Tests `name` as `airlock servers test` does: the default agent's session (opened
    /// if needed), its tool list read (running none) and checked, passed through the
    /// egress rule, and saved as the service's tested catalog under its launch digest.
    pub(super) async fn test_catalog(&self, name: &str) -> Result<TestReport, String> {
        let live = self
            .session(DEFAULT_AGENT, name)
            .await
            .map_err(|e| e.message)?;
        let tools = live.session.list_tools().await.map_err(|e| e.to_string())?;
        check_limits(&tools).map_err(|e| e.to_string())?;
        // Server metadata leaves through the egress rule, to the registry too.
        let tools = self.redact_tools(name, tools).await;
        let identity = live.session.identity().clone();
        let service = self
            .service(name)
            .ok_or_else(|| format!("service \"{name}\" was removed meanwhile"))?;
        self.registry
            .save_catalog(&StoredCatalog {
                service: name.to_string(),
                launch_digest: service.config.launch_digest(),
                tested_at: self.registry.now().map_err(|e| e.to_string())?,
                protocol_version: identity.protocol_version.clone(),
                server_name: identity.name.clone(),
                server_version: identity.version.clone(),
                transport: identity.transport.as_str().to_string(),
                tools: tools.clone(),
            })
            .map_err(|e| e.to_string())?;
        Ok(TestReport {
            service: name.to_string(),
            verified: true,
            server: identity,
            tools,
        })
    }

    pub(super) async fn name_tools(
        &self,
        name: &str,
        listed: &[serde_json::Value],
    ) -> Result<usize, String> {
        let service = self
            .service(name)
            .ok_or_else(|| format!("service \"{name}\" was removed meanwhile"))?;
        let pipeline = service
            .pipeline
            .as_ref()
            .ok_or("the service has no plugin pipeline")?;
        check_limits(listed).map_err(|e| e.to_string())?;
        let listed = self.redact_tools(name, listed.to_vec()).await;
        self.cataloger
            .name_tools(service.info(), pipeline, &listed)
            .await
            .map_err(|e| e.to_string())
    }
}

/// The registry's `results` table as the results store's index: the retention writer
/// reports the results made durable by each sync, recorded in one transaction.
struct RegistryIndex(Arc<Registry>);

impl crate::results::ResultIndex for RegistryIndex {
    fn index(&self, batch: &[(String, crate::results::Retained)]) {
        let entries: Vec<crate::registry::ResultEntry> = batch
            .iter()
            .filter_map(|(service, record)| super::reindex::entry_of(service, record))
            .collect();
        if let Err(e) = self.0.index_results(&entries) {
            tracing::warn!("cannot index {} retained results: {e}", entries.len());
        }
    }
}
