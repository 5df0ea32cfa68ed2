//! [`AgentClient`]: the agent's own MCP client, as the servers it uses reach it through
//! Airlock — the sampling and elicitation requests a server sends during a call, and the
//! server's log messages. The gateway implements it with the downstream client; an
//! embedder may implement it with its own model and UI. Without one, servers are told
//! in the handshake that Airlock does not sample or elicit, and a request anyway is
//! refused cleanly.

// Sampling, elicitation and logging are deprecated in the 2026 drafts (SEP-2577) but used
// by every revision Airlock speaks; they stay behind this trait so they can be retired.
#![allow(deprecated)]

use std::future::Future;
use std::pin::Pin;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult,
    LoggingMessageNotificationParam,
};

/// A boxed future an [`AgentClient`] answers with.
pub type AgentFuture<T> = Pin<Box<dyn Future<Output = Result<T, McpError>> + Send>>;

/// What the agent's client can answer, declared to servers in the handshake.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AgentCapabilities {
    /// It answers `sampling/createMessage`.
    pub sampling: bool,
    /// It answers `elicitation/create`.
    pub elicitation: bool,
    /// It answers URL-mode `elicitation/create` (it declared `elicitation.url`): it
    /// shows its user a URL to open, such as a service's sign-in page.
    pub elicitation_url: bool,
}

/// The agent's own client, reached by the servers the agent uses.
///
/// Everything Airlock passes here comes from a server and has already had the service's
/// known secrets scrubbed.
pub trait AgentClient: Send + Sync + 'static {
    /// What this client answers.
    fn capabilities(&self) -> AgentCapabilities;

    /// A server (`service`) asks the agent's model for a message.
    fn create_message(
        &self,
        service: String,
        params: CreateMessageRequestParams,
    ) -> AgentFuture<CreateMessageResult>;

    /// A server (`service`) asks the agent's user for input.
    fn elicit(&self, service: String, params: ElicitRequestParams) -> AgentFuture<ElicitResult>;

    /// A server (`service`) logged a message.
    fn log(&self, service: &str, message: LoggingMessageNotificationParam);
}

impl std::fmt::Debug for dyn AgentClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentClient")
            .field("capabilities", &self.capabilities())
            .finish()
    }
}

/// Where a session finds its agent's client when a server asks for something: the
/// agent's current client, replaced when the agent's downstream client changes (a new
/// gateway session for the same agent), so sessions never answer through a client that
/// has gone away.
#[derive(Default)]
pub struct AgentLink {
    client: std::sync::RwLock<Option<std::sync::Arc<dyn AgentClient>>>,
}

impl AgentLink {
    /// The agent's client now, if it has one.
    pub fn get(&self) -> Option<std::sync::Arc<dyn AgentClient>> {
        self.client.read().expect("agent link poisoned").clone()
    }

    /// Makes `client` the agent's client (`None` forgets it).
    pub fn set(&self, client: Option<std::sync::Arc<dyn AgentClient>>) {
        *self.client.write().expect("agent link poisoned") = client;
    }

    /// What the current client answers (nothing without one).
    pub fn capabilities(&self) -> AgentCapabilities {
        self.get().map(|c| c.capabilities()).unwrap_or_default()
    }
}

/// The agent's client while its calls bring their own askers (`CallOptions::asker`):
/// it declares sampling and elicitation to servers, so that they may ask (each call's
/// asker answers, or refuses, what it is asked), and refuses a question that names no
/// call (a handshake-era server's request while several of the agent's calls are in
/// flight on its session).
#[derive(Debug, Default)]
pub struct PerCallAskers;

fn unattributed<T: Send + 'static>() -> AgentFuture<T> {
    Box::pin(std::future::ready(Err(McpError::invalid_request(
        "the server asked a question that Airlock cannot tie to one call (several calls are in flight on the session, and the agent has no client of its own)",
        None,
    ))))
}

impl AgentClient for PerCallAskers {
    fn capabilities(&self) -> AgentCapabilities {
        AgentCapabilities {
            sampling: true,
            elicitation: true,
            // Its URL questions would name no call: the host asks through each call's
            // own asker instead.
            elicitation_url: false,
        }
    }

    fn create_message(
        &self,
        _service: String,
        _params: CreateMessageRequestParams,
    ) -> AgentFuture<CreateMessageResult> {
        unattributed()
    }

    fn elicit(&self, _service: String, _params: ElicitRequestParams) -> AgentFuture<ElicitResult> {
        unattributed()
    }

    fn log(&self, _service: &str, _message: LoggingMessageNotificationParam) {}
}
