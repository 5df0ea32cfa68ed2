//! What an operator sees of the running services: live sessions and the plugins bound
//! to each service (the operator console is built on these; an embedder's own admin
//! surface can be too).

use serde::Serialize;

use super::Services;
use crate::config::{PolicyMode, SandboxLimits};

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

impl Services {
    /// Every live session, by service then agent.
    pub fn sessions(&self) -> Vec<SessionInfo> {
        self.pool
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
        let limits = self.runtime.limits();
        self.all()
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
}
