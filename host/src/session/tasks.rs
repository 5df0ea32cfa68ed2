//! Tasks from a server (the `io.modelcontextprotocol/tasks` extension, SEP-2663): a
//! `tools/call` answered with a task handle is followed to its end. Airlock polls
//! `tasks/get` at the interval the server suggests (kept between 50 ms and 5 s), within
//! the call's timeout and cancellation; at either it sends `tasks/cancel`. A task that
//! needs input has its questions answered as an `input_required` result's are, through
//! `tasks/update`. The completed task's result is the call's result, and it goes on
//! through the content plugin, redaction and retention like any other.

use std::sync::Arc;
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::{
    CancelTaskParams, CreateTaskResult, GetTaskParams, InputRequiredResult, TaskPayload,
    UpdateTaskParams,
};
use rmcp::service::Peer;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::errors::{cancelled, service_error, timed_out, until};
use super::{AgentClient, AirlockClient};
use crate::error::{CallError, ErrorCode};

/// How a followed task is polled.
pub(super) struct Follow<'a> {
    pub peer: &'a Peer<RoleClient>,
    pub client: &'a AirlockClient,
    pub asker: Option<&'a Arc<dyn AgentClient>>,
    pub deadline: Option<tokio::time::Instant>,
    pub timeout: Option<Duration>,
    pub cancel: &'a CancellationToken,
    pub tool: &'a str,
}

/// The interval to poll at, from the server's suggestion.
fn interval(suggested_ms: Option<u64>) -> Duration {
    Duration::from_millis(suggested_ms.unwrap_or(500).clamp(50, 5_000))
}

impl Follow<'_> {
    /// Follows `created` to its end; its completed result, as MCP JSON.
    pub(super) async fn run(&self, created: CreateTaskResult) -> Result<Value, CallError> {
        let id = created.task.task_id.clone();
        let mut wait = interval(created.task.poll_interval_ms);
        loop {
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = until(self.deadline) => {
                    self.abandon(&id).await;
                    return Err(timed_out(self.tool, self.timeout));
                }
                _ = self.cancel.cancelled() => {
                    self.abandon(&id).await;
                    return Err(cancelled(self.tool));
                }
            }
            let got = self
                .peer
                .get_task(GetTaskParams::new(id.clone()))
                .await
                .map_err(|e| service_error(e, self.tool))?;
            wait = interval(got.task.task.poll_interval_ms);
            match got.task.payload {
                TaskPayload::Completed { result } => return Ok(Value::Object(result)),
                TaskPayload::Failed { error } => {
                    let message = error
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("no message");
                    return Err(CallError::new(
                        ErrorCode::ToolError,
                        format!(
                            "the server's task for \"{}\" failed: {}",
                            self.tool,
                            self.client.scrub(message)
                        ),
                    ));
                }
                TaskPayload::Cancelled => {
                    return Err(CallError::new(
                        ErrorCode::Cancelled,
                        format!("the server cancelled its task for \"{}\"", self.tool),
                    ));
                }
                TaskPayload::InputRequired { input_requests } => {
                    let asked = InputRequiredResult::new(Some(input_requests), None);
                    let (responses, _) = self
                        .client
                        .answer_inputs(asked, self.tool, self.asker)
                        .await?;
                    let update = UpdateTaskParams::new(id.clone(), responses.unwrap_or_default());
                    self.peer
                        .update_task(update)
                        .await
                        .map_err(|e| service_error(e, self.tool))?;
                }
                _ => {}
            }
        }
    }

    /// Tells the server the task is no longer wanted.
    async fn abandon(&self, id: &str) {
        let cancel = self.peer.cancel_task(CancelTaskParams::new(id.to_string()));
        let _ = tokio::time::timeout(Duration::from_secs(2), cancel).await;
    }
}
