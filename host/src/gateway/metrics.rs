//! `GET /metrics`: Airlock's figures (`airlock_host::meters`) and the gateway's HTTP requests,
//! in the Prometheus text format. The recorder is installed once per process, when the
//! HTTP gateway starts; the figures are read off the event stream
//! ([`crate::Airlock::record_metrics`]).
//!
//! Access follows the gateway's token rules: on loopback without `--require-token`,
//! anyone may scrape; otherwise a valid bearer token is needed (Prometheus sends one
//! with `authorization: {credentials_file: …}`).

use std::sync::{Arc, OnceLock};

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use super::guard::{Guard, bearer_of, refuse};

/// Gateway HTTP requests, by route (`mcp`, `console`, `health`, `metrics`, `other`) and
/// status code.
pub const HTTP_REQUESTS: &str = "airlock_http_requests_total";

/// Histogram buckets for durations, in seconds (1 ms to 2 minutes).
const SECONDS_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 120.0,
];

/// Histogram buckets for the stages of a call, in seconds (50 µs to 2 minutes): access
/// and retention take microseconds.
const STAGE_BUCKETS: &[f64] = &[
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    2.5, 5.0, 10.0, 30.0, 120.0,
];

/// The process's Prometheus recorder, installed on first use. `None` when another
/// recorder was installed first (an embedder's): then `/metrics` says so.
fn prometheus() -> Option<&'static PrometheusHandle> {
    static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let stages = crate::telemetry::STAGE_SECONDS;
            let builder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Full(stages.into()), STAGE_BUCKETS)
                .ok()?
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS_BUCKETS)
                .ok()?;
            match builder.install_recorder() {
                Ok(handle) => {
                    metrics::describe_counter!(HTTP_REQUESTS, "Gateway HTTP requests");
                    Some(handle)
                }
                Err(e) => {
                    tracing::warn!("/metrics is off: {e}");
                    None
                }
            }
        })
        .as_ref()
}

/// Installs the recorder (once per process) and starts recording `airlock`'s figures.
pub(super) fn start(airlock: &crate::Airlock) -> Option<tokio::task::JoinHandle<()>> {
    prometheus().map(|_| airlock.record_metrics())
}

/// What `/metrics` needs.
pub(super) struct Scrape {
    pub(super) guard: Arc<Guard>,
}

async fn render(State(scrape): State<Arc<Scrape>>, request: Request) -> Response {
    let allowed = match bearer_of(request.headers()) {
        Some(token) => scrape.guard.agent_of_token(token).await.is_ok(),
        None => !scrape.guard.token_required,
    };
    if !allowed {
        return refuse(
            StatusCode::UNAUTHORIZED,
            -32001,
            "Unauthorized: /metrics needs a valid bearer token here",
        );
    }
    let Some(handle) = prometheus() else {
        return refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            -32603,
            "metrics are recorded by another recorder in this process",
        );
    };
    let mut response = exposition(handle).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    response
}

/// The recorder's figures in the Prometheus text format, through the egress rule: label
/// values are configured names and catalog tool names (which never hold a known secret),
/// and every registered secret is scrubbed from the text all the same.
fn exposition(handle: &PrometheusHandle) -> String {
    handle.run_upkeep();
    crate::secrets::scrub_log(&handle.render()).into_owned()
}

/// `/metrics`.
pub(super) fn router(scrape: Arc<Scrape>) -> axum::Router {
    axum::Router::new()
        .route("/metrics", get(render))
        .with_state(scrape)
}

/// Counts every HTTP request by route and status.
pub(super) async fn count_requests(request: Request, next: Next) -> Response {
    let path = request.uri().path();
    let route = if path == "/mcp" || path.starts_with("/mcp/") {
        "mcp"
    } else if path.starts_with("/console") {
        "console"
    } else if path == "/healthz" || path == "/readyz" {
        "health"
    } else if path == "/metrics" {
        "metrics"
    } else {
        "other"
    };
    let response = next.run(request).await;
    let status = response.status().as_u16().to_string();
    metrics::counter!(HTTP_REQUESTS, "route" => route, "status" => status).increment(1);
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secrets::{KnownSecrets, register_log_secrets};

    #[test]
    fn a_known_secret_in_a_label_value_leaves_scrubbed() {
        let secret = "metrics-label-secret-7f3a9c21";
        register_log_secrets(&KnownSecrets::new().with("LABEL_TOKEN", secret));
        let recorder = PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        metrics::with_local_recorder(&recorder, || {
            metrics::counter!("airlock_calls_total", "tool" => format!("lookup_{secret}"))
                .increment(3);
        });
        let text = exposition(&handle);
        assert!(!text.contains(secret), "{text}");
        let line = text
            .lines()
            .find(|l| l.starts_with("airlock_calls_total{"))
            .expect("the counter is exported");
        assert!(
            line.starts_with("airlock_calls_total{tool=\"lookup_"),
            "{line}"
        );
        assert!(line.ends_with(" 3"), "{line}");
    }
}
