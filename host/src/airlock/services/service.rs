//! [`Service`]: one configured service as it runs — its definition, its plugin pipeline,
//! what it must never let out, how it is doing, and its limits — and how a set of them
//! is built from definitions.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use crate::config::ServerConfig;
use crate::plugin::{PluginError, PluginRuntime, ServiceInfo, ServicePipeline};
use crate::secrets::KnownSecrets;
use crate::session::{ServerIdentity, UpstreamGuard};

/// What Airlock knows about one service's health.
#[derive(Default)]
pub(crate) struct Health {
    pub(crate) failed: Option<String>,
    pub(crate) untested: Option<String>,
    /// Whether the untested service has a tested catalog for an earlier launch.
    pub(crate) stale: bool,
    pub(crate) connecting: usize,
    pub(crate) identity: Option<ServerIdentity>,
}

/// One configured service: its definition, its plugins, what it must never let out, and
/// how it is doing.
pub(crate) struct Service {
    pub(crate) config: ServerConfig,
    pub(crate) pipeline: Option<Arc<ServicePipeline>>,
    secrets: RwLock<KnownSecrets>,
    health: Mutex<Health>,
    /// Disabled while running (`Services::set_enabled`), on top of the config.
    paused: AtomicBool,
    /// Its `[limits]`: calls in flight, rates and the connection breaker.
    pub(crate) guard: UpstreamGuard,
}

impl Service {
    /// A service as configured, with its plugin pipeline (`None` when disabled, or the
    /// reason it could not be built), redacting its own known secrets and `everyone`'s.
    pub(crate) fn new(
        server: &ServerConfig,
        pipeline: Option<Result<ServicePipeline, PluginError>>,
        everyone: &KnownSecrets,
        paused: bool,
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
                health.failed = Some(secrets.scrub_owned(&reason.to_string()));
                None
            }
            None => None,
        };
        Service {
            config: server.clone(),
            pipeline,
            secrets: RwLock::new(secrets),
            health: Mutex::new(health),
            paused: AtomicBool::new(paused),
            guard: UpstreamGuard::new(name, server.limits),
        }
    }

    /// Whether the service may be used: enabled in its config and not disabled since.
    pub(crate) fn enabled(&self) -> bool {
        self.config.enabled && !self.paused.load(Ordering::Relaxed)
    }

    /// Whether the service is disabled at run time.
    pub(crate) fn paused(&self) -> bool {
        self.paused.load(Ordering::Relaxed)
    }

    /// Disables (or enables) the service at run time.
    pub(crate) fn set_paused(&self, paused: bool) {
        self.paused.store(paused, Ordering::Relaxed);
    }

    /// The pipeline of a usable service: enabled, built, and needing no repair.
    pub(crate) fn usable_pipeline(&self) -> Option<Arc<ServicePipeline>> {
        self.pipeline
            .clone()
            .filter(|_| self.enabled() && self.config.repair.is_empty())
    }

    /// The known secrets to redact from this service's output and diagnostics.
    pub(crate) fn secrets(&self) -> KnownSecrets {
        self.secrets.read().expect("secrets lock poisoned").clone()
    }

    /// Learns a secret at run time (an OAuth access token, say).
    pub(crate) fn learn_secret(&self, name: &str, value: &str) {
        let mut secrets = self.secrets.write().expect("secrets lock poisoned");
        *secrets = secrets.with(name, value);
        crate::secrets::register_log_secrets(&secrets);
    }

    /// Adds `more` to what the service redacts (keeping what it learned at run time).
    pub(crate) fn add_secrets(&self, more: &KnownSecrets) {
        let mut secrets = self.secrets.write().expect("secrets lock poisoned");
        *secrets = secrets.union(more);
    }

    /// What the naming plugin is told about the service.
    pub(crate) fn info(&self) -> ServiceInfo {
        ServiceInfo {
            id: self.config.name.clone(),
            label: self.config.label.clone(),
            description: self.config.description.clone(),
        }
    }

    pub(crate) fn health(&self) -> std::sync::MutexGuard<'_, Health> {
        self.health.lock().expect("health lock poisoned")
    }
}

/// Builds every enabled service's pipeline concurrently, off the async runtime's threads
/// (loading and instantiating plugins blocks). A failure is that service's reason.
pub(crate) async fn build_pipelines<'a>(
    runtime: &Arc<PluginRuntime>,
    servers: impl Iterator<Item = &'a ServerConfig>,
) -> HashMap<String, Result<ServicePipeline, PluginError>> {
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
            .map_err(|e| PluginError::Load {
                plugin: "(runtime)".into(),
                message: format!("plugin setup failed: {e}"),
            })
            .and_then(|built| built);
            (server.name.clone(), built)
        }
    });
    futures::future::join_all(builds)
        .await
        .into_iter()
        .collect()
}

/// Every known secret of `servers`: each service redacts all of them (a token of one
/// service that shows up in another's result is still a secret).
pub(crate) fn everyone<'a>(servers: impl Iterator<Item = &'a ServerConfig>) -> KnownSecrets {
    servers.fold(KnownSecrets::new(), |all, s| all.union(&s.known_secrets()))
}
