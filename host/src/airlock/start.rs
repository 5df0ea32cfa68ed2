//! Starting Airlock: opening the data directory, the registry and the secret store,
//! building every enabled service's plugin pipeline and the capability services over
//! them, and cataloging each service — from its tested catalog when that is fresh, else
//! by connecting the default agent.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use cap_std::fs::Dir;

use super::access::Access;
use super::agents::Agents;
use super::call::{CallParts, Calls};
use super::catalog::Catalog;
use super::outputs::{Outputs, RegistryIndex};
use super::resources::Resources;
use super::services::{Parts as ServiceParts, Services, TestReport, build_pipelines};
use super::{Airlock, AirlockOptions, Parts};
use crate::catalog::Cataloger;
use crate::config::{Config, ServerConfig};
use crate::events::EventBus;
use crate::plugin::{PluginError, PluginRuntime};
use crate::registry::Registry;
use crate::results::ResultStore;
use crate::secrets::{KnownSecrets, SecretError, SecretStore};

/// Why Airlock could not start at all (a single service failing is not one of these).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
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
    let (dir, location, secrets, index) = (
        data_dir.to_path_buf(),
        storage.results.clone(),
        secret_store.clone(),
        Arc::new(RegistryIndex(registry.clone())),
    );
    let results = tokio::task::spawn_blocking(move || {
        open_results(&dir, &location, &secrets, limits, Some(index))
    })
    .await
    .map_err(|e| StartError::Results(format!("opening the results store panicked: {e}")))??;
    Ok((registry, results))
}

/// Opens the results store `location` names for `data_dir`, its S3 secret access key
/// read from `secrets` when the setting is `secret:NAME` (a missing entry is a
/// [`StartError::Secrets`] naming the setting). Blocking: the secret store, the disk, S3.
pub(crate) fn open_results(
    data_dir: &std::path::Path,
    location: &crate::config::ResultsLocation,
    secrets: &SecretStore,
    limits: crate::results::ResultLimits,
    index: Option<Arc<dyn crate::results::ResultIndex>>,
) -> Result<ResultStore, StartError> {
    let secret_key = match location {
        crate::config::ResultsLocation::S3(s3) => resolve_secret(
            secrets,
            "results.secret_access_key",
            s3.secret_access_key.as_deref(),
        )?,
        crate::config::ResultsLocation::Local => None,
    };
    ResultStore::open_at(data_dir, location, secret_key, limits, index)
        .map_err(|e| StartError::Results(e.to_string()))
}

/// A settings value that may name a secret-store entry (`secret:NAME`), resolved.
pub(crate) fn resolve_secret(
    store: &SecretStore,
    setting: &str,
    value: Option<&str>,
) -> Result<Option<String>, SecretError> {
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
        Ok(None) => Err(SecretError::Missing {
            setting: setting.to_string(),
            name: name.to_string(),
        }),
        Err(e) => Err(SecretError::Setting {
            setting: setting.to_string(),
            cause: Box::new(e),
        }),
    }
}

impl Airlock {
    /// Starts Airlock: opens the data directory, builds every enabled service's plugin
    /// pipeline, connects the default agent to every server concurrently and names their
    /// tools. A service that fails is marked failed (see [`Services::status`]); the
    /// others work.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// use airlock_host::{Airlock, AirlockOptions, config::{Config, ConfigSources, process_env}};
    /// let config = Config::load(&ConfigSources::discover(&std::env::current_dir()?, vec![]), &process_env)?;
    /// let airlock = Airlock::start(config, AirlockOptions::new("/tmp/airlock-data")).await?;
    /// for tool in airlock.catalog().tools() {
    ///     println!("{} ({})", tool.name, tool.service);
    /// }
    /// let out = airlock.calls().call("mcp__demo__echo", serde_json::json!({"text": "hi"}), None).await?;
    /// println!("{}", out.preview);
    /// airlock.close().await;
    /// # Ok(()) }
    /// ```
    pub async fn start(config: Config, options: AirlockOptions) -> Result<Airlock, StartError> {
        let airlock = Airlock::prepare(config, options).await?;
        airlock.parts.services.catalog_all().await;
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
        let outcome = airlock.parts.services.test_catalog(&name).await;
        // What the service learned while connecting (an OAuth token) is scrubbed too.
        let secrets = airlock
            .parts
            .services
            .get(&name)
            .map(|s| s.secrets())
            .unwrap_or_default();
        airlock.close().await;
        outcome.map_err(|reason| StartError::Test {
            service: name.clone(),
            reason: secrets.scrub_owned(&reason.to_string()),
        })
    }

    /// Opens state and builds the services; connects nothing.
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
        // What replicas share (agents' own tokens, sign-ins under way) lives in a shared
        // registry, sealed, when the config gives the key.
        let secret_store =
            crate::registry::vault::sharing(secret_store, &config.storage.registry, &registry);
        let runtime = match &options.plugin_cache {
            None => PluginRuntime::new(config.sandbox, Some(&data))?,
            Some(path) => {
                std::fs::create_dir_all(path).map_err(data_err)?;
                let cache =
                    Dir::open_ambient_dir(path, cap_std::ambient_authority()).map_err(data_err)?;
                PluginRuntime::with_cache(config.sandbox, Some(cache))?
            }
        };
        let pipelines = build_pipelines(&runtime, config.servers.values()).await;
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
        let events = EventBus::new(1024);
        let agents = Arc::new(Agents::new(options.roots));
        let cataloger = Arc::new(Cataloger::new(registry.clone()));
        let services = Arc::new(Services::new(
            ServiceParts {
                agents: agents.clone(),
                cataloger: cataloger.clone(),
                runtime: runtime.clone(),
                registry: registry.clone(),
                secret_store,
                events: events.clone(),
                max_sessions: options.max_sessions,
            },
            &config.servers,
            pipelines,
            pauses,
        ));
        let access = Arc::new(Access::new(
            options.access,
            options.approver,
            registry.clone(),
            services.clone(),
            agents.clone(),
            events.clone(),
        ));
        let catalog = Arc::new(Catalog::new(
            cataloger,
            services.clone(),
            access.clone(),
            registry.clone(),
            runtime,
        ));
        let outputs = Arc::new(Outputs::new(
            Arc::new(results),
            access.clone(),
            services.clone(),
            registry.clone(),
        ));
        let calls = Calls::new(CallParts {
            services: services.clone(),
            access: access.clone(),
            catalog: catalog.clone(),
            outputs: outputs.clone(),
            agents: agents.clone(),
            events: events.clone(),
        });
        Ok(Airlock {
            parts: Arc::new(Parts {
                resources: Resources::new(services.clone(), access.clone()),
                services,
                access,
                catalog,
                outputs,
                calls,
                agents,
                registry,
                events,
                seen: Default::default(),
            }),
        })
    }
}
