//! Task handles for 2026-07-28 clients (the `io.modelcontextprotocol/tasks` extension,
//! SEP-2663). A client that declares the extension and makes a call that is slow (still
//! running after [`TASK_AFTER`]) or that asks it something gets a task handle instead
//! of waiting; it polls `tasks/get`, answers questions with `tasks/update`, and may
//! `tasks/cancel`.
//!
//! The call itself is the same one an immediate result comes from (content plugin,
//! redaction, result policy, retention): a task only changes how its outcome travels.
//! Its state lives in the registry ([`crate::registry::TaskRecord`]), not here, so any
//! replica sharing the registry answers `tasks/get`, and a gateway restarted on the
//! same registry still knows every handle it gave out. This module keeps only what
//! cannot be stored: the running call, its waiting questions, and its cancellation.
//! The replica running a call renews a lease on its row; a row whose lease ran out
//! before the call ended reads as failed. Answers and cancellations sent to another
//! replica are left in the registry and taken at the owner's next renewal.
//!
//! Every handle belongs to the agent that started it: another agent's `tasks/get`,
//! `tasks/update` or `tasks/cancel` is told the task does not exist.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolResult, CreateTaskResult, DetailedTask, GetTaskResult, InputRequests, InputResponses,
    JsonObject, Task, TaskPayload, TaskStatus,
};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::steps::{Question, SUSPENDED_FOR, Step};
use crate::registry::{Registry, RegistryError, TaskRecord};

/// How long a call of a client that takes tasks may run before it becomes a task.
pub const TASK_AFTER: Duration = Duration::from_secs(1);

/// How long a task handle is kept after it was made.
const TASK_TTL_MS: i64 = 60 * 60 * 1000;

/// How often the running replica renews its lease (and takes answers and cancellations
/// left through other replicas).
const RENEW_EVERY: Duration = Duration::from_secs(2);

/// How long a lease lasts: several renewals, so one slow registry write is no orphan.
const LEASE_MS: i64 = 15_000;

/// How often a client is asked to poll.
const POLL_INTERVAL_MS: u64 = 500;

/// A call of a client that takes tasks, moved out of its request.
pub(super) struct Running {
    /// The agent that made it.
    pub agent: String,
    /// The tool, as the client named it.
    pub tool: String,
    /// Cancels the call.
    pub cancel: CancellationToken,
    /// The call's questions and its end.
    pub steps: mpsc::Receiver<Step>,
    /// A step that already came (the question that made it a task).
    pub first: Option<Step>,
}

/// How this replica steers a task it runs.
struct Steer {
    agent: String,
    cancel: CancellationToken,
    cancelled: Arc<AtomicBool>,
    answers: mpsc::UnboundedSender<Vec<(String, Value)>>,
}

impl Steer {
    fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
        self.cancel.cancel();
    }
}

/// The task handles of one gateway process.
pub struct TaskBook {
    /// This process, as the owner of the tasks it runs.
    replica: String,
    running: Arc<Mutex<HashMap<String, Steer>>>,
}

impl Default for TaskBook {
    fn default() -> Self {
        TaskBook {
            replica: uuid::Uuid::new_v4().simple().to_string(),
            running: Arc::default(),
        }
    }
}

impl TaskBook {
    /// Makes `call` a task: stores its handle, and follows the call to its end.
    pub(super) async fn start(
        &self,
        registry: Arc<Registry>,
        call: Running,
    ) -> Result<CreateTaskResult, McpError> {
        let id = format!("airlock-task-{}", uuid::Uuid::new_v4().simple());
        let now = now_ms();
        let record = TaskRecord {
            id: id.clone(),
            agent: call.agent.clone(),
            tool: call.tool.clone(),
            status: status_name(TaskStatus::Working),
            status_message: None,
            payload: None,
            created_ms: now,
            updated_ms: now,
            ttl_ms: TASK_TTL_MS,
            replica: self.replica.clone(),
            lease_until_ms: now + LEASE_MS,
        };
        let stored = record.clone();
        if let Err(e) = blocking(&registry, move |r| r.insert_task(&stored, now)).await {
            call.cancel.cancel();
            return Err(e);
        }
        let (answers, answered) = mpsc::unbounded_channel();
        let cancelled = Arc::new(AtomicBool::new(false));
        self.running.lock().expect("tasks poisoned").insert(
            id.clone(),
            Steer {
                agent: call.agent.clone(),
                cancel: call.cancel.clone(),
                cancelled: cancelled.clone(),
                answers,
            },
        );
        let driver = Driver {
            id: id.clone(),
            replica: self.replica.clone(),
            registry,
            cancel: call.cancel.clone(),
            cancelled,
            waiting: BTreeMap::new(),
            asked: 0,
            waiting_since: None,
        };
        let running = self.running.clone();
        tokio::spawn(async move {
            driver.run(call.steps, call.first, answered).await;
            running.lock().expect("tasks poisoned").remove(&id);
        });
        Ok(CreateTaskResult::new(task_of(&record)))
    }

