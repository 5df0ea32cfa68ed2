//! Tool calls through the data path: catalog lookup, access, policy, the service's
//! limits, the agent's session, the server, the content plugin, the redaction chain, the
//! results store. What a call returns is in `output.rs`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use tracing::field::Empty;

use super::{Airlock, CallOutput, DEFAULT_AGENT, Redaction};
use crate::error::{CallError, ErrorCode};
use crate::events::{CallStatus, Event};
use crate::plugin::convert;
use crate::results;
use crate::session::{AgentClient, CallControl, PerCallAskers, ProgressUpdate, TraceContext};
use crate::telemetry::{self, stage_done};

/// How to run one call.
#[derive(Debug, Clone)]
pub struct CallOptions {
    /// The calling agent (each agent has its own session per service).
    pub agent: String,
    /// Overrides the service's `tool_timeout_secs`.
    pub timeout: Option<Duration>,
    /// Cancels the call: the server is sent `notifications/cancelled`.
    pub cancel: Option<CancellationToken>,
    /// Receives the server's progress notifications.
    pub progress: Option<mpsc::UnboundedSender<ProgressUpdate>>,
    /// The caller's W3C trace context, passed on to the server in the request's `_meta`
    /// (SEP-414), so the server's spans join the caller's trace.
    pub trace: Option<TraceContext>,
    /// Answers the questions a server asks during this call (elicitation, sampling),
    /// instead of the agent's client — a gateway's 2026-07-28 client, asked through an
    /// `input_required` result. The answers are the caller's; the questions reach it
    /// scrubbed of the service's secrets.
    pub asker: Option<Arc<dyn AgentClient>>,
    /// The preview size for this agent's surface (for example
    /// [`crate::results::COMPACT_PREVIEW`] for models on the compact surface); the
    /// Airlock's default when `None`.
    pub preview: Option<usize>,
    /// The caller's own request, when the call arrived as one (the gateway sets it):
    /// recorded on the call's span as `jsonrpc.request.id` and `mcp.session.id`.
    pub request: Option<CallerRequest>,
}

/// The MCP request a call arrived in, as its caller numbered it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallerRequest {
    /// The JSON-RPC request id, as text.
    pub id: String,
    /// The caller's MCP session (`Mcp-Session-Id`), when it has one.
    pub session: Option<String>,
}

impl Default for CallOptions {
    fn default() -> Self {
        CallOptions {
            agent: DEFAULT_AGENT.to_string(),
            timeout: None,
            cancel: None,
            progress: None,
            trace: None,
            asker: None,
            preview: None,
            request: None,
        }
    }
}

impl Airlock {
    /// Calls the tool with qualified name `tool` as the default agent. `timeout`
    /// overrides the service's `tool_timeout_secs`.
    pub async fn call(
        &self,
        tool: &str,
        arguments: Value,
        timeout: Option<Duration>,
    ) -> Result<CallOutput, CallError> {
        self.call_with(
            tool,
            arguments,
            CallOptions {
                timeout,
                ..Default::default()
            },
        )
        .await
    }

