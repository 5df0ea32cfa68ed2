//! The operator console at `/console`, served by `airlock serve --http` beside `/mcp`:
//! server-rendered pages (services, calls, grants and policy, plugins) with a little
//! JavaScript for the live call feed. Its assets are compiled into the binary.
//!
//! It follows the gateway's rules: the same `Host` and `Origin` checks, no token needed
//! on loopback (unless `--require-token`), else the bearer token of the gateway's own
//! agent (`airlock serve --agent`, the operator), exchanged for a session cookie on
//! the login page. Every action is a POST carrying the session's CSRF token, and uses the
//! same library call as the CLI. Every page is sent with a strict Content-Security-Policy
//! and shows no secret value: what it renders comes from the library, which has already
//! passed it through the egress rule.
//!
//! Layer 8 (client of the facade), inside the gateway.

mod actions;
mod auth;
mod feed;
mod pages;
mod view;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::middleware;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};

use super::guard::Guard;
use crate::Airlock;

use auth::Sessions;
use feed::CallLog;

/// What every console page and action needs.
pub(super) struct Console {
    airlock: Airlock,
    log: CallLog,
    sessions: Sessions,
    /// Where "Save as artifact" writes (`<data dir>/artifacts`).
    artifacts: PathBuf,
    /// Cancelled when the gateway stops (ends the live feeds).
    shutdown: tokio_util::sync::CancellationToken,
}

impl Console {
    /// A console over `airlock`, recording its calls from now on.
    pub(super) fn start(
        airlock: Airlock,
        data_dir: &Path,
        shutdown: tokio_util::sync::CancellationToken,
    ) -> Arc<Console> {
        Arc::new(Console {
            log: CallLog::start(&airlock),
            sessions: Sessions::new(airlock.registry()),
            airlock,
            artifacts: data_dir.join("artifacts"),
            shutdown,
        })
    }
}

/// What the console's state is, for its handlers.
#[derive(Clone)]
pub(super) struct ConsoleState {
    console: Arc<Console>,
    guard: Arc<Guard>,
}

/// The `/console` routes, behind the gateway's checks and the console's own login.
pub(super) fn router(console: Arc<Console>, guard: Arc<Guard>) -> Router {
    let state = ConsoleState { console, guard };
    Router::new()
        .route(
            "/console",
            get(|| async { Redirect::to("/console/services") }),
        )
        .route(
            "/console/",
            get(|| async { Redirect::to("/console/services") }),
        )
        .route("/console/services", get(pages::services))
        .route("/console/calls", get(pages::calls))
        .route("/console/feed", get(feed::stream))
        .route("/console/output/{agent}/{service}/{id}", get(pages::output))
        .route(
            "/console/output/{agent}/{service}/{id}/save",
            post(actions::save_output),
        )
        .route("/console/grants", get(pages::grants).post(actions::grant))
        .route(
            "/console/approvals/{id}/revoke",
            post(actions::revoke_approval),
        )
        .route("/console/plugins", get(pages::plugins))
        .route("/console/services/{name}/{action}", post(actions::service))
        .route(
            "/console/sessions/{agent}/{service}/{action}",
            post(actions::session),
        )
        .route("/console/login", get(auth::login_page).post(auth::login))
        .route("/console/logout", post(auth::logout))
        .route("/console/assets/console.css", get(stylesheet))
        .route("/console/assets/console.js", get(script))
        .layer(middleware::from_fn_with_state(state.clone(), auth::admit))
        .layer(middleware::map_response(secure_headers))
        .with_state(state)
}

/// The headers every console response carries: a strict CSP (scripts and styles from
/// the console only, no inline code, no framing, forms post only to the console), no
/// sniffing, no referrer, no caching.
async fn secure_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
             connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// Runs `work` (registry queries, file reads and writes) on a blocking thread, never on
/// the runtime's.
async fn off_runtime<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::task::spawn_blocking(work).await {
        Ok(done) => done,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

async fn stylesheet() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        include_str!("assets/console.css"),
    )
}

async fn script() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        include_str!("assets/console.js"),
    )
}