    /// `tasks/get`: the task as the registry has it.
    pub async fn get(
        &self,
        registry: Arc<Registry>,
        agent: &str,
        id: &str,
    ) -> Result<GetTaskResult, McpError> {
        let record = find(&registry, agent, id).await?;
        Ok(GetTaskResult::new(detailed(&record)?))
    }

    /// `tasks/update`: answers to the task's questions, handed to the call when it runs
    /// here, else left for the replica that runs it. Answers to questions the task is
    /// not waiting on are ignored.
    pub async fn update(
        &self,
        registry: Arc<Registry>,
        agent: &str,
        id: &str,
        responses: InputResponses,
    ) -> Result<(), McpError> {
        let answers: Vec<(String, Value)> = responses.into_iter().collect();
        {
            let running = self.running.lock().expect("tasks poisoned");
            if let Some(steer) = running.get(id).filter(|s| s.agent == agent) {
                let _ = steer.answers.send(answers);
                return Ok(());
            }
        }
        let stored: Vec<(String, String)> = answers
            .iter()
            .map(|(key, value)| (key.clone(), value.to_string()))
            .collect();
        let (id_owned, agent_owned) = (id.to_string(), agent.to_string());
        let left = blocking(&registry, move |r| {
            r.leave_task_responses(&id_owned, &agent_owned, &stored)
        })
        .await?;
        if left {
            return Ok(());
        }
        let record = find(&registry, agent, id).await?;
        Err(ended_already(&record))
    }

    /// `tasks/cancel`: cancels the call when it runs here, else asks the replica that
    /// runs it to.
    pub async fn cancel(
        &self,
        registry: Arc<Registry>,
        agent: &str,
        id: &str,
    ) -> Result<(), McpError> {
        {
            let running = self.running.lock().expect("tasks poisoned");
            if let Some(steer) = running.get(id).filter(|s| s.agent == agent) {
                steer.cancel();
                return Ok(());
            }
        }
        let (id_owned, agent_owned) = (id.to_string(), agent.to_string());
        let asked = blocking(&registry, move |r| {
            r.request_task_cancel(&id_owned, &agent_owned)
        })
        .await?;
        if asked {
            return Ok(());
        }
        let record = find(&registry, agent, id).await?;
        Err(ended_already(&record))
    }
}

/// Follows one running call, recording each change of its status.
struct Driver {
    id: String,
    replica: String,
    registry: Arc<Registry>,
    cancel: CancellationToken,
    cancelled: Arc<AtomicBool>,
    /// The questions waiting for answers, by `inputRequests` key.
    waiting: BTreeMap<String, Question>,
    /// How many questions were asked (keys are unique over the task's life).
    asked: u64,
    /// Since when the oldest unanswered question waits.
    waiting_since: Option<Instant>,
}

/// What wakes a driver (one at a time, on its stack; never queued).
#[allow(clippy::large_enum_variant)]
enum Wake {
    Step(Option<Step>),
    Answers(Vec<(String, Value)>),
    Renew,
}

