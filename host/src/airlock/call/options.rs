//! How a call is asked for: [`CallOptions`] (agent, timeout, cancellation, progress,
//! trace context, who answers a server's questions, preview size) and the caller's own
//! request when the call arrived as one ([`CallerRequest`]).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::airlock::options::DEFAULT_AGENT;
use crate::session::{AgentClient, ProgressUpdate, TraceContext};

/// How to run one call.
#[derive(Debug, Clone)]
pub struct CallOptions {
    /// The calling agent (each agent has its own session per service).
    pub agent: String,
    /// Overrides the service's `tool_timeout_secs`.
    pub timeout: Option<Duration>,
    /// Cancels the call: the server is sent `notifications/cancelled`.
    pub cancel: Option<CancellationToken>,
    /// Receives the server's progress notifications.
    pub progress: Option<mpsc::UnboundedSender<ProgressUpdate>>,
    /// The caller's W3C trace context, passed on to the server in the request's `_meta`
    /// (SEP-414), so the server's spans join the caller's trace.
    pub trace: Option<TraceContext>,
    /// Answers the questions a server asks during this call (elicitation, sampling),
    /// instead of the agent's client — a gateway's 2026-07-28 client, asked through an
    /// `input_required` result. The answers are the caller's; the questions reach it
    /// scrubbed of the service's secrets.
    pub asker: Option<Arc<dyn AgentClient>>,
    /// The preview size for this agent's surface (for example
    /// [`crate::results::COMPACT_PREVIEW`] for models on the compact surface); the
    /// Airlock's default when `None`.
    pub preview: Option<usize>,
    /// The caller's own request, when the call arrived as one (the gateway sets it):
    /// recorded on the call's span as `jsonrpc.request.id` and `mcp.session.id`.
    pub request: Option<CallerRequest>,
}

/// The MCP request a call arrived in, as its caller numbered it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallerRequest {
    /// The JSON-RPC request id, as text.
    pub id: String,
    /// The caller's MCP session (`Mcp-Session-Id`), when it has one.
    pub session: Option<String>,
}

impl Default for CallOptions {
    fn default() -> Self {
        CallOptions {
            agent: DEFAULT_AGENT.to_string(),
            timeout: None,
            cancel: None,
            progress: None,
            trace: None,
            asker: None,
            preview: None,
            request: None,
        }
    }
}
