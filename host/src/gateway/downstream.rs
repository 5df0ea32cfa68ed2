//! [`DownstreamClient`]: the downstream MCP client as the agent's own client — what the
//! upstream servers reach when they ask for sampling or elicitation during a call, and
//! where their log messages go (filtered by the level the client set).

#![allow(deprecated)] // sampling and logging: see `session::agent`

use std::sync::Weak;

use rmcp::model::{
    ClientResult, CreateMessageRequest, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequest, ElicitRequestParams, ElicitResult, InitializeRequestParams,
    LoggingMessageNotificationParam, ServerRequest,
};
use rmcp::service::ServiceError;
use rmcp::{ErrorData as McpError, Peer, RoleServer};

use super::handler::SessionState;
use crate::session::{AgentCapabilities, AgentClient, AgentFuture};

/// The downstream client of one session, answering for the agent.
pub struct DownstreamClient {
    peer: Peer<RoleServer>,
    capabilities: AgentCapabilities,
    session: Weak<SessionState>,
}

impl DownstreamClient {
    /// The client that sent `request` (its `initialize`), reached through `peer`.
    pub fn new(
        peer: Peer<RoleServer>,
        request: &InitializeRequestParams,
        session: Weak<SessionState>,
    ) -> Self {
        DownstreamClient {
            peer,
            capabilities: AgentCapabilities {
                sampling: request.capabilities.sampling.is_some(),
                elicitation: request.capabilities.elicitation.is_some(),
            },
            session,
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
        let wanted = self
            .session
            .upgrade()
            .and_then(|s| *s.log_level.lock().expect("log level poisoned"));
        if wanted.is_some_and(|min| severity(message.level) < severity(min)) {
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
