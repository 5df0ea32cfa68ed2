//! Readiness: whether this host can serve calls now. It can when its registry and its
//! results store answer; a service that failed or awaits a test is listed as degraded
//! (its tools are unavailable, the others are not), but does not make the host unready,
//! so one broken upstream does not take a gateway replica out of its load balancer.
//!
//! Each probe is one cheap round trip (`SELECT 1`; a HEAD of an absent S3 key), run
//! where blocking is allowed and bounded by [`PROBE_WITHIN`]. What a check reports has
//! passed the log scrubber: no known secret leaves in it.

use std::time::Duration;

use serde::Serialize;

use crate::events::ServiceState;

/// How long one probe may take before its check fails.
pub const PROBE_WITHIN: Duration = Duration::from_secs(3);

/// One dependency's check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReadinessCheck {
    /// Whether it answered.
    pub ok: bool,
    /// What was checked (`SQLite`, `PostgreSQL postgres://host:port/db (schema)`, …; no
    /// credentials).
    pub target: String,
    /// Why not, when it did not answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A service that cannot serve its tools now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DegradedService {
    /// The service's configured name.
    pub service: String,
    /// `failed` or `untested`.
    pub state: &'static str,
}

/// Whether the host can serve calls, and what is wrong when it cannot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Readiness {
    /// The registry and the results store both answered.
    pub ready: bool,
    /// The registry (SQLite or PostgreSQL).
    pub registry: ReadinessCheck,
    /// The results store (the data directory or S3).
    pub results: ReadinessCheck,
    /// Services that failed or await a test.
    pub degraded: Vec<DegradedService>,
}

impl super::Airlock {
    /// Probes the registry and the results store, and lists degraded services.
    pub async fn readiness(&self) -> Readiness {
        let registry_target = self.parts.registry.describe();
        let results_target = self.parts.outputs.describe();
        let registry = self.parts.registry.clone();
        let outputs = self.parts.outputs.clone();
        let (registry, results) = tokio::join!(
            probe(registry_target, move || registry.reachable()),
            probe(results_target, move || outputs.reachable()),
        );
        let degraded = self
            .parts
            .services
            .status()
            .into_iter()
            .filter_map(|report| {
                let state = report.status.state();
                matches!(state, ServiceState::Failed | ServiceState::Untested).then(|| {
                    DegradedService {
                        service: report.service,
                        state: state.as_str(),
                    }
                })
            })
            .collect();
        Readiness {
            ready: registry.ok && results.ok,
            registry,
            results,
            degraded,
        }
    }
}

/// Runs one blocking probe off the async threads, within [`PROBE_WITHIN`].
async fn probe<E: std::fmt::Display + Send + 'static>(
    target: String,
    job: impl FnOnce() -> Result<(), E> + Send + 'static,
) -> ReadinessCheck {
    let outcome = tokio::time::timeout(PROBE_WITHIN, tokio::task::spawn_blocking(job)).await;
    let error = match outcome {
        Ok(Ok(Ok(()))) => None,
        Ok(Ok(Err(e))) => Some(e.to_string()),
        Ok(Err(e)) => Some(format!("the probe stopped: {e}")),
        Err(_) => Some(format!("no answer within {PROBE_WITHIN:?}")),
    };
    ReadinessCheck {
        ok: error.is_none(),
        target: crate::secrets::scrub_log(&target).into_owned(),
        error: error.map(|e| crate::secrets::scrub_log(&e).into_owned()),
    }
}
