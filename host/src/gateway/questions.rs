//! Questions for a 2026-07-28 client. Such a client holds no session that the gateway
//! could send an `elicitation/create` or `sampling/createMessage` on; when a server asks
//! during its call, the call answers `input_required` with the question, and the client
//! sends the call again with its answer (SEP-2322).
//!
//! The upstream call stays open meanwhile, whichever era its server speaks: it runs in a
//! task of its own with a per-call [`Asker`] that hands each question (already scrubbed
//! of the service's secrets by the session) to the request in flight and waits for the
//! answer the retry brings. The `requestState` is an unguessable id of the suspended
//! call, honoured only for the agent that started it; a call left waiting longer than
//! [`SUSPENDED_FOR`] is cancelled. The call lives in this process, so a retry must reach
//! the same replica (only calls that ask need that affinity).
//!
//! A client that declares the tasks extension is not asked this way: a call of its that
//! asks, or runs longer than [`super::tasks::TASK_AFTER`], becomes a task
//! ([`super::tasks`]), whose questions wait in the task for `tasks/update`.

// Sampling and elicitation are deprecated in the 2026 drafts (SEP-2577); this is where
// Airlock carries them across eras.
#![allow(deprecated)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rmcp::ErrorData as McpError;
use rmcp::RoleServer;
use rmcp::model::{
    CallToolResponse, CallToolResult, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, InputRequests, InputRequiredResult, InputResponses,
    LoggingMessageNotificationParam,
};
use rmcp::service::RequestContext;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::Gateway;
use super::own_tools::{self, Served};
use super::steps::{Question, SUSPENDED_FOR, Step};
use super::tasks::{Running, TASK_AFTER};
use crate::session::{AgentCapabilities, AgentClient, AgentFuture};

/// The prefix of Airlock's `requestState` values.
const STATE_PREFIX: &str = "airlock-q-";

/// The per-call client a 2026-07-28 caller is asked through.
struct Asker {
    can: AgentCapabilities,
    steps: mpsc::Sender<Step>,
}

impl Asker {
    fn ask<T: Send + 'static>(
        &self,
        question: impl FnOnce(oneshot::Sender<Result<T, McpError>>) -> Question,
    ) -> AgentFuture<T> {
        let (tx, rx) = oneshot::channel();
        let steps = self.steps.clone();
        let question = question(tx);
        Box::pin(async move {
            steps
                .send(Step::Asked(question))
                .await
                .map_err(|_| McpError::internal_error("the call was abandoned", None))?;
            rx.await.unwrap_or_else(|_| {
                Err(McpError::internal_error(
                    "the client did not answer the question in time",
                    None,
                ))
            })
        })
    }
}

impl AgentClient for Asker {
    fn capabilities(&self) -> AgentCapabilities {
        self.can
    }

    fn create_message(
        &self,
        _service: String,
        params: CreateMessageRequestParams,
    ) -> AgentFuture<CreateMessageResult> {
        self.ask(|tx| Question::Sample(params, tx))
    }

    fn elicit(&self, _service: String, params: ElicitRequestParams) -> AgentFuture<ElicitResult> {
        self.ask(|tx| Question::Elicit(params, tx))
    }

    fn log(&self, _service: &str, _message: LoggingMessageNotificationParam) {}
}

/// What a 2026-07-28 request says its client can answer.
pub fn caller_capabilities(ctx: &RequestContext<RoleServer>) -> AgentCapabilities {
    let declared = ctx.client_capabilities();
    AgentCapabilities {
        sampling: declared.as_ref().is_some_and(|c| c.sampling.is_some()),
        elicitation: declared.as_ref().is_some_and(|c| c.elicitation.is_some()),
        elicitation_url: declared
            .as_ref()
            .and_then(|c| c.elicitation.as_ref())
            .is_some_and(|e| e.url.is_some()),
    }
}

/// A call waiting for its client's answer.
struct Suspended {
    agent: String,
    since: Instant,
    cancel: CancellationToken,
    steps: mpsc::Receiver<Step>,
    /// The question asked, under its `inputRequests` key.
    waiting: Option<(String, Question)>,
}

/// The calls of 2026-07-28 clients waiting for answers, by `requestState`.
#[derive(Default)]
pub struct QuestionBook {
    suspended: Mutex<HashMap<String, Suspended>>,
}

