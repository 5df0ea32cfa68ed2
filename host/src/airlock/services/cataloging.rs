//! Naming services' tools into the catalog: at start (from a tested catalog when it is
//! fresh, else by connecting the default agent), when a service is tested in place, and
//! when definitions change while running ([`Services::reconcile`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

use super::{Service, Services, TestReport, build_pipelines, everyone, no_service};
use crate::airlock::options::DEFAULT_AGENT;
use crate::catalog::check_limits;
use crate::config::ServerConfig;
use crate::error::{CallError, ErrorCode};
use crate::events::Event;
use crate::registry::StoredCatalog;

/// How often one agent may try to list one service that acts as the caller.
const CALLER_RETRY: std::time::Duration = std::time::Duration::from_secs(10);

/// Why a service acting as the calling user offers no tools yet.
const AWAITS_A_USER: &str =
    "acts as the calling user: its tools are listed through the first signed-in user's own session";

/// What [`Services::reconcile`] changed, by service name.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
pub struct Reconciled {
    /// Services that were not configured before.
    pub added: Vec<String>,
    /// Services no longer configured: their sessions closed, their tools withdrawn.
    pub removed: Vec<String>,
    /// Services whose definition changed: their sessions closed and their tools named
    /// again from the new definition.
    pub changed: Vec<String>,
    /// Untested services whose tested catalog has appeared since: they offer their tools.
    pub tested: Vec<String>,
}

impl Reconciled {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty()
            && self.removed.is_empty()
            && self.changed.is_empty()
            && self.tested.is_empty()
    }
}

