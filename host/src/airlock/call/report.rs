//! What a call reports: its root span (one trace per call, every stage a child of it)
//! with the outcome recorded on it, and the `call_started` / `tool_called` events.

use std::time::Instant;

use tracing::field::Empty;

use super::options::CallOptions;
use super::output::CallOutput;
use crate::catalog::CatalogTool;
use crate::error::{CallError, ErrorCode};
use crate::events::{CallStatus, Event, EventBus};

/// The call's root span (or the child of the caller's context).
pub(super) fn call_span(tool: &str, options: &CallOptions) -> tracing::Span {
    let span = tracing::info_span!(
        "call",
        otel.name = %format_args!("tools/call {tool}"),
        mcp.method.name = "tools/call",
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = tool,
        airlock.agent = options.agent.as_str(),
        jsonrpc.request.id = options.request.as_ref().map(|r| r.id.as_str()),
        mcp.session.id = options.request.as_ref().and_then(|r| r.session.as_deref()),
        airlock.service = Empty,
        airlock.outcome = Empty,
        error.type = Empty,
        airlock.output_id = Empty,
        airlock.result.size = Empty,
        airlock.redactions = Empty,
        otel.status_code = Empty,
        otel.status_description = Empty,
    );
    if let Some(trace) = &options.trace {
        crate::telemetry::adopt_parent(&span, trace.traceparent(), trace.tracestate());
    }
    span
}

/// The call's outcome on its root span: `ok`, `tool_error`, or the error code (also as
/// `error.type` and an error status, with the message as its description).
pub(super) fn record_outcome(span: &tracing::Span, outcome: &Result<CallOutput, CallError>) {
    if span.is_disabled() {
        return;
    }
    match outcome {
        Ok(out) => {
            let failed = out.is_error.then_some("tool_error");
            tracing::record_all!(
                span,
                airlock.outcome = failed.unwrap_or("ok"),
                error.type = failed,
                otel.status_code = failed.map(|_| "error"),
                airlock.output_id = out.retained.output_id.as_deref(),
                airlock.result.size = out.retained.size as u64,
                airlock.redactions = out.redactions.len() as u64,
            );
        }
        Err(e) => tracing::record_all!(
            span,
            airlock.outcome = e.code.as_str(),
            error.type = e.code.as_str(),
            otel.status_code = "error",
            otel.status_description = e.message.as_str(),
        ),
    }
}

/// Sends a call's events.
pub(super) struct Report {
    pub(super) events: EventBus,
}

impl Report {
    /// The call found its tool and goes ahead.
    pub(super) fn started(&self, agent: &str, tool: &CatalogTool) {
        self.events.emit_with(|| Event::CallStarted {
            agent: agent.to_string(),
            service: tool.service.clone(),
            tool: tool.name.clone(),
        });
    }

    /// The call ended.
    pub(super) fn finished(
        &self,
        agent: &str,
        tool: &CatalogTool,
        outcome: &Result<CallOutput, CallError>,
        started: Instant,
    ) {
        let event = || match outcome {
            Ok(out) => Event::ToolCalled {
                agent: agent.to_string(),
                service: out.service.clone(),
                tool: out.tool.clone(),
                status: if out.is_error {
                    CallStatus::Failed(ErrorCode::ToolError)
                } else {
                    CallStatus::Ok
                },
                elapsed_ms: out.elapsed.as_millis() as u64,
                progress_seen: out.progress_seen,
                size: Some(out.retained.size),
                redacted: out.retained.redacted,
                output_id: out.retained.output_id.clone(),
            },
            Err(e) => Event::ToolCalled {
                agent: agent.to_string(),
                service: tool.service.clone(),
                tool: tool.name.clone(),
                status: CallStatus::Failed(e.code),
                elapsed_ms: started.elapsed().as_millis() as u64,
                progress_seen: 0,
                size: None,
                redacted: false,
                output_id: None,
            },
        };
        self.events.emit_with(event);
    }
}
