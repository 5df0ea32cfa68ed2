//! What an operator sees and changes while Airlock runs: live sessions, the plugins bound
//! to each service, every grant, a service disabled or enabled at run time, and a
//! service tested in place. The operator console is built on these; an embedder's own
//! admin surface can be too.

use serde::Serialize;

use super::{AccessMode, Airlock, TestReport};
use crate::config::{PolicyMode, SandboxLimits};
use crate::error::{CallError, ErrorCode};
use crate::events::Event;

/// One live session: an agent's connection to a service.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionInfo {
    /// The agent.
    pub agent: String,
    /// The service.
    pub service: String,
    /// The session number (it grows with every reconnection).
    pub session: u64,
}

/// One plugin bound to one stage of a service.
#[derive(Debug, Clone, Serialize)]
pub struct PluginSlot {
    /// `naming`, `content`, `redaction` or `policy`.
    pub stage: &'static str,
    /// How the config refers to it (`builtin:standard`, a path).
    pub reference: String,
    /// The plugin's own name.
    pub name: String,
    /// The plugin's own version.
    pub version: String,
    /// The contract it was built for.
    pub contract: String,
    /// The SHA-256 of its bytes.
    pub sha256: String,
    /// The component's size in bytes.
    pub size: usize,
    /// For a policy: `enforce` or `audit`.
    pub mode: Option<PolicyMode>,
}

/// The plugins of one service and the sandbox limits they run under.
#[derive(Debug, Clone)]
pub struct ServicePlugins {
    /// The service.
    pub service: String,
    /// Its plugins in the order a call meets them (empty when they failed to load or the
    /// service is disabled in its config).
    pub plugins: Vec<PluginSlot>,
    /// The limits every plugin instance runs under.
    pub limits: SandboxLimits,
}

fn no_service(name: &str) -> CallError {
    CallError::new(
        ErrorCode::ServiceUnavailable,
        format!("no service named \"{name}\""),
    )
}

impl Airlock {
    /// The registry this Airlock keeps its state in (the gateway's tokens live there).
    #[cfg(feature = "gateway")]
    pub(crate) fn registry(&self) -> std::sync::Arc<crate::registry::Registry> {
        self.inner.registry.clone()
    }

    /// Every live session, by service then agent.
    pub fn sessions(&self) -> Vec<SessionInfo> {
        self.inner
            .pool
            .all_live()
            .into_iter()
            .map(|(agent, service, session)| SessionInfo {
                agent,
                service,
                session,
            })
            .collect()
    }

    /// The plugins bound to each service.
    pub fn plugins(&self) -> Vec<ServicePlugins> {
        let limits = self.inner.runtime.limits();
        self.inner
            .all_services()
            .into_iter()
            .map(|(name, service)| ServicePlugins {
                service: name,
                plugins: service
                    .pipeline
                    .iter()
                    .flat_map(|p| p.plugins())
                    .map(|bound| PluginSlot {
                        stage: bound.stage.name(),
                        reference: bound.plugin.reference.clone(),
                        name: bound.plugin.info.name.clone(),
                        version: bound.plugin.info.version.clone(),
                        contract: bound.plugin.contract.clone(),
                        sha256: bound.plugin.sha256.clone(),
                        size: bound.plugin.size,
                        mode: bound.mode,
                    })
                    .collect(),
                limits,
            })
            .collect()
    }

    /// Whether calls need grants.
    pub fn access_mode(&self) -> AccessMode {
        self.inner.access.mode
    }

    /// Every grant, as (agent, service) pairs.
    pub fn all_grants(&self) -> Result<Vec<(String, String)>, CallError> {
        self.inner
            .registry
            .all_grants()
            .map_err(super::access::registry_failure)
    }

    /// Disables `service` until it is enabled again (every session with it closes; its
    /// tools are hidden and its calls refused), or enables it again. The change is kept
    /// in the registry: it outlives a restart, and every host sharing the registry
    /// follows it ([`Airlock::take_in_changes`]).
    /// A service disabled in its config stays disabled: that is changed with
    /// `airlock servers enable` (or the config file), which a running gateway takes in
    /// through [`Airlock::reconcile`]. Emits
    /// `service_changed` and `tools_changed` (so clients list their tools again).
    pub async fn set_enabled(&self, service: &str, enabled: bool) -> Result<(), CallError> {
        let inner = &self.inner;
        let svc = inner.service(service).ok_or_else(|| no_service(service))?;
        if enabled && !svc.config.enabled {
            return Err(CallError::new(
                ErrorCode::ServiceUnavailable,
                format!(
                    "service \"{service}\" is disabled in its config; enable it with `airlock servers enable {service}` (or in its file); a running gateway takes that in within its --reload-secs"
                ),
            ));
        }
        // Recorded in the registry first, so every host sharing it follows
        // (`take_in_changes`), and a restart keeps it.
        let name = service.to_string();
        let registry = inner.registry.clone();
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
        .map_err(super::access::registry_failure)?;
        {
            let mut pauses = inner.pauses.write().expect("pauses poisoned");
            if enabled {
                pauses.remove(service);
            } else {
                pauses.insert(service.to_string());
            }
        }
        drop(svc);
        inner.apply_pause(service, !enabled).await;
        Ok(())
    }

    /// Tests `service` in place, as `airlock servers test` does: the default agent's
    /// session, its tool list read (running none) and saved as the tested catalog; a
    /// service that was untested offers its tools from then on.
    pub async fn test(&self, service: &str) -> Result<TestReport, CallError> {
        let inner = &self.inner;
        let svc = inner.service(service).ok_or_else(|| no_service(service))?;
        let unavailable = |reason: &str| {
            CallError::new(
                ErrorCode::ServiceUnavailable,
                format!(
                    "testing \"{service}\" failed: {}",
                    svc.secrets().scrub_owned(reason)
                ),
            )
        };
        let report = inner
            .test_catalog(service)
            .await
            .map_err(|reason| unavailable(&reason))?;
        let was_untested = {
            let mut health = svc.health();
            health.stale = false;
            health.untested.take().is_some()
        };
        if was_untested {
            inner
                .name_tools(service, &report.tools)
                .await
                .map_err(|reason| unavailable(&reason))?;
            inner.emit(Event::ToolsChanged {
                service: service.to_string(),
                tools: inner.tool_count(service),
            });
        }
        inner.emit_service_changed(service);
        Ok(report)
    }
}