    /// Calls a tool with full control: agent, timeout, cancellation, progress. The
    /// result is converted, redacted and retained; a result the server marked
    /// `isError` is returned as a [`CallOutput`] with `is_error`. An interrupted call is
    /// never repeated.
    ///
    /// ```no_run
    /// # async fn run(airlock: airlock_host::Airlock) {
    /// use airlock_host::CallOptions;
    /// let cancel = tokio_util::sync::CancellationToken::new();
    /// let (progress, mut updates) = tokio::sync::mpsc::unbounded_channel();
    /// let options = CallOptions { agent: "agent-7".into(), cancel: Some(cancel.clone()), progress: Some(progress), ..Default::default() };
    /// tokio::spawn(async move { while let Some(p) = updates.recv().await { println!("{:?}", p); } });
    /// let outcome = airlock.call_with("mcp__fs__read_file", serde_json::json!({"path": "/tmp/x"}), options).await;
    /// # }
    /// ```
    pub async fn call_with(
        &self,
        tool: &str,
        arguments: Value,
        options: CallOptions,
    ) -> Result<CallOutput, CallError> {
        // One trace per call: this span is its root (or the child of the caller's
        // context), every stage a child of it.
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
            telemetry::adopt_parent(&span, trace.traceparent(), trace.tracestate());
        }
        let outcome = self
            .call_traced(tool, arguments, options)
            .instrument(span.clone())
            .await;
        if !span.is_disabled() {
            record_outcome(&span, &outcome);
        }
        outcome
    }

    async fn call_traced(
        &self,
        tool: &str,
        arguments: Value,
        options: CallOptions,
    ) -> Result<CallOutput, CallError> {
        let started = Instant::now();
        let entry = self.inner.cataloger.read().get(tool).cloned();
        let outcome = match entry {
            None if let Some((service, reason)) = self.inner.unavailable_owner(tool) => {
                Err(CallError::new(
                    ErrorCode::ServiceUnavailable,
                    format!("service \"{service}\" is unavailable: {reason}"),
                ))
            }
            None => {
                let hint = self
                    .search_tools(&tool.replace("__", " ").replace('_', " "))
                    .first()
                    .map(|t| format!("; did you mean \"{}\"?", t.name))
                    .unwrap_or_default();
                // The name is the caller's, but what leaves passes the egress rule: a
                // name holding a known secret comes back scrubbed.
                let message = format!("no tool named \"{tool}\"{hint}");
                Err(CallError::new(
                    ErrorCode::UnknownTool,
                    crate::secrets::scrub_log(&message).into_owned(),
                ))
            }
            Some(entry) => {
                if options.asker.is_some() {
                    // The agent's sessions must declare that servers may ask.
                    self.offer_client(&options.agent, Arc::new(PerCallAskers))
                        .await;
                }
                self.inner.emit_with(|| Event::CallStarted {
                    agent: options.agent.clone(),
                    service: entry.service.clone(),
                    tool: tool.to_string(),
                });
                self.run_call(&entry, arguments, &options, started)
                    .await
                    .map_err(|e| {
                        self.inner.emit(Event::ToolCalled {
                            agent: options.agent.clone(),
                            service: entry.service.clone(),
                            tool: tool.to_string(),
                            status: CallStatus::Failed(e.code),
                            elapsed_ms: started.elapsed().as_millis() as u64,
                            progress_seen: 0,
                            size: None,
                            redacted: false,
                            output_id: None,
                        });
                        e
                    })
            }
        };
        if let Ok(out) = &outcome {
            self.inner.emit(Event::ToolCalled {
                agent: options.agent.clone(),
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
            });
        }
        outcome
    }

    async fn run_call(
        &self,
        entry: &crate::catalog::CatalogTool,
        arguments: Value,
        options: &CallOptions,
        started: Instant,
    ) -> Result<CallOutput, CallError> {
        let Value::Object(arguments) = arguments else {
            return Err(CallError::new(
                ErrorCode::InvalidArguments,
                format!("arguments must be a JSON object, got {arguments}"),
            ));
        };
        let inner = &self.inner;
        tracing::Span::current().record("airlock.service", entry.service.as_str());
        // A denied call never reaches the server: checked before any session opens.
        let stage = Instant::now();
        tracing::info_span!("access").in_scope(|| {
            inner.authorize(&super::AccessRequest::Call {
                agent: &options.agent,
                service: &entry.service,
                tool: &entry.name,
            })
        })?;
        stage_done("access", stage);
        let service = inner
            .service(&entry.service)
            .expect("catalog services are configured");
        let pipeline = service
            .pipeline
            .clone()
            .expect("cataloged services have pipelines");
        // The policy chain decides before any session opens: a denied call never reaches
        // the server; an allowed one may run with rewritten arguments.
        let policy_call = (!pipeline.policy().is_empty())
            .then(|| inner.policy_call(&options.agent, entry, &arguments));
        let arguments = match &policy_call {
            Some(call) => {
                let stage = Instant::now();
                let arguments = inner
                    .enforce_call_policy(&pipeline, call, &service.secrets())
                    .instrument(policy_span("policy"))
                    .await;
                stage_done("policy", stage);
                arguments?
            }
            None => arguments,
        };
        // The service's limits: a slot among its calls in flight, held to the end, and
        // the rates' tokens. A refused call never reaches the server.
        let _permit = service.guard.admit(&options.agent)?;
        let stage = Instant::now();
        let live = inner
            .session(&options.agent, &entry.service)
            .instrument(tracing::info_span!("session"))
            .await;
        stage_done("session", stage);
        let live = live?;

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
                    update.message = Some(inner.redact_text(&entry.service, &message).await);
                }
                inner.emit(Event::Progress {
                    agent: options.agent.clone(),
                    service: entry.service.clone(),
                    tool: entry.name.clone(),
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
        let upstream = tracing::info_span!(
            "upstream",
            otel.name = %format_args!("tools/call {}", entry.raw_name),
            otel.kind = "client",
            mcp.method.name = "tools/call",
            gen_ai.tool.name = entry.raw_name.as_str(),
            airlock.service = entry.service.as_str(),
        );
        let trace = telemetry::context_of(&upstream)
            .and_then(|(parent, state)| TraceContext::new(&parent, state.as_deref()))
            .or_else(|| options.trace.clone());
        let control = CallControl {
            timeout: Some(options.timeout.unwrap_or(service.config.tool_timeout)),
            cancel: options.cancel.clone(),
            progress: Some(tx),
            trace,
            // A URL the server sends the user to passes the service's policy first.
            asker: options.asker.clone().map(|asker| {
                super::questions::PolicedAsker::wrap(
                    asker,
                    inner,
                    &options.agent,
                    Some(&entry.raw_name),
                )
            }),
        };
        let call = async {
            let stage = Instant::now();
            let reply = live
                .session
                .call_tool(&entry.raw_name, arguments, control)
                .await;
            drop(live);
            stage_done("upstream", stage);
            reply
        };
        let (reply, progress_seen) = tokio::join!(call.instrument(upstream), forward);
        // A transport that closed under the call counts toward the breaker; the call is
        // not sent again (the server may have started it).
        let reply = match reply {
            Ok(reply) => {
                service.guard.record_success();
                reply
            }
            Err(e) => {
                if e.code == ErrorCode::ServiceUnavailable {
                    service.guard.record_failure();
                }
                return Err(inner.redact_error(&entry.service, e).await);
            }
        };

        // Everything CPU-bound about the result — the plugins, its text, digest and
        // preview, the MCP JSON of what comes back — in one blocking section, off the
        // worker role (see `process_then`).
        // The known secrets as they are now: connecting may have just learned one (an
        // OAuth access token), so they are read after the session opened.
        let known = service.secrets();
        let result = convert::result_from_mcp(&reply.result);
        let preview_limit = options.preview.unwrap_or(inner.preview);
        let process = |result| {
            let (pipeline, known, agent) = (pipeline.clone(), known.clone(), options.agent.clone());
            async move {
                pipeline
                    .process_then(result, &known, move |processed| {
                        let text = convert::result_text(&processed.result);
                        let prepared = results::prepare(
                            Some(&agent),
                            text,
                            !processed.marks.is_empty(),
                            preview_limit,
                        );
                        let mcp = convert::result_to_mcp(&processed.result);
                        (processed, prepared, mcp)
                    })
                    .await
                    .map_err(|e| {
                        CallError::new(ErrorCode::AdapterError, known.scrub_owned(&e.to_string()))
                    })
            }
        };
        let mut done = process(result).await?;
        // The redacted result may be withheld or replaced; a replacement is converted
        // and redacted like any result before it leaves.
        if let Some(call) = &policy_call {
            let stage = Instant::now();
            let replacement = inner
                .enforce_result_policy(&pipeline, call, &done.0.result, &known)
                .instrument(policy_span("result_policy"))
                .await;
            stage_done("result_policy", stage);
            if let Some(replacement) = replacement? {
                done = process(replacement).await?;
            }
        }
        let (processed, prepared, mcp) = done;
        let redactions: Vec<Redaction> = processed.marks.into_iter().map(Redaction::from).collect();
        let stage = Instant::now();
        let retain = tracing::info_span!(
            "retain",
            airlock.output_id = Empty,
            airlock.result.size = Empty,
        );
        let (retained, preview) = inner
            .results
            .keep(&entry.service, prepared)
            .instrument(retain.clone())
            .await;
        stage_done("retain", stage);
        tracing::record_all!(
            retain,
            airlock.output_id = retained.output_id.as_ref().map(|id| id.as_str()),
            airlock.result.size = retained.size as u64,
        );
        let Value::Object(mut mcp) = mcp else {
            unreachable!("result_to_mcp makes an object")
        };
        Ok(CallOutput {
            service: entry.service.clone(),
            tool: entry.name.clone(),
            raw_tool: entry.raw_name.clone(),
            is_error: processed.result.is_error,
            retained,
            content: match mcp.remove("content") {
                Some(Value::Array(blocks)) => blocks,
                _ => Vec::new(),
            },
            structured_content: mcp.remove("structuredContent"),
            preview,
            redactions,
            elapsed: started.elapsed(),
            progress_seen,
            warning: reply.warning,
        })
    }
}

