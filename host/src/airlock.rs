//! [`Airlock`]: the library entry point an agent platform embeds. It builds the plugin
//! pipelines from config, connects every enabled server concurrently (a failing server is
//! reported and skipped), assembles the catalog, and runs calls through the data path:
//! catalog -> session -> server -> content plugin -> redaction chain -> results store.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cap_std::fs::Dir;
use serde::Serialize;
use serde_json::Value;

use crate::catalog::{Catalog, CatalogTool, MAX_CATALOG_BYTES, MAX_TOOLS_PER_SERVICE};
use crate::config::{Config, ServerConfig, TransportConfig};
use crate::error::{CallError, ErrorCode};
use crate::launch::LaunchSpec;
use crate::plugin::{
    PluginError, PluginRuntime, RedactionMark, Secret, ServiceInfo, ServicePipeline, convert,
};
use crate::registry::Registry;
use crate::results::{Page, ReadError, ResultLimits, ResultStore, Retained};
use crate::session::{AirlockClient, ServerIdentity, Session};

/// How to run an [`Airlock`].
#[derive(Debug, Clone)]
pub struct AirlockOptions {
    /// Where Airlock keeps its state (created if missing).
    pub data_dir: PathBuf,
    /// Folders offered to servers as roots (absolute paths).
    pub roots: Vec<String>,
    /// Retention and preview limits.
    pub result_limits: ResultLimits,
}

impl AirlockOptions {
    /// Options with default limits and no roots.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        AirlockOptions {
            data_dir: data_dir.into(),
            roots: Vec::new(),
            result_limits: ResultLimits::default(),
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
}

/// The state of one configured service.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ServiceStatus {
    /// `enabled = false` in the config.
    Disabled,
    /// Connected, with this many tools in the catalog.
    Connected {
        /// Tool count.
        tools: usize,
    },
    /// Could not be started, connected or cataloged.
    Failed {
        /// Why.
        reason: String,
    },
}

/// A status line for one service.
#[derive(Debug, Clone, Serialize)]
pub struct ServiceReport {
    /// The service name.
    pub service: String,
    /// Its state.
    #[serde(flatten)]
    pub status: ServiceStatus,
    /// What the server said about itself, when connected.
    pub server: Option<ServerIdentity>,
    /// The file defining it.
    pub source: PathBuf,
}

/// A completed call (including one the server marked `isError`).
#[derive(Debug, Clone, Serialize)]
pub struct CallOutput {
    /// The service that ran it.
    pub service: String,
    /// The qualified tool name.
    pub tool: String,
    /// The server's raw tool name.
    pub raw_tool: String,
    /// Whether the server marked the result as an error.
    pub is_error: bool,
    /// The retention record.
    pub retained: Retained,
    /// The converted, redacted content blocks (MCP JSON).
    pub content: Vec<Value>,
    /// The converted, redacted `structuredContent`, if any.
    pub structured_content: Option<Value>,
    /// The preview of the full text.
    pub preview: String,
    /// Where redactions happened.
    pub redactions: Vec<Redaction>,
    /// How long the call took.
    pub elapsed: Duration,
}

/// One redaction mark.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Redaction {
    /// `content[N]`, `structuredContent` or `_meta`.
    pub location: String,
    /// `secret:NAME` or `pattern:NAME`.
    pub rule: String,
    /// Occurrences replaced.
    pub count: u32,
}

impl From<RedactionMark> for Redaction {
    fn from(m: RedactionMark) -> Self {
        Redaction {
            location: m.location,
            rule: m.rule,
            count: m.count,
        }
    }
}

struct ServiceState {
    config: ServerConfig,
    status: ServiceStatus,
    session: Option<Session>,
    pipeline: Option<ServicePipeline>,
    secrets: Vec<(String, String)>,
    identity: Option<ServerIdentity>,
}

/// A running Airlock host.
pub struct Airlock {
    services: BTreeMap<String, ServiceState>,
    catalog: Catalog,
    results: ResultStore,
    runtime: Arc<PluginRuntime>,
    preview: usize,
}

/// A connected service before its tools are named.
struct Connected {
    session: Session,
    pipeline: ServicePipeline,
    tools: Vec<crate::plugin::Tool>,
}

impl Airlock {
    /// Starts Airlock: opens the data directory, builds every enabled service's plugin
    /// pipeline, connects all of them concurrently and names their tools. A service that
    /// fails is marked failed (see [`Airlock::status`]); the others work.
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

        let connects = config.servers.values().filter(|s| s.enabled).map(|server| {
            let runtime = runtime.clone();
            let roots = options.roots.clone();
            let server = server.clone();
            async move {
                let outcome = connect(&runtime, &server, roots).await;
                (server.name.clone(), outcome)
            }
        });
        let mut outcomes: BTreeMap<String, Result<Connected, String>> =
            futures::future::join_all(connects)
                .await
                .into_iter()
                .collect();

