//! Multi round-trip input (SEP-2322): a 2026-07-28 server that needs something from the
//! user mid-request answers `input_required` (elicitations, sampling, roots, and an
//! opaque `requestState`) instead of sending requests of its own. The session answers
//! each question through the agent's client — the same path a handshake-era server's
//! `elicitation/create` takes, scrubbed of the service's secrets on the way — and sends
//! the request again with the answers and the untouched state, for a bounded number of
//! rounds.

use rmcp::model::{ClientRequest, InputRequest, InputRequiredResult, InputResponses, ServerResult};
use serde_json::Value;

use std::sync::Arc;

use super::{AgentClient, AirlockClient};
use crate::error::{CallError, ErrorCode};

/// How many rounds of questions one request may take: the server's next
/// `input_required` after that many is not answered, and the request is refused (a
/// server that keeps asking is not followed forever).
pub const MAX_INPUT_ROUNDS: usize = 8;

/// What a server's answer to one round means for the request.
pub(super) enum Round {
    /// The request is done: the server's result.
    Done(ServerResult),
    /// The server asked for input; the request goes out again as this.
    Again(ClientRequest),
}

impl AirlockClient {
    /// Reads one round's answer to `request` (a `tools/call`, `prompts/get` or
    /// `resources/read`): a result ends it; `input_required` is answered and becomes the
    /// next round's request, with the answers and the server's `requestState`.
    pub(super) async fn next_round(
        &self,
        mut request: ClientRequest,
        answer: ServerResult,
        what: &str,
        own: Option<&Arc<dyn AgentClient>>,
    ) -> Result<Round, CallError> {
        let ServerResult::InputRequiredResult(asked) = answer else {
            return Ok(Round::Done(answer));
        };
        let (responses, state) = self.answer_inputs(asked, what, own).await?;
        let slots = match &mut request {
            ClientRequest::CallToolRequest(r) => {
                (&mut r.params.input_responses, &mut r.params.request_state)
            }
            ClientRequest::GetPromptRequest(r) => {
                (&mut r.params.input_responses, &mut r.params.request_state)
            }
            ClientRequest::ReadResourceRequest(r) => {
                (&mut r.params.input_responses, &mut r.params.request_state)
            }
            _ => {
                return Err(CallError::new(
                    ErrorCode::ToolError,
                    format!(
                        "the server answered \"{what}\" with input_required, which that request cannot take"
                    ),
                ));
            }
        };
        *slots.0 = responses;
        *slots.1 = state;
        Ok(Round::Again(request))
    }

    /// Answers every question of one `input_required` result through the agent's client.
    /// A question the agent's client cannot answer fails the request with a message
    /// naming what was asked.
    pub(super) async fn answer_inputs(
        &self,
        asked: InputRequiredResult,
        what: &str,
        own: Option<&Arc<dyn AgentClient>>,
    ) -> Result<(Option<InputResponses>, Option<String>), CallError> {
        let requests = asked.input_requests.unwrap_or_default();
        if requests.is_empty() && asked.request_state.is_none() {
            return Err(CallError::new(
                ErrorCode::ToolError,
                format!(
                    "the server answered \"{what}\" with input_required but asked nothing and kept no state"
                ),
            ));
        }
        let mut responses = InputResponses::new();
        for (key, request) in requests {
            let answer = self.answer_input(request, own).await.map_err(|e| {
                CallError::new(
                    ErrorCode::ToolError,
                    format!(
                        "the server asked for input during \"{what}\" and it could not be given: {}",
                        e.message
                    ),
                )
            })?;
            responses.insert(key, answer);
        }
        let responses = (!responses.is_empty()).then_some(responses);
        Ok((responses, asked.request_state))
    }

    async fn answer_input(
        &self,
        request: InputRequest,
        own: Option<&Arc<dyn AgentClient>>,
    ) -> Result<Value, rmcp::ErrorData> {
        let value = match request {
            InputRequest::Elicitation(r) => {
                serde_json::to_value(self.answer_elicitation(r.params, own).await?)
            }
            InputRequest::CreateMessage(r) => {
                serde_json::to_value(self.answer_sampling(r.params, own).await?)
            }
            InputRequest::ListRoots(_) => serde_json::to_value(self.roots_result()),
            _ => {
                return Err(rmcp::ErrorData::invalid_request(
                    "a kind of input request Airlock does not know",
                    None,
                ));
            }
        };
        value.map_err(|e| rmcp::ErrorData::internal_error(e.to_string(), None))
    }
}

/// Whether a server's answer asks for input.
pub(super) fn asks(answer: &ServerResult) -> bool {
    matches!(answer, ServerResult::InputRequiredResult(_))
}

/// The refusal of a request whose server kept asking for input.
pub(super) fn too_many_rounds(what: &str) -> CallError {
    CallError::new(
        ErrorCode::ToolError,
        format!(
            "the server asked for input {MAX_INPUT_ROUNDS} times during \"{what}\" without finishing; Airlock stopped the request"
        ),
    )
}
