//! Airlock's figures through the [`metrics`] facade, read off its event stream: nothing
//! is counted on the call path itself, and with no recorder installed (and no
//! [`Airlock::record_metrics`] task) there is no work at all. `airlock serve --http`
//! installs a Prometheus recorder and serves it at `/metrics`; an embedder installs its
//! own recorder and starts the task.
//!
//! Every label value is bounded: configured service and plugin names, catalog tool
//! names (a call to a tool outside the catalog emits no call event), error codes, and
//! fixed words. No output id, argument, agent-supplied string or rule text is a label.

use std::collections::HashSet;

use tokio::sync::broadcast::error::RecvError;

use super::Airlock;
use crate::events::{CallStatus, Event, SessionState};

/// Calls that ended, by service, tool and outcome (`ok` or the error code).
pub const CALLS: &str = "airlock_calls_total";
/// How long calls took end to end, by service and outcome class (`ok`, `error`).
pub const CALL_SECONDS: &str = "airlock_call_duration_seconds";
/// Bytes of results kept, by service.
pub const RESULT_BYTES: &str = "airlock_result_bytes_total";
/// Results that had something redacted, by service.
pub const REDACTED: &str = "airlock_results_redacted_total";
/// Policy decisions, by service, plugin and decision.
pub const POLICY: &str = "airlock_policy_decisions_total";
/// Upstream session changes, by service and state (`connected`, `closed`, `failed`).
pub const SESSIONS: &str = "airlock_upstream_sessions_total";
/// Upstream sessions open now, by service.
pub const LIVE_SESSIONS: &str = "airlock_upstream_sessions_live";
/// Events the recorder missed because it fell behind.
pub const MISSED: &str = "airlock_metrics_events_missed_total";
/// Always 1, labelled with the version.
pub const BUILD_INFO: &str = "airlock_build_info";

/// The decisions a policy record can carry; anything else counts as `other`.
const DECISIONS: &[&str] = &[
    "allow", "deny", "rewrite", "ask", "approved", "declined", "withhold", "replace", "failed",
];

fn describe() {
    metrics::describe_counter!(CALLS, "Calls that ended, by service, tool and outcome");
    metrics::describe_histogram!(
        CALL_SECONDS,
        metrics::Unit::Seconds,
        "Call duration end to end, by service and outcome class"
    );
    metrics::describe_counter!(RESULT_BYTES, metrics::Unit::Bytes, "Bytes of results kept");
    metrics::describe_counter!(REDACTED, "Results that had something redacted");
    metrics::describe_counter!(POLICY, "Policy decisions, by plugin and decision");
    metrics::describe_counter!(SESSIONS, "Upstream session changes, by state");
    metrics::describe_gauge!(LIVE_SESSIONS, "Upstream sessions open now");
    metrics::describe_counter!(MISSED, "Events the metrics recorder missed");
    metrics::describe_gauge!(BUILD_INFO, "Airlock's version");
    metrics::describe_histogram!(
        crate::telemetry::STAGE_SECONDS,
        metrics::Unit::Seconds,
        "Time spent in each stage of a call"
    );
    metrics::describe_counter!(
        crate::telemetry::PLUGIN_TRAPS,
        "Plugin calls that trapped (deadline, memory limit, stack overflow, panic), by plugin and stage"
    );
    metrics::describe_gauge!(
        crate::telemetry::RETENTION_QUEUE,
        "Results accepted for retention and not yet written"
    );
}

impl Airlock {
    /// Records Airlock's figures through the `metrics` facade until this Airlock is
    /// dropped: install a recorder first (`metrics::set_global_recorder`).
    pub fn record_metrics(&self) -> tokio::task::JoinHandle<()> {
        describe();
        metrics::gauge!(BUILD_INFO, "version" => env!("CARGO_PKG_VERSION")).set(1.0);
        let mut events = self.events();
        tokio::spawn(async move {
            let mut live: HashSet<(String, String, u64)> = HashSet::new();
            loop {
                match events.recv().await {
                    Ok(event) => record(&event, &mut live),
                    Err(RecvError::Lagged(missed)) => metrics::counter!(MISSED).increment(missed),
                    Err(RecvError::Closed) => return,
                }
            }
        })
    }
}

/// Records one event; `live` holds the upstream sessions open now.
fn record(event: &Event, live: &mut HashSet<(String, String, u64)>) {
    match event {
        Event::ToolCalled {
            service,
            tool,
            status,
            elapsed_ms,
            size,
            redacted,
            ..
        } => {
            let (outcome, class) = match status {
                CallStatus::Ok => ("ok", "ok"),
                CallStatus::Failed(code) => (code.as_str(), "error"),
            };
            metrics::counter!(CALLS, "service" => service.clone(), "tool" => tool.clone(), "outcome" => outcome)
                .increment(1);
            metrics::histogram!(CALL_SECONDS, "service" => service.clone(), "outcome" => class)
                .record(*elapsed_ms as f64 / 1000.0);
            if let Some(size) = size {
                metrics::counter!(RESULT_BYTES, "service" => service.clone())
                    .increment(*size as u64);
            }
            if *redacted {
                metrics::counter!(REDACTED, "service" => service.clone()).increment(1);
            }
        }
        Event::PolicyDecided {
            service,
            plugin,
            decision,
            ..
        } => {
            let decision = DECISIONS
                .iter()
                .find(|d| **d == decision.as_str())
                .copied()
                .unwrap_or("other");
            metrics::counter!(POLICY, "service" => service.clone(), "plugin" => plugin.clone(), "decision" => decision)
                .increment(1);
        }
        Event::SessionChanged {
            agent,
            service,
            session,
            state,
            ..
        } => {
            metrics::counter!(SESSIONS, "service" => service.clone(), "state" => state.as_str())
                .increment(1);
            let key = (agent.clone(), service.clone(), *session);
            let changed = match state {
                SessionState::Connected => live.insert(key),
                SessionState::Closed | SessionState::Failed => live.remove(&key),
            };
            if changed {
                let open = live.iter().filter(|(_, s, _)| s == service).count();
                metrics::gauge!(LIVE_SESSIONS, "service" => service.clone()).set(open as f64);
            }
        }
        _ => {}
    }
}
