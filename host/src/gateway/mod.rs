//! `airlock serve`: Airlock as one MCP server in front of every service it manages, for
//! any MCP client. Over stdio (one downstream session, one agent) or streamable HTTP
//! (`/mcp`; each session's agent is the one its bearer token maps to).
//!
//! The gateway is a client of the [`Airlock`] facade and holds no logic the library
//! lacks: a downstream `tools/call` is `Airlock::call_with` with the client's progress
//! token and cancellation, its roots are `Airlock::set_roots`, its sampling and
//! elicitation answer the servers through [`crate::session::AgentClient`], and listings
//! come from the catalog and `Airlock::list_*`. What it adds is the MCP server side:
//! Airlock's own tools (`airlock_output`, `airlock_search_tools`, `airlock_status`, and in
//! the compact surface `airlock_describe_tool` and `airlock_call_tool`), unique resource
//! URIs and prompt names across services, and the HTTP rules (loopback by default,
//! bearer tokens, Origin and Host checks, limits).
//!
//! Layer 8 (client of the facade). May import: the facade (`airlock`), `session` (the
//! agent-client trait), `registry`, `secrets` and `digest` (tokens), `results` (limits),
//! `catalog` (tool types), `events`, `error`.

#[cfg(feature = "http")]
mod callback;
mod console;
mod downstream;
mod eras;
mod guard;
mod handler;
mod health;
mod http;
mod identity;
mod metrics;
mod notices;
mod own_stdio;
mod own_tools;
mod questions;
mod results;
mod routes;
mod session_state;
mod shared;
mod steps;
mod subscribing;
mod tasks;
pub mod tokens;
mod wire;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

pub use http::{HttpError, HttpOptions, serve_http};
pub use shared::Gateway;

use crate::Airlock;

/// Which tools a client sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ToolSurface {
    /// Every catalog tool the agent may use, plus `airlock_output`,
    /// `airlock_search_tools` and `airlock_status`.
    #[default]
    All,
    /// Only `airlock_search_tools`, `airlock_describe_tool`, `airlock_call_tool` and
    /// `airlock_output`: a list that never changes, for clients with small tool budgets
    /// or that ignore `tools/list_changed`.
    Meta,
}

/// How `airlock serve` runs.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The agent of a stdio session, and of HTTP requests on loopback without a token.
    pub agent: String,
    /// Which tools are listed.
    pub tools: ToolSurface,
    /// The preview size of call results (48 KiB, or 4 KiB compact).
    pub preview: usize,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            agent: crate::DEFAULT_AGENT.to_string(),
            tools: ToolSurface::All,
            preview: crate::results::DEFAULT_PREVIEW,
        }
    }
}

/// Largest MCP message the gateway reads from its client (a 32 MiB result plus room for
/// JSON escaping and metadata).
pub const MAX_MESSAGE_BYTES: usize = 40 << 20;

/// Serves one downstream client over stdin/stdout until it closes (or `shutdown` is
/// cancelled), then closes every upstream session.
pub async fn serve_stdio(
    airlock: Airlock,
    options: ServeOptions,
    shutdown: tokio_util::sync::CancellationToken,
) -> Result<(), std::io::Error> {
    use rmcp::transport::async_rw::AsyncRwTransport;
    // The gateway runs on its user's machine: a browser sign-in comes back to loopback.
    #[cfg(feature = "http")]
    airlock
        .services()
        .authorizations()
        .redirect_to(Some(crate::oauth::Redirect::Loopback));
    let gateway = Arc::new(Gateway::new(airlock, options));
    let handler = gateway.stdio_session();
    let (input, output) = own_stdio::own_stdio();
    let transport =
        AsyncRwTransport::new_server(input, output).with_max_line_length(MAX_MESSAGE_BYTES);
    let running = rmcp::serve_server(handler, wire::WireTransport(transport))
        .await
        .map_err(|e| std::io::Error::other(format!("MCP handshake with the client failed: {e}")))?;
    let stop = running.cancellation_token();
    let waiting = running.waiting();
    tokio::pin!(waiting);
    let outcome = tokio::select! {
        outcome = &mut waiting => outcome,
        _ = shutdown.cancelled() => {
            stop.cancel();
            waiting.await
        }
    };
    gateway.close_all().await;
    outcome
        .map(|_| ())
        .map_err(|e| std::io::Error::other(format!("the client session failed: {e}")))
}

/// Where `airlock serve --http` listens and who may connect.
pub fn default_http_addr() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 8765))
}

/// How long an idle HTTP session is kept by default.
pub const DEFAULT_SESSION_IDLE: Duration = Duration::from_secs(30 * 60);
