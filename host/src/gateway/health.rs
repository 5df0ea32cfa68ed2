//! Health endpoints for load balancers and orchestrators, beside `/mcp`:
//!
//! - `GET /healthz`: 200 while the process serves HTTP. It checks nothing else, so a
//!   replica is never restarted for a dependency's outage.
//! - `GET /readyz`: 200 when the registry and the results store answer, else 503
//!   ([`crate::airlock::Readiness`]). Probes run at most once a second, however often
//!   it is asked; concurrent checks share one probe.
//!
//! Neither needs a token or checks `Host` (probes address a replica by its IP). The
//! readiness details (which dependency failed and why, degraded services) go only to a
//! caller the gateway would let in: on loopback without required tokens, anyone; else a
//! valid bearer token. Anyone else gets `{"ready": …}` and the status code.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;
use tokio::sync::Mutex;

use super::guard::{Guard, bearer_of};
use crate::{Airlock, Readiness};

/// How long one readiness probe's answer is served again.
const FRESH_FOR: Duration = Duration::from_secs(1);

/// The readiness of one gateway, probed at most once per [`FRESH_FOR`].
pub(super) struct Health {
    airlock: Airlock,
    guard: Arc<Guard>,
    last: Mutex<Option<(Instant, Readiness)>>,
}

impl Health {
    pub(super) fn new(airlock: Airlock, guard: Arc<Guard>) -> Self {
        Health {
            airlock,
            guard,
            last: Mutex::new(None),
        }
    }

    /// The latest readiness: probed now, unless a probe answered within [`FRESH_FOR`]
    /// (callers arriving during a probe wait for it).
    async fn readiness(&self) -> Readiness {
        let mut last = self.last.lock().await;
        if let Some((at, readiness)) = last.as_ref()
            && at.elapsed() < FRESH_FOR
        {
            return readiness.clone();
        }
        let readiness = self.airlock.readiness().await;
        *last = Some((Instant::now(), readiness.clone()));
        readiness
    }

    /// Whether the caller may read the details.
    async fn may_see_details(&self, headers: &HeaderMap) -> bool {
        match bearer_of(headers) {
            Some(token) => self.guard.agent_of_token(token).await.is_ok(),
            None => !self.guard.token_required,
        }
    }
}

async fn healthz() -> Response {
    (StatusCode::OK, axum::Json(json!({"status": "ok"}))).into_response()
}

async fn readyz(State(health): State<Arc<Health>>, headers: HeaderMap) -> Response {
    let readiness = health.readiness().await;
    let status = if readiness.ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = if health.may_see_details(&headers).await {
        serde_json::to_value(&readiness).unwrap_or_else(|_| json!({"ready": readiness.ready}))
    } else {
        json!({"ready": readiness.ready})
    };
    let mut response = (status, axum::Json(body)).into_response();
    response.headers_mut().insert(
        axum::http::header::CACHE_CONTROL,
        axum::http::HeaderValue::from_static("no-store"),
    );
    response
}

/// `/healthz` and `/readyz`.
pub(super) fn router(health: Arc<Health>) -> axum::Router {
    axum::Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(health)
}