impl Driver {
    async fn run(
        mut self,
        mut steps: mpsc::Receiver<Step>,
        first: Option<Step>,
        mut answers: mpsc::UnboundedReceiver<Vec<(String, Value)>>,
    ) {
        let mut renew = tokio::time::interval(RENEW_EVERY);
        renew.tick().await;
        let mut next = first.map(|step| Wake::Step(Some(step)));
        loop {
            let wake = match next.take() {
                Some(wake) => wake,
                None => tokio::select! {
                    step = steps.recv() => Wake::Step(step),
                    Some(batch) = answers.recv() => Wake::Answers(batch),
                    _ = renew.tick() => Wake::Renew,
                },
            };
            match wake {
                Wake::Step(Some(Step::Asked(question))) => {
                    self.asked += 1;
                    let key = format!("airlock-question-{}", self.asked);
                    self.waiting.insert(key, question);
                    self.waiting_since.get_or_insert_with(Instant::now);
                    self.record_waiting().await;
                }
                Wake::Step(Some(Step::Done(result))) => return self.finish(Ok(result)).await,
                Wake::Step(None) => {
                    return self.finish(Err("the call ended without a result")).await;
                }
                Wake::Answers(batch) => self.answer(batch).await,
                Wake::Renew => self.renew().await,
            }
        }
    }

    /// Hands answers to the questions they name.
    async fn answer(&mut self, batch: Vec<(String, Value)>) {
        let mut answered = false;
        for (key, value) in batch {
            if let Some(question) = self.waiting.remove(&key) {
                question.answer(Some(value));
                answered = true;
            }
        }
        if answered {
            if self.waiting.is_empty() {
                self.waiting_since = None;
            }
            self.record_waiting().await;
        }
    }

    /// Renews the lease; takes answers and a cancellation left through other replicas;
    /// cancels a call whose question waited too long.
    async fn renew(&mut self) {
        let (id, replica) = (self.id.clone(), self.replica.clone());
        let until = now_ms() + LEASE_MS;
        match blocking(&self.registry, move |r| r.renew_task(&id, &replica, until)).await {
            Ok(signals) => {
                if signals.cancel_requested {
                    self.cancelled.store(true, Ordering::SeqCst);
                    self.cancel.cancel();
                }
                let batch = signals
                    .responses
                    .into_iter()
                    .map(|(key, value)| {
                        let value = serde_json::from_str(&value).unwrap_or(Value::Null);
                        (key, value)
                    })
                    .collect::<Vec<_>>();
                if !batch.is_empty() {
                    self.answer(batch).await;
                }
            }
            Err(e) => {
                tracing::warn!(task = %self.id, "cannot renew the task's lease: {}", e.message)
            }
        }
        if self
            .waiting_since
            .is_some_and(|t| t.elapsed() > SUSPENDED_FOR)
        {
            tracing::info!(task = %self.id, "no answer in time: the task's call is cancelled");
            self.cancel.cancel();
        }
    }

    /// Records `input_required` with the waiting questions, or `working` when none is.
    async fn record_waiting(&self) {
        if self.waiting.is_empty() {
            return self.record(TaskStatus::Working, None, None).await;
        }
        let requests: InputRequests = self
            .waiting
            .iter()
            .map(|(key, question)| (key.clone(), question.request()))
            .collect();
        let payload = json!({"inputRequests": requests});
        self.record(TaskStatus::InputRequired, None, Some(payload))
            .await;
    }

    /// Records the call's end: completed with its result (a tool error included),
    /// cancelled, or failed.
    async fn finish(self, outcome: Result<CallToolResult, &str>) {
        if self.cancelled.load(Ordering::SeqCst) {
            let message = Some("cancelled by its client".to_string());
            return self.record(TaskStatus::Cancelled, message, None).await;
        }
        match outcome.map(|result| super::wire::wire_of(&result)) {
            Ok(Value::Object(mut result)) => {
                result.insert("resultType".into(), json!("complete"));
                let payload = json!({"result": result});
                self.record(TaskStatus::Completed, None, Some(payload))
                    .await
            }
            Ok(_) => self.fail("the result cannot be encoded").await,
            Err(why) => self.fail(why).await,
        }
    }

    async fn fail(&self, why: &str) {
        let payload = json!({"error": {"code": -32603, "message": why}});
        self.record(TaskStatus::Failed, Some(why.to_string()), Some(payload))
            .await
    }

