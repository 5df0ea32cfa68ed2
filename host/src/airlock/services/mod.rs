//! [`Services`]: the configured services as they run — their definitions, plugin
//! pipelines, known secrets, health and limits — and every agent's sessions with them.
//! It opens sessions (`sessions.rs`), names their tools into the catalog
//! (`cataloging.rs`), reports how each is doing (`report.rs`, `inventory.rs`), takes in
//! changed definitions (`cataloging.rs`), and applies the egress rule to what comes back
//! from a server outside a tool result (`egress.rs`). Requests other than tool calls run
//! under a service's limits through `upstream.rs`.
//!
//! It knows nothing of access: callers check it first ([`super::access::Access`]).

#[cfg(feature = "http")]
mod authorize;
mod cataloging;
mod egress;
mod inventory;
mod report;
mod service;
mod sessions;
mod upstream;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, RwLock};

pub use cataloging::Reconciled;
pub(crate) use egress::redact_listing;
pub use inventory::{PluginSlot, ServicePlugins, SessionInfo};
pub use report::{ServiceReport, ServiceStatus, TestReport};
pub(crate) use service::{Service, build_pipelines, everyone};
pub(crate) use sessions::Refusal;

use super::agents::Agents;
use crate::catalog::Cataloger;
use crate::config::ServerConfig;
use crate::error::{CallError, ErrorCode};
use crate::events::EventBus;
use crate::plugin::PluginRuntime;
use crate::registry::Registry;
use crate::secrets::SecretStore;
use crate::session::SessionPool;

/// The running services and their sessions.
pub struct Services {
    /// Every configured service by name; an entry is replaced whole when its definition
    /// changes while running ([`Services::reconcile`]).
    table: RwLock<BTreeMap<String, Arc<Service>>>,
    pool: SessionPool,
    agents: Arc<Agents>,
    cataloger: Arc<Cataloger>,
    runtime: Arc<PluginRuntime>,
    registry: Arc<Registry>,
    secret_store: SecretStore,
    events: EventBus,
    /// Held while [`Services::reconcile`] runs, so reconciles take turns.
    reconciling: tokio::sync::Mutex<()>,
    /// Services disabled at run time (by any host sharing the registry), as last read.
    pauses: RwLock<BTreeSet<String>>,
    /// When each agent last tried to list a service that acts as the caller
    /// ([`Services::catalog_for_caller`]), so a failing one is not tried on every listing.
    caller_tries: std::sync::Mutex<std::collections::HashMap<(String, String), std::time::Instant>>,
    /// The authorizations calls started for agents that must authorize a service
    /// themselves ([`Services::authorizations`]).
    #[cfg(feature = "http")]
    authorizations: Arc<crate::oauth::Authorizations>,
}

/// What a [`Services`] is made of (see [`Services::new`]).
pub(crate) struct Parts {
    pub(crate) agents: Arc<Agents>,
    pub(crate) cataloger: Arc<Cataloger>,
    pub(crate) runtime: Arc<PluginRuntime>,
    pub(crate) registry: Arc<Registry>,
    pub(crate) secret_store: SecretStore,
    pub(crate) events: EventBus,
    pub(crate) max_sessions: usize,
}

impl Services {
    /// The services of `servers`, their pipelines built (`pipelines`), those in
    /// `pauses` disabled at run time. Connects nothing.
    pub(crate) fn new(
        parts: Parts,
        servers: &BTreeMap<String, ServerConfig>,
        mut pipelines: std::collections::HashMap<
            String,
            Result<crate::plugin::ServicePipeline, crate::plugin::PluginError>,
        >,
        pauses: BTreeSet<String>,
    ) -> Services {
        let all = everyone(servers.values());
        crate::secrets::register_log_secrets(&all);
        let table = servers
            .iter()
            .map(|(name, server)| {
                let service =
                    Service::new(server, pipelines.remove(name), &all, pauses.contains(name));
                (name.clone(), Arc::new(service))
            })
            .collect();
        #[cfg(feature = "http")]
        let authorization_store = parts.secret_store.clone();
        Services {
            table: RwLock::new(table),
            pool: SessionPool::new(parts.max_sessions, parts.events.clone()),
            agents: parts.agents,
            cataloger: parts.cataloger,
            runtime: parts.runtime,
            registry: parts.registry,
            secret_store: parts.secret_store,
            events: parts.events,
            reconciling: Default::default(),
            pauses: RwLock::new(pauses),
            caller_tries: Default::default(),
            #[cfg(feature = "http")]
            authorizations: Arc::new(crate::oauth::Authorizations::new(authorization_store)),
        }
    }

    /// The plugin runtime (to load plugins for offline replay, for example).
    pub fn runtime(&self) -> &Arc<PluginRuntime> {
        &self.runtime
    }

    pub(crate) fn get(&self, name: &str) -> Option<Arc<Service>> {
        self.table
            .read()
            .expect("services lock poisoned")
            .get(name)
            .cloned()
    }

    /// Every configured service, in name order (a snapshot: services added or removed
    /// meanwhile are not in it, or still are).
    pub(crate) fn all(&self) -> Vec<(String, Arc<Service>)> {
        self.table
            .read()
            .expect("services lock poisoned")
            .iter()
            .map(|(name, service)| (name.clone(), service.clone()))
            .collect()
    }

