//! [`Calls`]: the path of one tool call, as a pipeline of stages, each a type with one
//! job and typed input and output:
//!
//! ```text
//! resolve (catalog) -> access -> policy -> upstream (limits, session, server)
//!   -> process (content plugin, redaction chain) -> result policy -> retain -> report
//! ```
//!
//! [`Calls::call_with`] composes them; library calls, CLI calls and gateway calls all
//! run it. Each stage is timed (`airlock_stage_duration_seconds`) and traced as a child
//! of the call's span.

mod options;
mod output;
mod policy;
mod process;
mod report;
mod resolve;
mod retain;
mod upstream;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};
use tracing::Instrument;

pub use options::{CallOptions, CallerRequest};
pub use output::{CallOutput, Redaction, call_json};
use policy::Allowed;
pub(crate) use policy::PolicyStage;

use super::access::{Access, AccessRequest};
use super::agents::Agents;
use super::catalog::Catalog;
use super::outputs::Outputs;
use super::services::Services;
use crate::error::{CallError, ErrorCode};
use crate::events::EventBus;
use crate::session::PerCallAskers;
use crate::telemetry::CallTrace;
use process::Process;
use report::Report;
use resolve::{Resolve, Resolved};
use retain::Retain;
use upstream::Upstream;

/// Runs tool calls.
pub struct Calls {
    resolve: Resolve,
    access: Arc<Access>,
    policy: Arc<PolicyStage>,
    upstream: Upstream,
    retain: Retain,
    report: Report,
    services: Arc<Services>,
    preview: usize,
}

/// What [`Calls`] is built from.
pub(crate) struct CallParts {
    pub(crate) services: Arc<Services>,
    pub(crate) access: Arc<Access>,
    pub(crate) catalog: Arc<Catalog>,
    pub(crate) outputs: Arc<Outputs>,
    pub(crate) agents: Arc<Agents>,
    pub(crate) events: EventBus,
}

impl Calls {
    /// The pipeline over these parts. The policy stage is also what checks the URL
    /// questions servers ask agents: it is installed as the agents' gate.
    pub(crate) fn new(parts: CallParts) -> Calls {
        let policy = Arc::new(PolicyStage {
            services: parts.services.clone(),
            access: parts.access.clone(),
            agents: parts.agents.clone(),
            events: parts.events.clone(),
        });
        let gate: Arc<dyn super::agents::QuestionGate> = policy.clone();
        parts.agents.set_gate(Arc::downgrade(&gate));
        Calls {
            resolve: Resolve {
                catalog: parts.catalog,
                services: parts.services.clone(),
            },
            access: parts.access,
            policy,
            upstream: Upstream {
                services: parts.services.clone(),
                agents: parts.agents,
                events: parts.events.clone(),
            },
            preview: parts.outputs.preview(),
            retain: Retain {
                outputs: parts.outputs,
            },
            report: Report {
                events: parts.events,
            },
            services: parts.services,
        }
    }

    /// Calls the tool with qualified name `tool` as the default agent. `timeout`
    /// overrides the service's `tool_timeout_secs`.
    pub async fn call(
        &self,
        tool: &str,
        arguments: Value,
        timeout: Option<Duration>,
    ) -> Result<CallOutput, CallError> {
        let options = CallOptions {
            timeout,
            ..Default::default()
        };
        self.call_with(tool, arguments, options).await
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
    /// let outcome = airlock.calls().call_with("mcp__fs__read_file", serde_json::json!({"path": "/tmp/x"}), options).await;
    /// # }
    /// ```
    pub async fn call_with(
        &self,
        tool: &str,
        arguments: Value,
        options: CallOptions,
    ) -> Result<CallOutput, CallError> {
        let span = report::call_span(tool, &options);
        let trace = CallTrace::of(&span);
        let outcome = self
            .run(tool, arguments, &options, &trace)
            .instrument(span.clone())
            .await;
        report::record_outcome(&span, &outcome);
        outcome
    }

    /// Finds the tool, then runs the stages between the call's two events.
    async fn run(
        &self,
        tool: &str,
        arguments: Value,
        options: &CallOptions,
        trace: &CallTrace,
    ) -> Result<CallOutput, CallError> {
        let started = Instant::now();
        let found = self.resolve.tool(tool).await?;
        tracing::Span::current().record("airlock.service", found.tool.service.as_str());
        if options.asker.is_some() {
            // The agent's sessions must declare that servers may ask.
            self.services
                .offer_client(&options.agent, Arc::new(PerCallAskers))
                .await;
        }
        self.report.started(&options.agent, &found.tool);
        let outcome = self
            .stages(&found, arguments, options, started, trace)
            .await;
        self.report
            .finished(&options.agent, &found.tool, &outcome, started);
        outcome
    }

    /// The path of a found tool's call, stage by stage.
    async fn stages(
        &self,
        found: &Resolved,
        arguments: Value,
        options: &CallOptions,
        started: Instant,
        trace: &CallTrace,
    ) -> Result<CallOutput, CallError> {
        let arguments = object(arguments)?;
        self.admit(&options.agent, found, trace).await?;
        let Allowed { arguments, call } = if found.pipeline.policy().is_empty() {
            Allowed::unchecked(arguments)
        } else {
            let mut stage = trace.stage("policy");
            let allowed = self
                .policy
                .before(&options.agent, found, arguments, &mut stage)
                .await;
            stage.done();
            allowed?
        };
        let upstream: &Upstream = &self.upstream;
        let reply = upstream.send(found, arguments, options, trace).await?;
        let process = Process {
            agent: options.agent.clone(),
            preview: options.preview.unwrap_or(self.preview),
            known: found.service.secrets(),
            trace: trace.clone(),
        };
        let mut done = process.run(found, reply.result).await?;
        if let Some(call) = &call {
            let mut stage = trace.stage("result_policy");
            let replacement = self
                .policy
                .after(
                    call,
                    &found.pipeline,
                    &done.result,
                    &process.known,
                    &mut stage,
                )
                .await;
            stage.done();
            let replacement = replacement?;
            if let Some(replacement) = replacement {
                done = process.run_replacement(found, replacement).await?;
            }
        }
        let (retained, preview) = self
            .retain
            .keep(&found.tool.service, done.prepared, trace)
            .await;
        let result = crate::plugin::result_from_wit(done.result);
        Ok(CallOutput {
            service: found.tool.service.clone(),
            tool: found.tool.name.clone(),
            raw_tool: found.tool.raw_name.clone(),
            is_error: result.is_error,
            retained,
            content: result.content,
            structured_content: result.structured_content,
            preview,
            redactions: done.marks.into_iter().map(Redaction::from).collect(),
            elapsed: started.elapsed(),
            progress_seen: reply.progress_seen,
            warning: reply.warning,
        })
    }

    /// The access stage: grants and the embedder's callback. A denied call never
    /// reaches the server (checked before any session opens).
    async fn admit(
        &self,
        agent: &str,
        found: &Resolved,
        trace: &CallTrace,
    ) -> Result<(), CallError> {
        let request = AccessRequest::Call {
            agent,
            service: &found.tool.service,
            tool: &found.tool.name,
        };
        trace.timed("access", self.access.authorize(&request)).await
    }
}

/// The arguments of a call: a JSON object.
fn object(arguments: Value) -> Result<Map<String, Value>, CallError> {
    match arguments {
        Value::Object(map) => Ok(map),
        other => Err(CallError::new(
            ErrorCode::InvalidArguments,
            format!("arguments must be a JSON object, got {other}"),
        )),
    }
}
