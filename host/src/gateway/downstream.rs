//! [`DownstreamClient`]: the downstream MCP client as the agent's own client — what the
//! upstream servers reach when they ask for sampling or elicitation during a call, and
//! where their log messages go (filtered by the level the client set).

#![allow(deprecated)] // sampling and logging: see `session::agent`

use std::sync::{Arc, Mutex};

use rmcp::model::{
    ClientResult, CreateMessageRequest, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequest, ElicitRequestParams, ElicitResult, InitializeRequestParams,
    LoggingMessageNotificationParam, ServerRequest,
};
use rmcp::service::ServiceError;
use rmcp::{ErrorData as McpError, Peer, RoleServer};

use crate::session::{AgentCapabilities, AgentClient, AgentFuture};

/// The lowest log level a downstream client asked for (`logging/setLevel`); every
/// message passes until it asks.
#[derive(Default)]
pub struct LogFilter {
    level: Mutex<Option<rmcp::model::LoggingLevel>>,
}

impl LogFilter {
    /// Sets the lowest level the client wants.
    pub fn set(&self, level: rmcp::model::LoggingLevel) {
        *self.level.lock().expect("log filter poisoned") = Some(level);
    }

    /// Whether a message at `level` goes to the client.
    pub fn allows(&self, level: rmcp::model::LoggingLevel) -> bool {
        let wanted = *self.level.lock().expect("log filter poisoned");
        wanted.is_none_or(|min| severity(level) >= severity(min))
    }
}

/// The downstream client of one session, answering for the agent.
pub struct DownstreamClient {
    peer: Peer<RoleServer>,
    capabilities: AgentCapabilities,
    logs: Arc<LogFilter>,
}

impl DownstreamClient {
    /// The client that sent `request` (its `initialize`), reached through `peer`, its
    /// log messages filtered by `logs`.
    pub fn new(
        peer: Peer<RoleServer>,
        request: &InitializeRequestParams,
        logs: Arc<LogFilter>,
    ) -> Self {
        DownstreamClient {
            peer,
            capabilities: AgentCapabilities {
                sampling: request.capabilities.sampling.is_some(),
                elicitation: request.capabilities.elicitation.is_some(),
                elicitation_url: request
                    .capabilities
                    .elicitation
                    .as_ref()
                    .is_some_and(|e| e.url.is_some()),
            },
            logs,
        }
    }
}

/// An error talking to the downstream client, as the upstream server will see it.
fn relay_error(e: ServiceError) -> McpError {
    match e {
        ServiceError::McpError(e) => e,
        other => {
            McpError::internal_error(format!("the agent's client did not answer: {other}"), None)
        }
    }
}

impl AgentClient for DownstreamClient {
    fn capabilities(&self) -> AgentCapabilities {
        self.capabilities
    }

    fn create_message(
        &self,
        _service: String,
        params: CreateMessageRequestParams,
    ) -> AgentFuture<CreateMessageResult> {
        let peer = self.peer.clone();
        Box::pin(async move {
            let request = ServerRequest::CreateMessageRequest(CreateMessageRequest::new(params));
            match peer.send_request(request).await.map_err(relay_error)? {
                ClientResult::CreateMessageResult(result) => Ok(*result),
                _ => Err(McpError::internal_error(
                    "the agent's client answered sampling/createMessage with another result",
                    None,
                )),
            }
        })
    }

    fn elicit(&self, _service: String, params: ElicitRequestParams) -> AgentFuture<ElicitResult> {
        let peer = self.peer.clone();
        Box::pin(async move {
            let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
            match peer.send_request(request).await.map_err(relay_error)? {
                ClientResult::ElicitResult(result) => Ok(result),
                _ => Err(McpError::internal_error(
                    "the agent's client answered elicitation/create with another result",
                    None,
                )),
            }
        })
    }

    fn log(&self, _service: &str, message: LoggingMessageNotificationParam) {
        if !self.logs.allows(message.level) {
            return;
        }
        let peer = self.peer.clone();
        tokio::spawn(async move {
            #[allow(deprecated)]
            let _ = peer.notify_logging_message(message).await;
        });
    }
}

/// Orders MCP logging levels from debug (0) to emergency (7).
fn severity(level: rmcp::model::LoggingLevel) -> u8 {
    use rmcp::model::LoggingLevel::*;
    match level {
        Debug => 0,
        Info => 1,
        Notice => 2,
        Warning => 3,
        Error => 4,
        Critical => 5,
        Alert => 6,
        Emergency => 7,
    }
}