    /// The names of every configured service, in order.
    pub fn names(&self) -> Vec<String> {
        self.table
            .read()
            .expect("services lock poisoned")
            .keys()
            .cloned()
            .collect()
    }

    /// Whether a service of that name is configured.
    pub fn has(&self, name: &str) -> bool {
        self.table
            .read()
            .expect("services lock poisoned")
            .contains_key(name)
    }

    /// Whether `name` is configured, enabled and has its plugins (its tools may be
    /// offered).
    pub fn is_usable(&self, name: &str) -> bool {
        self.get(name)
            .is_some_and(|s| s.enabled() && s.pipeline.is_some())
    }

    /// Why `name` cannot serve calls now, when it has failed (its plugins were refused,
    /// it needs repair, or its server could not be reached) while enabled.
    pub fn failure(&self, name: &str) -> Option<String> {
        let service = self.get(name)?;
        if !service.enabled() {
            return None;
        }
        service.health().failed.clone()
    }

    /// The per-request timeout of `service`.
    pub(crate) fn timeout_of(&self, service: &str) -> std::time::Duration {
        self.get(service)
            .map(|s| s.config.tool_timeout)
            .unwrap_or(crate::config::DEFAULT_TOOL_TIMEOUT)
    }

    /// `error` (from `service`'s server or session) with the service's known secrets
    /// scrubbed from its message.
    pub(crate) fn scrub_error(&self, service: &str, mut error: CallError) -> CallError {
        if let Some(svc) = self.get(service) {
            error.message = svc.secrets().scrub_owned(&error.message);
        }
        error
    }

    /// Disables `service` until it is enabled again (every session with it closes; its
    /// tools are hidden and its calls refused), or enables it again. The change is kept
    /// in the registry: it outlives a restart, and every host sharing the registry
    /// follows it ([`crate::Airlock::take_in_changes`]).
    /// A service disabled in its config stays disabled: that is changed with
    /// `airlock servers enable` (or the config file), which a running gateway takes in
    /// through [`Services::reconcile`]. Emits `service_changed` and `tools_changed` (so
    /// clients list their tools again).
    pub async fn set_enabled(&self, service: &str, enabled: bool) -> Result<(), CallError> {
        let svc = self.get(service).ok_or_else(|| no_service(service))?;
        if enabled && !svc.config.enabled {
            return Err(CallError::new(
                ErrorCode::ServiceUnavailable,
                format!(
                    "service \"{service}\" is disabled in its config; enable it with `airlock servers enable {service}` (or in its file); a running gateway takes that in within its --reload-secs"
                ),
            ));
        }
        // Recorded in the registry first, so every host sharing it follows, and a
        // restart keeps it.
        let name = service.to_string();
        let registry = self.registry.clone();
        tokio::task::spawn_blocking(move || {
            if enabled {
                registry.resume(&name)
            } else {
                registry.pause(&name)
            }
        })
        .await
        .map_err(|e| {
            CallError::new(
                ErrorCode::ServiceUnavailable,
                format!("recording the change panicked: {e}"),
            )
        })?
        .map_err(registry_failure)?;
        {
            let mut pauses = self.pauses.write().expect("pauses poisoned");
            if enabled {
                pauses.remove(service);
            } else {
                pauses.insert(service.to_string());
            }
        }
        self.apply_pause(service, !enabled).await;
        Ok(())
    }

    /// Makes the services disabled at run time exactly those of `pauses` (as another
    /// host left them in the registry).
    pub(crate) async fn take_in_pauses(&self, pauses: BTreeSet<String>) {
        *self.pauses.write().expect("pauses poisoned") = pauses.clone();
        for (name, service) in self.all() {
            let paused = pauses.contains(&name);
            if service.paused() != paused {
                self.apply_pause(&name, paused).await;
            }
        }
    }

    /// Disables (`paused`) or enables `name` on this host now: a disabled service's
    /// sessions close; clients hear `service_changed` and `tools_changed`.
    async fn apply_pause(&self, name: &str, paused: bool) {
        let Some(service) = self.get(name) else {
            return;
        };
        service.set_paused(paused);
        if paused {
            for (agent, _) in self.pool.agents_of(name) {
                self.pool.disconnect(&agent, name, "disabled").await;
            }
        }
        self.emit_service_changed(name);
        // Clients (the gateway's) list tools again: the service's tools came or went.
        self.emit_tools_changed(name);
    }

    /// Whether `name` was disabled at run time (by any host), as last read.
    fn is_paused(&self, name: &str) -> bool {
        self.pauses.read().expect("pauses poisoned").contains(name)
    }
}

/// "No service named …" as a call's error.
pub(crate) fn no_service(name: &str) -> CallError {
    CallError::new(
        ErrorCode::ServiceUnavailable,
        format!("no service named \"{name}\""),
    )
}

/// A registry failure as a call's error: `registry_unavailable` when the database could
/// not be reached (a retry may work), else `service_unavailable`.
pub(crate) fn registry_failure(e: crate::registry::RegistryError) -> CallError {
    let code = if e.is_unavailable() {
        ErrorCode::RegistryUnavailable
    } else {
        ErrorCode::ServiceUnavailable
    };
    CallError::new(code, e.to_string())
}