impl super::Inner {
    /// The service a tool name not in the catalog belongs to, when that service has
    /// failed (its plugins were refused, it needs repair, or its server could not be
    /// reached): the name carries the service's namespace. With the reason, so the
    /// caller learns why.
    fn unavailable_owner(&self, tool: &str) -> Option<(String, String)> {
        self.all_services().into_iter().find_map(|(name, service)| {
            // A failed service (its plugins refused, its definition needing repair, or
            // its server unreachable or refusing Airlock's credentials) has no catalog:
            // a call to one of its tools says why, rather than "unknown tool".
            if !service.enabled() {
                return None;
            }
            let reason = service.health().failed.clone()?;
            let frozen = self.registry.namespace(&name).ok().flatten();
            let default = format!("mcp__{}", sanitize(&name));
            let owns = [frozen, Some(default)]
                .into_iter()
                .flatten()
                .any(|ns| tool.starts_with(&format!("{ns}__")));
            owns.then(|| (name, reason))
        })
    }
}

/// A policy stage's span; the decision is recorded on it as the chain decides.
fn policy_span(stage: &'static str) -> tracing::Span {
    tracing::info_span!(
        "policy",
        otel.name = stage,
        airlock.policy.plugin = Empty,
        airlock.policy.decision = Empty,
        airlock.policy.rule = Empty,
    )
}

/// The call's outcome on its root span: `ok`, `tool_error`, or the error code (also as
/// `error.type` and an error status, with the message as its description).
fn record_outcome(span: &tracing::Span, outcome: &Result<CallOutput, CallError>) {
    match outcome {
        Ok(out) => {
            let failed = out.is_error.then_some("tool_error");
            tracing::record_all!(
                span,
                airlock.outcome = failed.unwrap_or("ok"),
                error.type = failed,
                otel.status_code = failed.map(|_| "error"),
                airlock.output_id = out.retained.output_id.as_ref().map(|id| id.as_str()),
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

/// `name` with every character outside `[A-Za-z0-9_-]` replaced by `_`.
fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}
