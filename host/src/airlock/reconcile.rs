//! Changing a running Airlock's services without a restart: definitions added, removed or
//! edited (in the registry or a config file) are taken in, services tested meanwhile (by
//! `airlock servers test` in another process, or on another replica) offer their tools,
//! and clients hear `tools_changed` for every service whose tools came or went.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::start::build_pipelines;
use super::{Airlock, Inner, Service};
use crate::config::ServerConfig;
use crate::events::Event;
use crate::secrets::KnownSecrets;

/// What [`Airlock::reconcile`] changed, by service name.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
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

impl Airlock {
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
    /// let changed = airlock.reconcile(&config.servers).await;
    /// println!("added {:?}, removed {:?}", changed.added, changed.removed);
    /// # }
    /// ```
    pub async fn reconcile(&self, servers: &BTreeMap<String, ServerConfig>) -> Reconciled {
        let inner = &self.inner;
        // One reconcile at a time: two would each build the same new service.
        let _turn = inner.reconciling.lock().await;
        let running: BTreeMap<String, Arc<Service>> = inner.all_services().into_iter().collect();
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
            inner.take_out(name).await;
        }
        let fresh: Vec<&ServerConfig> = done
            .added
            .iter()
            .chain(&done.changed)
            .map(|name| &servers[name])
            .collect();
        if !fresh.is_empty() {
            inner.put_in(servers, &fresh).await;
            inner
                .catalog_these(fresh.iter().map(|s| s.name.clone()).collect())
                .await;
        }
        done.tested = inner.take_tested_catalogs().await;

        for name in &done.removed {
            inner.emit(Event::ToolsChanged {
                service: name.clone(),
                tools: 0,
            });
        }
        for name in done.added.iter().chain(&done.changed).chain(&done.tested) {
            inner.emit_service_changed(name);
            inner.emit(Event::ToolsChanged {
                service: name.clone(),
                tools: inner.tool_count(name),
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
}

impl Inner {
    /// Takes `name` out: no new call finds it, its tools leave the catalog, and every
    /// session with it closes (calls already running finish on the service they hold).
    async fn take_out(&self, name: &str) {
        self.services
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
        let everyone = servers
            .values()
            .fold(KnownSecrets::new(), |all, s| all.union(&s.known_secrets()));
        crate::secrets::register_log_secrets(&everyone);
        let mut pipelines = build_pipelines(&self.runtime, fresh.iter().copied()).await;
        let mut services = self.services.write().expect("services lock poisoned");
        for service in services.values() {
            // What a service learned at run time (OAuth tokens) stays known.
            let mut secrets = service.secrets.write().expect("secrets lock poisoned");
            *secrets = secrets.union(&everyone);
        }
        for server in fresh {
            let service = Service::new(server, pipelines.remove(&server.name), &everyone);
            service.paused.store(
                self.is_paused(&server.name),
                std::sync::atomic::Ordering::Relaxed,
            );
            services.insert(server.name.clone(), Arc::new(service));
        }
    }

    /// The untested services whose tested catalog (for their current launch) has
    /// appeared in the registry since, named and offered. Returns their names.
    async fn take_tested_catalogs(self: &Arc<Self>) -> Vec<String> {
        let waiting: Vec<(String, String)> = self
            .all_services()
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
            let Some(service) = self.service(&name) else {
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
                    health.failed = Some(service.secrets().scrub_owned(&reason));
                }
            }
        }
        tested
    }
}