impl QuestionBook {
    /// Runs a 2026-07-28 client's `tools/call`: its result, or `input_required` when a
    /// server asks something first.
    pub async fn call(
        &self,
        gateway: Arc<Gateway>,
        agent: String,
        name: String,
        arguments: Value,
        ctx: &RequestContext<RoleServer>,
    ) -> CallToolResponse {
        let (tx, steps) = mpsc::channel(4);
        let asker: Arc<dyn AgentClient> = Arc::new(Asker {
            can: caller_capabilities(ctx),
            steps: tx.clone(),
        });
        let cancel = CancellationToken::new();
        // The call outlives this request when it asks: it gets its own cancellation.
        let mut call_ctx = ctx.clone();
        call_ctx.ct = cancel.clone();
        let call_agent = agent.clone();
        let request_name = name.clone();
        let registry = gateway.airlock.registry();
        let tasks = gateway.tasks.clone();
        let mut call = Box::pin(async move {
            let served = Served {
                airlock: &gateway.airlock,
                options: &gateway.options,
                asker: Some(asker),
            };
            own_tools::call(&served, &call_agent, &name, arguments, &call_ctx).await
        });
        let mut steps = steps;
        // A client that takes tasks gets a task handle for a call that is slow.
        let takes_tasks = ctx
            .client_capabilities()
            .is_some_and(|c| c.supports_tasks());
        let slow = async {
            if takes_tasks {
                tokio::time::sleep(TASK_AFTER).await
            } else {
                std::future::pending().await
            }
        };
        // Most calls ask nothing: they run here, in this request's task. The first
        // question (or, for a client that takes tasks, the call's first second) moves
        // the call to a task of its own, to outlive this request.
        let asked = tokio::select! {
            result = &mut call => return CallToolResponse::Complete(result),
            _ = ctx.ct.cancelled() => {
                // The call sends the server its cancellation and ends.
                cancel.cancel();
                return CallToolResponse::Complete(call.await);
            }
            step = steps.recv() => step,
            _ = slow => None,
        };
        tokio::spawn(async move {
            let result = call.await;
            let _ = tx.send(Step::Done(result)).await;
        });
        if takes_tasks {
            let running = Running {
                agent,
                tool: request_name,
                cancel,
                steps,
                first: asked,
            };
            return match tasks.start(registry, running).await {
                Ok(handle) => CallToolResponse::Task(handle),
                Err(e) => CallToolResponse::Complete(ended(&e.message)),
            };
        }
        let suspended = Suspended {
            agent,
            since: Instant::now(),
            cancel,
            steps,
            waiting: None,
        };
        match asked {
            Some(Step::Asked(question)) => self.suspend(suspended, question),
            Some(Step::Done(result)) => CallToolResponse::Complete(result),
            None => {
                suspended.cancel.cancel();
                CallToolResponse::Complete(ended("the call ended without a result"))
            }
        }
    }

    /// Resumes a suspended call with the client's answers (`requestState` = `state`).
    pub async fn resume(
        &self,
        agent: &str,
        state: &str,
        mut responses: InputResponses,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let unknown = || {
            McpError::invalid_params(
                "requestState names no call waiting for an answer here (it expired, was answered already, or belongs to another agent); call the tool again",
                None,
            )
        };
        let mut suspended = {
            let mut book = self.suspended.lock().expect("question book poisoned");
            match book.get(state) {
                Some(s) if s.agent == agent => book.remove(state).ok_or_else(unknown)?,
                _ => return Err(unknown()),
            }
        };
        if let Some((key, question)) = suspended.waiting.take() {
            question.answer(responses.remove(&key));
        }
        Ok(self.next(suspended, &ctx.ct).await)
    }

    /// Waits for the call's next step: its result, or its next question (then it is
    /// kept until the client answers).
    async fn next(&self, mut call: Suspended, request: &CancellationToken) -> CallToolResponse {
        let step = tokio::select! {
            step = call.steps.recv() => step,
            _ = request.cancelled() => {
                call.cancel.cancel();
                return CallToolResponse::Complete(ended("the client cancelled the request"));
            }
        };
        match step {
            Some(Step::Done(result)) => CallToolResponse::Complete(result),
            Some(Step::Asked(question)) => self.suspend(call, question),
            None => CallToolResponse::Complete(ended("the call ended without a result")),
        }
    }

    /// Keeps `call` until its client answers `question`, which goes out as
    /// `input_required`.
    fn suspend(&self, mut call: Suspended, question: Question) -> CallToolResponse {
        let key = "airlock-question".to_string();
        let requests: InputRequests = [(key.clone(), question.request())].into();
        let state = format!("{STATE_PREFIX}{}", uuid::Uuid::new_v4().simple());
        call.waiting = Some((key, question));
        call.since = Instant::now();
        self.keep(state.clone(), call);
        CallToolResponse::InputRequired(InputRequiredResult::new(Some(requests), Some(state)))
    }

    /// Keeps a suspended call, cancelling those that waited too long.
    fn keep(&self, state: String, call: Suspended) {
        let mut book = self.suspended.lock().expect("question book poisoned");
        book.retain(|_, waiting| {
            let fresh = waiting.since.elapsed() < SUSPENDED_FOR;
            if !fresh {
                waiting.cancel.cancel();
            }
            fresh
        });
        book.insert(state, call);
    }
}

/// A call that ended without its result, as a tool error.
pub(super) fn ended(why: &str) -> CallToolResult {
    let mut result = CallToolResult::error(vec![rmcp::model::ContentBlock::text(why)]);
    result.is_error = Some(true);
    result
}
