//! The upstream stage: the service's limits admit the call, the agent's session is
//! found or opened, and `tools/call` goes to the server with the call's timeout,
//! cancellation, trace context and asker; the server's progress is counted, passed to
//! the caller and published, in order with the result.

use std::sync::Arc;

use serde_json::{Map, Value};
use tokio::sync::mpsc;

use super::options::CallOptions;
use super::resolve::Resolved;
use crate::airlock::agents::Agents;
use crate::airlock::services::{Refusal, Services};
use crate::error::{CallError, ErrorCode};
use crate::events::{Event, EventBus};
use crate::mcp::ToolResult;
use crate::session::{CallControl, ProgressUpdate, Session, TraceContext};
use crate::telemetry::CallTrace;

/// What the server answered.
pub(super) struct Reply {
    /// Its result, as it sent it.
    pub(super) result: ToolResult,
    /// Set when an earlier cancelled call on the session never answered.
    pub(super) warning: Option<String>,
    /// Progress notifications seen.
    pub(super) progress_seen: usize,
}

/// Sends calls to their servers.
pub(super) struct Upstream {
    pub(super) services: Arc<Services>,
    pub(super) agents: Arc<Agents>,
    pub(super) events: EventBus,
}

impl Upstream {
    /// Sends the call to its server and waits for its answer (or its end).
    pub(super) async fn send(
        &self,
        found: &Resolved,
        arguments: Map<String, Value>,
        options: &CallOptions,
        trace: &CallTrace,
    ) -> Result<Reply, CallError> {
        let (tool, service) = (&found.tool, &found.service);
        // The service's limits: a slot among its calls in flight, held to the end, and
        // the rates' tokens. A refused call never reaches the server.
        let mut permit = Some(service.guard.admit(&options.agent)?);
        let opened = trace
            .timed(
                "session",
                self.services.open_reporting(&options.agent, &tool.service),
            )
            .await;
        let live = match opened {
            Ok(live) => live,
            Err(Refusal::Failed(e)) => return Err(e),
            Err(Refusal::ThisAgent(refused)) => {
                // Signing in takes a person: the call holds no slot of the service
                // meanwhile, and is admitted again once the session is open.
                permit.take();
                let live = self
                    .services
                    .sign_in_then_open(
                        &options.agent,
                        &tool.service,
                        refused,
                        options.asker.as_ref(),
                        options.cancel.as_ref(),
                    )
                    .await?;
                permit = Some(service.guard.admit(&options.agent)?);
                live
            }
        };
        let _permit = permit;

        // Progress: count it, pass it to the caller, and publish it as events. Drained
        // in this task, beside the call (no task of its own, so no wake-up of another
        // worker per call); it ends when the call has returned and dropped its sender.
        let (tx, mut rx) = mpsc::unbounded_channel::<ProgressUpdate>();
        let forward = async {
            let caller = options.progress.as_ref();
            let mut seen = 0usize;
            while let Some(mut update) = rx.recv().await {
                seen += 1;
                // A progress message leaves Airlock: it passes the egress rule.
                if let Some(message) = update.message.take() {
                    update.message = Some(self.services.redact_text(&tool.service, &message).await);
                }
                self.events.emit_with(|| Event::Progress {
                    agent: options.agent.clone(),
                    service: tool.service.clone(),
                    tool: tool.name.clone(),
                    progress: update.progress,
                    total: update.total,
                    message: update.message.clone(),
                });
                if let Some(caller) = caller {
                    let _ = caller.send(update);
                }
            }
            seen
        };
        // The request to the server: its span's context goes with it (in `_meta`, and as
        // the `traceparent` header over HTTP), so the server's spans join this trace.
        let mut upstream = trace.stage("upstream");
        if upstream.recorded() {
            upstream.set_str("otel.name", &format!("tools/call {}", tool.raw_name));
            upstream.set_str("otel.kind", "client");
            upstream.set_str("mcp.method.name", "tools/call");
            upstream.set_str("gen_ai.tool.name", &tool.raw_name);
            upstream.set_str("airlock.service", &tool.service);
        }
        let context = upstream
            .context()
            .map(|(parent, state)| TraceContext::own(parent, state))
            .or_else(|| options.trace.clone());
        let control = CallControl {
            timeout: Some(options.timeout.unwrap_or(service.config.tool_timeout)),
            cancel: options.cancel.clone(),
            progress: Some(tx),
            trace: context,
            // A URL the server sends the user to passes the service's policy first (its
            // decision a stage of this call).
            asker: options.asker.clone().map(|asker| {
                self.agents
                    .policed(asker, &options.agent, Some(&tool.raw_name), trace.clone())
            }),
        };
        let call = async {
            let session: &Session = &live.session;
            let reply = session.call_tool(&tool.raw_name, arguments, control).await;
            drop(live);
            upstream.done();
            reply
        };
        let (reply, progress_seen) = tokio::join!(call, forward);
        // A transport that closed under the call counts toward the breaker; the call is
        // not sent again (the server may have started it).
        match reply {
            Ok(reply) => {
                service.guard.record_success();
                Ok(Reply {
                    result: reply.result,
                    warning: reply.warning,
                    progress_seen,
                })
            }
            Err(e) => {
                if e.code == ErrorCode::ServiceUnavailable {
                    service.guard.record_failure();
                }
                Err(self.services.redact_error(&tool.service, e).await)
            }
        }
    }
}