        let mut airlock = Airlock {
            services: BTreeMap::new(),
            catalog: Catalog::default(),
            results,
            runtime,
            preview: options.result_limits.preview,
        };
        // Namespaces and names are settled one service at a time, in name order, so
        // allocation is deterministic and never races.
        for (name, server) in &config.servers {
            let secrets = crate::secrets::known_secrets(server);
            let mut state = ServiceState {
                config: server.clone(),
                status: ServiceStatus::Disabled,
                session: None,
                pipeline: None,
                secrets,
                identity: None,
            };
            if let Some(outcome) = outcomes.remove(name) {
                match outcome {
                    Ok(connected) => {
                        match name_tools(&registry, &mut airlock.catalog, server, &connected).await
                        {
                            Ok(count) => {
                                state.status = ServiceStatus::Connected { tools: count };
                                state.identity = Some(connected.session.identity().clone());
                                state.session = Some(connected.session);
                                state.pipeline = Some(connected.pipeline);
                            }
                            Err(reason) => {
                                connected.session.close().await;
                                state.status = ServiceStatus::Failed { reason };
                            }
                        }
                    }
                    Err(reason) => state.status = ServiceStatus::Failed { reason },
                }
                if let ServiceStatus::Failed { reason } = &mut state.status {
                    *reason = crate::launch::scrub(reason, &state.secrets);
                    tracing::warn!(service = %name, "service failed: {reason}");
                }
            }
            airlock.services.insert(name.clone(), state);
        }
        Ok(airlock)
    }

    /// Every tool in the catalog, by qualified name.
    pub fn tools(&self) -> Vec<&CatalogTool> {
        self.catalog.tools().collect()
    }

    /// Tools matching `query` (see [`Catalog::search`]).
    pub fn search_tools(&self, query: &str) -> Vec<&CatalogTool> {
        self.catalog.search(query)
    }

    /// The state of every configured service.
    pub fn status(&self) -> Vec<ServiceReport> {
        self.services
            .iter()
            .map(|(name, s)| ServiceReport {
                service: name.clone(),
                status: s.status.clone(),
                server: s.identity.clone(),
                source: s.config.source.clone(),
            })
            .collect()
    }

    /// The plugin runtime (to load plugins for offline replay, for example).
    pub fn runtime(&self) -> &Arc<PluginRuntime> {
        &self.runtime
    }

    /// Calls the tool with qualified name `tool`. `timeout` overrides the service's
    /// `tool_timeout_secs`. The result is converted, redacted and retained; a result
    /// the server marked `isError` is returned as a [`CallOutput`] with `is_error`.
    pub async fn call(
        &self,
        tool: &str,
        arguments: Value,
        timeout: Option<Duration>,
    ) -> Result<CallOutput, CallError> {
        let entry = self.catalog.get(tool).ok_or_else(|| {
            let hint = self
                .catalog
                .search(&tool.replace("__", " ").replace('_', " "))
                .first()
                .map(|t| format!("; did you mean \"{}\"?", t.name))
                .unwrap_or_default();
            CallError::new(
                ErrorCode::UnknownTool,
                format!("no tool named \"{tool}\"{hint}"),
            )
        })?;
        let Value::Object(arguments) = arguments else {
            return Err(CallError::new(
                ErrorCode::InvalidArguments,
                format!("arguments must be a JSON object, got {arguments}"),
            ));
        };
        let service = self
            .services
            .get(&entry.service)
            .expect("catalog services are configured");
        let (Some(session), Some(pipeline)) = (&service.session, &service.pipeline) else {
            return Err(CallError::new(
                ErrorCode::ServiceUnavailable,
                format!("service \"{}\" is not connected", entry.service),
            ));
        };
        if session.is_closed() {
            return Err(CallError::new(
                ErrorCode::ServiceUnavailable,
                format!("the connection to service \"{}\" has closed", entry.service),
            ));
        }
        let started = Instant::now();
        let raw = session
            .call_tool(
                &entry.raw_name,
                arguments,
                timeout.unwrap_or(service.config.tool_timeout),
            )
            .await?;
        let result = convert::result_from_mcp(&raw);
        let secrets = service
            .secrets
            .iter()
            .map(|(name, value)| Secret {
                name: name.clone(),
                value: value.clone(),
            })
            .collect();
        let processed = pipeline.process(result, secrets).await.map_err(|e| {
            CallError::new(
                ErrorCode::AdapterError,
                crate::launch::scrub(&e.to_string(), &service.secrets),
            )
        })?;
        let text = convert::result_text(&processed.result);
        let redactions: Vec<Redaction> = processed.marks.into_iter().map(Redaction::from).collect();
        let (retained, preview) = self
            .results
            .retain(&entry.service, &text, !redactions.is_empty(), self.preview)
            .map_err(|e| {
                CallError::new(
                    ErrorCode::ToolError,
                    format!("cannot retain the result: {e}"),
                )
            })?;
        let mcp = convert::result_to_mcp(&processed.result);
        Ok(CallOutput {
            service: entry.service.clone(),
            tool: entry.name.clone(),
            raw_tool: entry.raw_name.clone(),
            is_error: processed.result.is_error,
            retained,
            content: mcp["content"].as_array().cloned().unwrap_or_default(),
            structured_content: mcp.get("structuredContent").cloned(),
            preview,
            redactions,
            elapsed: started.elapsed(),
        })
    }

    /// Reads a page of a retained output of `service`.
    pub fn read_output(
        &self,
        service: &str,
        output_id: &str,
        offset: usize,
    ) -> Result<Page, ReadError> {
        self.results.read(service, output_id, offset, self.preview)
    }

    /// Closes every session; no server process outlives this.
    pub async fn close(mut self) {
        let sessions: Vec<Session> = self
            .services
            .values_mut()
            .filter_map(|s| s.session.take())
            .collect();
        futures::future::join_all(sessions.into_iter().map(Session::close)).await;
    }
}

