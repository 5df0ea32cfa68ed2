//! The calls the console shows: a bounded log of recent calls and policy decisions,
//! kept from Airlock's event stream, and the live feed (server-sent events) that sends
//! each call's row again whenever it changes (started, progress, finished).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures::Stream;
use tokio::sync::broadcast;

use super::view::CallRow;
use super::{ConsoleState, pages};
use crate::Airlock;
use crate::events::Event;

/// Calls kept for the calls page.
const MAX_CALLS: usize = 500;
/// Policy decisions kept for the grants and policy page.
const MAX_DECISIONS: usize = 200;

/// One policy decision.
#[derive(Debug, Clone)]
pub(crate) struct DecisionRow {
    pub at: u64,
    pub agent: String,
    pub service: String,
    pub tool: String,
    pub plugin: String,
    pub rule: String,
    pub decision: String,
    pub reason: Option<String>,
    pub mode: String,
}

#[derive(Default)]
struct Log {
    next_id: u64,
    calls: VecDeque<CallRow>,
    decisions: VecDeque<DecisionRow>,
}

/// The console's record of recent calls, fed by a task reading Airlock's events.
pub(super) struct CallLog {
    log: Arc<Mutex<Log>>,
    /// Each changed row, rendered (for the live feed).
    changed: broadcast::Sender<Arc<str>>,
    reader: tokio::task::JoinHandle<()>,
}

impl Drop for CallLog {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Log {
    /// The latest running call of (agent, service, tool): events of one call arrive in
    /// order, and concurrent calls of the same tool by the same agent are told apart
    /// only by order.
    fn running(&mut self, agent: &str, service: &str, tool: &str) -> Option<&mut CallRow> {
        self.calls.iter_mut().rev().find(|c| {
            c.status == "running" && c.agent == agent && c.service == service && c.tool == tool
        })
    }

    /// Applies one event; returns the row it changed.
    fn apply(&mut self, event: Event) -> Option<CallRow> {
        match event {
            Event::CallStarted {
                agent,
                service,
                tool,
            } => {
                self.next_id += 1;
                let row = CallRow {
                    id: self.next_id,
                    started: now(),
                    agent,
                    service,
                    tool,
                    status: "running".into(),
                    elapsed_ms: None,
                    progress: None,
                    message: None,
                    size: None,
                    redacted: false,
                    output_id: None,
                };
                if self.calls.len() == MAX_CALLS {
                    self.calls.pop_front();
                }
                self.calls.push_back(row.clone());
                Some(row)
            }
            Event::Progress {
                agent,
                service,
                tool,
                progress,
                total,
                message,
            } => {
                let row = self.running(&agent, &service, &tool)?;
                row.progress = Some((progress, total));
                if message.is_some() {
                    row.message = message;
                }
                Some(row.clone())
            }
            Event::ToolCalled {
                agent,
                service,
                tool,
                status,
                elapsed_ms,
                size,
                redacted,
                output_id,
                ..
            } => {
                let row = self.running(&agent, &service, &tool)?;
                row.status = status.to_string();
                row.elapsed_ms = Some(elapsed_ms);
                row.size = size;
                row.redacted = redacted;
                row.output_id = output_id;
                Some(row.clone())
            }
            Event::PolicyDecided {
                agent,
                service,
                tool,
                plugin,
                rule,
                decision,
                reason,
                mode,
            } => {
                if self.decisions.len() == MAX_DECISIONS {
                    self.decisions.pop_front();
                }
                self.decisions.push_back(DecisionRow {
                    at: now(),
                    agent,
                    service,
                    tool,
                    plugin,
                    rule,
                    decision,
                    reason,
                    mode,
                });
                None
            }
            _ => None,
        }
    }
}

impl CallLog {
    /// Starts recording `airlock`'s calls.
    pub(super) fn start(airlock: &Airlock) -> CallLog {
        let log = Arc::new(Mutex::new(Log::default()));
        let (changed, _) = broadcast::channel(256);
        let mut events = airlock.events();
        let (writer, sender) = (log.clone(), changed.clone());
        let reader = tokio::spawn(async move {
            loop {
                let event = match events.recv().await {
                    Ok(event) => event,
                    Err(broadcast::error::RecvError::Lagged(missed)) => {
                        tracing::warn!("the console missed {missed} events (too many at once)");
                        continue;
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                };
                let row = writer.lock().expect("call log poisoned").apply(event);
                if let Some(row) = row
                    && sender.receiver_count() > 0
                {
                    let html = pages::call_row(&row).into_string();
                    let message = serde_json::json!({"id": row.id, "html": html}).to_string();
                    let _ = sender.send(message.into());
                }
            }
        });
        CallLog {
            log,
            changed,
            reader,
        }
    }

    /// The recent calls, newest first.
    pub(super) fn calls(&self) -> Vec<CallRow> {
        let log = self.log.lock().expect("call log poisoned");
        log.calls.iter().rev().cloned().collect()
    }

    /// The recent policy decisions, newest first.
    pub(super) fn decisions(&self) -> Vec<DecisionRow> {
        let log = self.log.lock().expect("call log poisoned");
        log.decisions.iter().rev().cloned().collect()
    }

    /// The agents seen making calls.
    pub(super) fn agents(&self) -> Vec<String> {
        let log = self.log.lock().expect("call log poisoned");
        log.calls.iter().map(|c| c.agent.clone()).collect()
    }
}

/// `GET /console/feed`: every changed call row, as `{"id": N, "html": "<tr…>"}`.
pub(super) async fn stream(
    State(state): State<ConsoleState>,
) -> Sse<impl Stream<Item = Result<SseEvent, Infallible>>> {
    let updates = state.console.log.changed.subscribe();
    let stream = futures::stream::unfold(updates, |mut updates| async move {
        loop {
            match updates.recv().await {
                Ok(message) => return Some((Ok(SseEvent::default().data(&*message)), updates)),
                // A slow browser misses rows; it sees them on its next load.
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    });
    // The feed ends when the gateway shuts down, so an open page does not hold it up.
    let stream =
        futures::StreamExt::take_until(stream, state.console.shutdown.clone().cancelled_owned());
    Sse::new(stream).keep_alive(KeepAlive::default())
}
