//! What a call running in a task of its own tells the request (or the task) waiting on
//! it: a server's [`Question`] to pass on, or the end. Shared by the 2026-07-28 question
//! path ([`super::questions`]) and task handles ([`super::tasks`]).

// Sampling and elicitation are deprecated in the 2026 drafts (SEP-2577); this is where
// Airlock carries them across eras.
#![allow(deprecated)]

use std::time::Duration;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolResult, CreateMessageRequest, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequest, ElicitRequestParams, ElicitResult, InputRequest,
};
use serde_json::Value;
use tokio::sync::oneshot;

/// How long a call may wait for its client's answer.
pub const SUSPENDED_FOR: Duration = Duration::from_secs(10 * 60);

/// What the call task tells the request waiting on it.
pub(super) enum Step {
    /// A server asked something; the answer goes back on the sender.
    Asked(Question),
    /// The call is over.
    Done(CallToolResult),
}

/// A server's question, and where its answer goes.
pub(super) enum Question {
    Elicit(
        ElicitRequestParams,
        oneshot::Sender<Result<ElicitResult, McpError>>,
    ),
    Sample(
        CreateMessageRequestParams,
        oneshot::Sender<Result<CreateMessageResult, McpError>>,
    ),
}

impl Question {
    /// The question as one entry of `inputRequests`.
    pub(super) fn request(&self) -> InputRequest {
        match self {
            Question::Elicit(params, _) => {
                InputRequest::Elicitation(ElicitRequest::new(params.clone()))
            }
            Question::Sample(params, _) => {
                InputRequest::CreateMessage(CreateMessageRequest::new(params.clone()))
            }
        }
    }

    /// Hands the client's answer (or its absence) to the waiting server.
    pub(super) fn answer(self, answer: Option<Value>) {
        match self {
            Question::Elicit(_, tx) => {
                let _ = tx.send(parse_answer(answer));
            }
            Question::Sample(_, tx) => {
                let _ = tx.send(parse_answer(answer));
            }
        }
    }
}

/// The client's answer to a question, as the type the question expects.
fn parse_answer<T: serde::de::DeserializeOwned>(answer: Option<Value>) -> Result<T, McpError> {
    let answer = answer.ok_or_else(|| {
        McpError::invalid_params("the client sent no answer to the question", None)
    })?;
    serde_json::from_value(answer).map_err(|e| {
        McpError::invalid_params(format!("the client's answer is not valid: {e}"), None)
    })
}