/// Builds the pipeline and opens the session for one service, listing its tools.
async fn connect(
    runtime: &Arc<PluginRuntime>,
    server: &ServerConfig,
    roots: Vec<String>,
) -> Result<Connected, String> {
    let pipeline = {
        let (runtime, name, adapters, cfg) = (
            runtime.clone(),
            server.name.clone(),
            server.adapters.clone(),
            server.adapter_config.clone(),
        );
        tokio::task::spawn_blocking(move || {
            ServicePipeline::build(&runtime, &name, &adapters, &cfg)
        })
        .await
        .map_err(|e| format!("plugin setup failed: {e}"))?
        .map_err(|e| e.to_string())?
    };
    let secrets = crate::secrets::known_secrets(server);
    let session = match &server.transport {
        TransportConfig::Stdio { command, args, env } => {
            let spec = LaunchSpec {
                command: command.clone(),
                args: args.clone(),
                env: env.clone(),
                cwd: server.cwd.clone(),
                secrets: secrets.clone(),
            };
            let client = AirlockClient::new(&server.name, roots, secrets);
            Session::connect_stdio(&spec, server.startup_timeout, client)
                .await
                .map_err(|e| e.to_string())?
        }
        TransportConfig::Http { url, .. } => {
            return Err(format!(
                "cannot connect to {url}: the http transport is not available in this build yet"
            ));
        }
    };
    let listed = match session.list_tools().await {
        Ok(listed) => listed,
        Err(e) => {
            session.close().await;
            return Err(e.to_string());
        }
    };
    let bytes: usize = listed.iter().map(|t| t.to_string().len()).sum();
    if listed.len() > MAX_TOOLS_PER_SERVICE || bytes > MAX_CATALOG_BYTES {
        session.close().await;
        return Err(format!(
            "the server lists {} tools ({bytes} bytes); the limit is {MAX_TOOLS_PER_SERVICE} tools and {MAX_CATALOG_BYTES} bytes",
            listed.len()
        ));
    }
    let tools = listed
        .iter()
        .filter_map(|t| {
            let tool = convert::tool_from_mcp(t);
            if tool.is_none() {
                tracing::warn!(service = %server.name, "skipping a listed tool without a name: {t}");
            }
            tool
        })
        .collect();
    Ok(Connected {
        session,
        pipeline,
        tools,
    })
}

/// Chooses (or reuses) the service's frozen namespace, names its tools and adds them to
/// the catalog. Returns the tool count.
async fn name_tools(
    registry: &Registry,
    catalog: &mut Catalog,
    server: &ServerConfig,
    connected: &Connected,
) -> Result<usize, String> {
    let info = ServiceInfo {
        id: server.name.clone(),
        label: server.label.clone(),
        description: server.description.clone(),
    };
    let namespace = match registry
        .namespace(&server.name)
        .map_err(|e| e.to_string())?
    {
        Some(ns) => ns,
        None => {
            let taken = registry
                .namespaces_except(&server.name)
                .map_err(|e| e.to_string())?;
            let chosen = connected
                .pipeline
                .namespace(info.clone(), taken)
                .await
                .map_err(|e| e.to_string())?;
            registry
                .freeze_namespace(&server.name, &chosen)
                .map_err(|e| e.to_string())?
        }
    };
    let named = connected
        .pipeline
        .qualify(info, namespace, connected.tools.clone())
        .await
        .map_err(|e| e.to_string())?;
    let count = named.len();
    catalog.add_service(&server.name, named)?;
    Ok(count)
}