    async fn record(&self, status: TaskStatus, message: Option<String>, payload: Option<Value>) {
        let (id, replica) = (self.id.clone(), self.replica.clone());
        let status = status_name(status);
        let payload = payload.map(|p| p.to_string());
        let now = now_ms();
        let stored = blocking(&self.registry, move |r| {
            r.set_task_status(
                &id,
                &replica,
                &status,
                message.as_deref(),
                payload.as_deref(),
                now,
            )
        })
        .await;
        if let Err(e) = stored {
            tracing::warn!(task = %self.id, "cannot record the task's status: {}", e.message);
        }
    }
}

/// `agent`'s task `id`, or the error that says there is none.
async fn find(registry: &Arc<Registry>, agent: &str, id: &str) -> Result<TaskRecord, McpError> {
    let orphan = json!({"error": {
        "code": -32603,
        "message": "the gateway replica running this task stopped before it finished; call the tool again",
    }})
    .to_string();
    let (id_owned, agent_owned) = (id.to_string(), agent.to_string());
    let now = now_ms();
    blocking(registry, move |r| {
        r.task(&id_owned, &agent_owned, now, &orphan)
    })
    .await?
    .ok_or_else(|| {
        McpError::invalid_params(
            format!(
                "no task {id} here: it expired, or it belongs to another agent; call the tool again"
            ),
            None,
        )
    })
}

fn ended_already(record: &TaskRecord) -> McpError {
    McpError::invalid_params(
        format!("task {} has already ended ({})", record.id, record.status),
        None,
    )
}

/// The handle's base fields.
fn task_of(record: &TaskRecord) -> Task {
    let mut task = Task::new(
        &record.id,
        parse_status(&record.status),
        timestamp(record.created_ms),
        timestamp(record.updated_ms),
    )
    .with_ttl_ms(record.ttl_ms.max(0) as u64)
    .with_poll_interval_ms(POLL_INTERVAL_MS);
    task.status_message = record.status_message.clone();
    task
}

/// The task with its status's payload, as `tasks/get` answers it.
fn detailed(record: &TaskRecord) -> Result<DetailedTask, McpError> {
    let payload: JsonObject = match &record.payload {
        Some(text) => serde_json::from_str(text).map_err(|e| {
            McpError::internal_error(
                format!("task {} is stored unreadably: {e}", record.id),
                None,
            )
        })?,
        None => JsonObject::new(),
    };
    let object = |key: &str| payload.get(key).and_then(Value::as_object).cloned();
    let unreadable =
        |what: &str| McpError::internal_error(format!("task {} has no {what}", record.id), None);
    let payload = match parse_status(&record.status) {
        TaskStatus::InputRequired => TaskPayload::InputRequired {
            input_requests: serde_json::from_value(
                payload.get("inputRequests").cloned().unwrap_or_default(),
            )
            .map_err(|_| unreadable("readable inputRequests"))?,
        },
        TaskStatus::Completed => TaskPayload::Completed {
            result: object("result").ok_or_else(|| unreadable("result"))?,
        },
        TaskStatus::Failed => TaskPayload::Failed {
            error: object("error").ok_or_else(|| unreadable("error"))?,
        },
        TaskStatus::Cancelled => TaskPayload::Cancelled,
        _ => TaskPayload::Working,
    };
    Ok(DetailedTask::new(task_of(record), payload))
}

fn status_name(status: TaskStatus) -> String {
    serde_json::to_value(status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| "working".to_string())
}

fn parse_status(name: &str) -> TaskStatus {
    serde_json::from_value(Value::from(name)).unwrap_or_default()
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default()
}

/// Unix milliseconds as an ISO 8601 timestamp.
fn timestamp(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Runs a registry job off the async runtime's threads.
async fn blocking<T: Send + 'static>(
    registry: &Arc<Registry>,
    job: impl FnOnce(&Registry) -> Result<T, RegistryError> + Send + 'static,
) -> Result<T, McpError> {
    let registry = registry.clone();
    match tokio::task::spawn_blocking(move || job(&registry)).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(McpError::internal_error(
            format!("the task registry failed: {e}"),
            None,
        )),
        Err(e) => Err(McpError::internal_error(
            format!("the task registry job stopped: {e}"),
            None,
        )),
    }
}