/// Why naming a service's tools failed (scrubbed before it is shown).
#[derive(Debug, thiserror::Error)]
pub(crate) enum NamingFailed {
    /// The service left meanwhile.
    #[error("service \"{0}\" was removed meanwhile")]
    Removed(String),
    /// Its plugins could not be built.
    #[error("the service has no plugin pipeline")]
    NoPipeline,
    /// The listing or the naming failed.
    #[error(transparent)]
    Catalog(#[from] crate::catalog::CatalogError),
    /// Its session could not be opened, or the server did not list its tools.
    #[error("{0}")]
    Session(String),
    /// The registry could not keep the tested catalog.
    #[error(transparent)]
    Registry(#[from] crate::registry::RegistryError),
}

impl Services {
    /// Catalogs every enabled service: from its tested catalog when that is fresh (no
    /// connection needed), else — for services from config files — by opening the
    /// default agent's session. A registry service without a fresh tested catalog
    /// offers no tools until it is tested.
    pub(crate) async fn catalog_all(&self) {
        self.catalog_these(self.names()).await;
    }

    /// Catalogs the services `names`, as [`Services::catalog_all`] does for all of them.
    async fn catalog_these(&self, names: Vec<String>) {
        let mut to_connect: Vec<String> = Vec::new();
        for name in &names {
            let Some(service) = self.get(name) else {
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
                        service.health().failed =
                            Some(service.secrets().scrub_owned(&reason.to_string()));
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
                None if config.acts_as_caller() => {
                    service.health().untested = Some(AWAITS_A_USER.to_string());
                }
                None => to_connect.push(name.clone()),
            }
        }
        let opened = futures::future::join_all(
            to_connect
                .iter()
                .map(|name| async move { (name.clone(), self.open(DEFAULT_AGENT, name).await) }),
        )
        .await;
        // Names are settled one service at a time, in name order, so namespace
        // allocation is deterministic and never races.
        for (name, session) in opened {
            self.name_listed(DEFAULT_AGENT, &name, session).await;
        }
    }

    /// Names the tools `agent`'s just-opened `session` of `name` lists; a failure marks
    /// the service failed (scrubbed) and closes the session.
    async fn name_listed(
        &self,
        agent: &str,
        name: &str,
        session: Result<Arc<crate::session::LiveSession>, CallError>,
    ) -> bool {
        let outcome = match session {
            Ok(live) => match live.session.list_tools().await {
                Ok(listed) => self.name_tools(name, &listed).await.map(|_| ()),
                Err(e) => Err(NamingFailed::Session(e.to_string())),
            },
            Err(e) => Err(NamingFailed::Session(e.message)),
        };
        let Err(reason) = outcome else {
            return true;
        };
        let Some(service) = self.get(name) else {
            return false;
        };
        let reason = service.secrets().scrub_owned(&reason.to_string());
        tracing::warn!(service = %name, "service failed: {reason}");
        service.health().failed = Some(reason);
        self.pool.disconnect(agent, name, "cataloging failed").await;
        self.emit_service_changed(name);
        false
    }

    /// Lists the tools of the services that act as the calling user and have none named
    /// yet, through `agent`'s own session, when `agent` may use the service and can open
    /// one (it presented an access token to exchange, or authorized a per-agent service
    /// itself); an agent that cannot leaves the service waiting for one that can. Called
    /// before an agent's tool listing; nothing to do once every such service is named.
    pub(crate) async fn catalog_for_caller(&self, agent: &str, may_use: impl Fn(&str) -> bool) {
        let waiting: Vec<String> = self
            .names()
            .into_iter()
            .filter(|name| {
                self.get(name).is_some_and(|service| {
                    service.config.acts_as_caller()
                        && service.health().untested.as_deref() == Some(AWAITS_A_USER)
                })
            })
            .collect();
        for name in waiting.into_iter().filter(|name| may_use(name)) {
            if self.caller_may_try(agent, &name) {
                self.name_as_caller(agent, &name).await;
            }
        }
    }

    /// Names the tools of `name`, a service that acts as the calling user, through
    /// `agent`'s own session, if it has none named yet and `agent` can open one; agents
    /// already listing learn of the new tools.
    pub(crate) async fn name_as_caller(&self, agent: &str, name: &str) {
        let awaits = self
            .get(name)
            .is_some_and(|service| service.health().untested.as_deref() == Some(AWAITS_A_USER));
        if !awaits {
            return;
        }
        let opened = match self.open(agent, name).await {
            Ok(live) => live,
            Err(e) => {
                tracing::debug!(service = %name, agent, "cannot list the tools as this agent: {}", e.message);
                return;
            }
        };
        if self.name_listed(agent, name, Ok(opened)).await
            && let Some(service) = self.get(name)
        {
            service.health().untested = None;
            self.emit_service_changed(name);
            self.emit_tools_changed(name);
        }
    }

    /// Whether `agent` may try to list `service` now: at most once per
    /// [`CALLER_RETRY`] each, so a service that cannot be reached (an identity provider
    /// down, an upstream failing) is not tried on every listing.
    fn caller_may_try(&self, agent: &str, service: &str) -> bool {
        let now = std::time::Instant::now();
        let mut tries = self.caller_tries.lock().expect("caller tries poisoned");
        tries.retain(|_, at| now.duration_since(*at) < CALLER_RETRY);
        let key = (agent.to_string(), service.to_string());
        if tries.contains_key(&key) {
            return false;
        }
        tries.insert(key, now);
        true
    }

    /// Tests `name` as `airlock servers test` does: the default agent's session (opened
    /// if needed), its tool list read (running none) and checked, passed through the
    /// egress rule, and saved as the service's tested catalog under its launch digest.
    pub(crate) async fn test_catalog(&self, name: &str) -> Result<TestReport, NamingFailed> {
        let live = self
            .open(DEFAULT_AGENT, name)
            .await
            .map_err(|e| NamingFailed::Session(e.message))?;
        let tools = live
            .session
            .list_tools()
            .await
            .map_err(|e| NamingFailed::Session(e.to_string()))?;
        check_limits(&tools)?;
        // Server metadata leaves through the egress rule, to the registry too.
        let tools = self.redact_tools(name, tools).await;
        let identity = live.session.identity().clone();
        let service = self
            .get(name)
            .ok_or_else(|| NamingFailed::Removed(name.to_string()))?;
        self.registry.save_catalog(&StoredCatalog {
            service: name.to_string(),
            launch_digest: service.config.launch_digest(),
            tested_at: self.registry.now()?,
            protocol_version: identity.protocol_version.clone(),
            server_name: identity.name.clone(),
            server_version: identity.version.clone(),
            transport: identity.transport.as_str().to_string(),
            tools: tools.clone(),
        })?;
        Ok(TestReport {
            service: name.to_string(),
            verified: true,
            server: identity,
            tools,
        })
    }

    /// Names `listed` (MCP tool JSON, through the egress rule first) under the service's
    /// frozen namespace and replaces its catalog entries. Returns the tool count.
    async fn name_tools(
        &self,
        name: &str,
        listed: &[serde_json::Value],
    ) -> Result<usize, NamingFailed> {
        let service = self
            .get(name)
            .ok_or_else(|| NamingFailed::Removed(name.to_string()))?;
        let pipeline = service.pipeline.as_ref().ok_or(NamingFailed::NoPipeline)?;
        check_limits(listed)?;
        let listed = self.redact_tools(name, listed.to_vec()).await;
        Ok(self
            .cataloger
            .name_tools(service.info(), pipeline, &listed)
            .await?)
    }

    /// Tests `service` in place, as `airlock servers test` does: the default agent's
    /// session, its tool list read (running none) and saved as the tested catalog; a
    /// service that was untested offers its tools from then on.
    pub async fn test(&self, service: &str) -> Result<TestReport, CallError> {
        let svc = self.get(service).ok_or_else(|| no_service(service))?;
        let unavailable = |reason: NamingFailed| {
            CallError::new(
                ErrorCode::ServiceUnavailable,
                format!(
                    "testing \"{service}\" failed: {}",
                    svc.secrets().scrub_owned(&reason.to_string())
                ),
            )
        };
        let report = self.test_catalog(service).await.map_err(unavailable)?;
        let was_untested = {
            let mut health = svc.health();
            health.stale = false;
            health.untested.take().is_some()
        };
        if was_untested {
            self.name_tools(service, &report.tools)
                .await
                .map_err(unavailable)?;
            self.emit_tools_changed(service);
        }
        self.emit_service_changed(service);
        Ok(report)
    }

    /// Makes the running services those of `servers` (a [`crate::config::Config`]'s
    /// `servers`, loaded again): a new service is built and cataloged as at start, a
    /// removed one has its sessions closed and its tools withdrawn, a changed one is
    /// both, and an untested service whose tested catalog appeared since offers its
    /// tools. Unchanged services keep their sessions. Emits `service_changed` and
    /// `tools_changed` for each service touched, so gateway clients list tools again.
    /// Storage, sandbox and telemetry settings are read at start only.
    ///
    /// ```no_run
    /// # async fn run(airlock: airlock_host::Airlock, config: airlock_host::config::Config) {
    /// let changed = airlock.services().reconcile(&config.servers).await;
    /// println!("added {:?}, removed {:?}", changed.added, changed.removed);
    /// # }
    /// ```
    pub async fn reconcile(&self, servers: &BTreeMap<String, ServerConfig>) -> Reconciled {
        // One reconcile at a time: two would each build the same new service.
        let _turn = self.reconciling.lock().await;
        let running: BTreeMap<String, Arc<Service>> = self.all().into_iter().collect();
        let mut done = Reconciled::default();
        for (name, service) in &running {
            match servers.get(name) {
                None => done.removed.push(name.clone()),
                Some(wanted) if *wanted != service.config => done.changed.push(name.clone()),
                Some(_) => {}
            }
        }
        done.added = servers
            .keys()
            .filter(|name| !running.contains_key(*name))
            .cloned()
            .collect();

        for name in done.removed.iter().chain(&done.changed) {
            self.take_out(name).await;
        }
        let fresh: Vec<&ServerConfig> = done
            .added
            .iter()
            .chain(&done.changed)
            .map(|name| &servers[name])
            .collect();
        if !fresh.is_empty() {
            self.put_in(servers, &fresh).await;
            self.catalog_these(fresh.iter().map(|s| s.name.clone()).collect())
                .await;
        }
        done.tested = self.take_tested_catalogs().await;

        for name in &done.removed {
            self.events.emit(Event::ToolsChanged {
                service: name.clone(),
                tools: 0,
            });
        }
        for name in done.added.iter().chain(&done.changed).chain(&done.tested) {
            self.emit_service_changed(name);
            self.events.emit(Event::ToolsChanged {
                service: name.clone(),
                tools: self.tool_count(name),
            });
        }
        if !done.is_empty() {
            tracing::info!(
                added = ?done.added,
                removed = ?done.removed,
                changed = ?done.changed,
                tested = ?done.tested,
                "services reconciled"
            );
        }
        done
    }

    /// Takes `name` out: no new call finds it, its tools leave the catalog, and every
    /// session with it closes (calls already running finish on the service they hold).
    async fn take_out(&self, name: &str) {
        self.table
            .write()
            .expect("services lock poisoned")
            .remove(name);
        self.cataloger.forget(name);
        self.pool
            .close_service(name, "its definition was removed or changed")
            .await;
    }

    /// Builds the services `fresh` (of the full set `servers`) and puts them in. Every
    /// service then redacts the known secrets of every configured one.
    async fn put_in(&self, servers: &BTreeMap<String, ServerConfig>, fresh: &[&ServerConfig]) {
        let all = everyone(servers.values());
        crate::secrets::register_log_secrets(&all);
        let mut pipelines = build_pipelines(&self.runtime, fresh.iter().copied()).await;
        let mut table = self.table.write().expect("services lock poisoned");
        for service in table.values() {
            // What a service learned at run time (OAuth tokens) stays known.
            service.add_secrets(&all);
        }
        for server in fresh {
            let service = Service::new(
                server,
                pipelines.remove(&server.name),
                &all,
                self.is_paused(&server.name),
            );
            table.insert(server.name.clone(), Arc::new(service));
        }
    }

    /// The untested services whose tested catalog (for their current launch) has
    /// appeared in the registry since, named and offered. Returns their names.
    async fn take_tested_catalogs(&self) -> Vec<String> {
        let waiting: Vec<(String, String)> = self
            .all()
            .into_iter()
            .filter(|(_, s)| s.enabled() && s.pipeline.is_some() && s.health().untested.is_some())
            .map(|(name, s)| (name, s.config.launch_digest()))
            .collect();
        if waiting.is_empty() {
            return Vec::new();
        }
        let registry = self.registry.clone();
        // Registry reads block (PostgreSQL is a network round trip).
        let found = tokio::task::spawn_blocking(move || {
            waiting
                .into_iter()
                .filter_map(|(name, digest)| match registry.catalog(&name, &digest) {
                    Ok(found) => found.map(|catalog| (name, catalog)),
                    Err(e) => {
                        tracing::warn!(service = %name, "cannot read the tested catalog: {e}");
                        None
                    }
                })
                .collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default();
        let mut tested = Vec::new();
        for (name, catalog) in found {
            let Some(service) = self.get(&name) else {
                continue;
            };
            match self.name_tools(&name, &catalog.tools).await {
                Ok(_) => {
                    let mut health = service.health();
                    health.untested = None;
                    health.stale = false;
                    tested.push(name);
                }
                Err(reason) => {
                    let mut health = service.health();
                    health.untested = None;
                    health.failed = Some(service.secrets().scrub_owned(&reason.to_string()));
                }
            }
        }
        tested
    }
}
