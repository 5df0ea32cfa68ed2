//! Events an embedder can watch (`Airlock::events`) and the CLI prints as `--json`
//! lines: sessions opening and closing, calls, progress, and server-side changes.

use serde::Serialize;

/// Something that happened.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Event {
    /// A service's state changed.
    ServiceChanged {
        /// The service.
        service: String,
        /// Its new state (`disconnected`, `connecting`, `connected`, `failed`).
        state: String,
        /// Why it failed, when it did.
        reason: Option<String>,
    },
    /// An agent's session with a service opened, closed or failed. A reconnection is a
    /// new session number.
    SessionChanged {
        /// The agent.
        agent: String,
        /// The service.
        service: String,
        /// The session number (increases with every connection).
        session: u64,
        /// `connected`, `closed` or `failed`.
        state: String,
        /// Whether this connection replaces an earlier one for the same agent.
        reconnect: bool,
        /// Why, for `failed`.
        reason: Option<String>,
    },
    /// A grant was given or revoked.
    GrantsChanged {
        /// The agent.
        agent: String,
        /// The service.
        service: String,
        /// Whether the agent now holds the grant.
        granted: bool,
    },
    /// A tool call finished.
    ToolCalled {
        /// The agent.
        agent: String,
        /// The service.
        service: String,
        /// The qualified tool name.
        tool: String,
        /// `ok` or the error code.
        status: String,
        /// Milliseconds from start to finish.
        elapsed_ms: u64,
        /// Progress notifications seen.
        progress_seen: usize,
        /// Size of the result in bytes, when there is one.
        size: Option<usize>,
        /// Whether anything was redacted.
        redacted: bool,
    },
    /// The server reported progress on a running call.
    Progress {
        /// The agent.
        agent: String,
        /// The service.
        service: String,
        /// The qualified tool name.
        tool: String,
        /// Progress so far.
        progress: f64,
        /// The total, if known.
        total: Option<f64>,
        /// The server's message.
        message: Option<String>,
    },
    /// A server's tool list changed and the catalog was refreshed.
    ToolsChanged {
        /// The service.
        service: String,
        /// Its tool count now.
        tools: usize,
    },
    /// A resource the server offers changed.
    ResourceUpdated {
        /// The service.
        service: String,
        /// The resource URI.
        uri: String,
    },
    /// The server's resource list changed (list them again to see it).
    ResourcesChanged {
        /// The service.
        service: String,
    },
    /// The server's prompt list changed (list them again to see it).
    PromptsChanged {
        /// The service.
        service: String,
    },
}
