//! The policy stage: before a call reaches its server, the service's policy chain may
//! allow it, deny it, rewrite its arguments or ask a person (answered through
//! [`crate::airlock::access::Access`]); after redaction it may withhold or replace the
//! result. A server's URL-mode elicitation passes the same chain as the pseudo-tool
//! [`URL_ELICITATION`] ([`PolicyStage`] is the agents' [`QuestionGate`]). Every decision
//! is logged and sent as a `policy_decided` event, scrubbed of the service's known
//! secrets.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use rmcp::ErrorData as McpError;
use serde_json::{Map, Value};

use super::resolve::Resolved;
use crate::airlock::access::{Access, Answered, ApprovalRequest};
use crate::airlock::agents::{Agents, QuestionGate, URL_ELICITATION};
use crate::airlock::services::Services;
use crate::error::{CallError, ErrorCode};
use crate::events::{Event, EventBus};
use crate::plugin::{
    Call, CallVerdict, PolicyRecord, ResultOutcome, ServicePipeline, ToolResult as WitResult,
};
use crate::secrets::KnownSecrets;
use crate::telemetry::{CallTrace, Stage};

/// The policy chain on calls, results and URL questions.
pub(crate) struct PolicyStage {
    pub(super) services: Arc<Services>,
    pub(super) access: Arc<Access>,
    pub(super) agents: Arc<Agents>,
    pub(super) events: EventBus,
}

/// A call the chain let run: its arguments, and the record the result is checked with.
pub(super) struct Allowed {
    /// The arguments to send (rewritten, or as given).
    pub(super) arguments: Map<String, Value>,
    /// The record policies saw; `None` when the service has no policy.
    pub(super) call: Option<Call>,
}

impl Allowed {
    /// A call of a service without policy: it runs as given.
    pub(super) fn unchecked(arguments: Map<String, Value>) -> Allowed {
        Allowed {
            arguments,
            call: None,
        }
    }
}

impl PolicyStage {
    /// Runs the chain on a call of `agent` before any session opens: a denied call
    /// never reaches the server. The caller skips this stage for a service without
    /// policy ([`Allowed::unchecked`]).
    pub(super) async fn before(
        &self,
        agent: &str,
        found: &Resolved,
        arguments: Map<String, Value>,
        stage: &mut Stage,
    ) -> Result<Allowed, CallError> {
        let call = Call {
            agent: agent.to_string(),
            service: found.tool.service.clone(),
            tool: found.tool.name.clone(),
            raw_tool: found.tool.raw_name.clone(),
            arguments: Value::Object(arguments.clone()).to_string(),
            annotations: found.tool.annotations.as_ref().map(Value::to_string),
            roots: self.agents.root_uris(agent),
        };
        let arguments = self
            .enforce_call(
                &found.pipeline,
                &call,
                &found.service.secrets(),
                arguments,
                stage,
            )
            .await?;
        Ok(Allowed {
            arguments,
            call: Some(call),
        })
    }

    /// Runs the chain on `call`. Returns the arguments to run it with (`given` when no
    /// policy rewrote them), or `policy_denied`.
    async fn enforce_call(
        &self,
        pipeline: &ServicePipeline,
        call: &Call,
        known: &KnownSecrets,
        given: Map<String, Value>,
        stage: &mut Stage,
    ) -> Result<Map<String, Value>, CallError> {
        let chain = pipeline.policy();
        let mut from = 0;
        let mut current = call.clone();
        loop {
            let mut records = Vec::new();
            let verdict = chain.check_call(&current, from, known, &mut records).await;
            self.record(call, records, known, stage);
            match verdict {
                // Unchanged arguments are not read back from their text.
                CallVerdict::Run(arguments) if arguments == call.arguments => return Ok(given),
                CallVerdict::Run(arguments) => {
                    return match serde_json::from_str(&arguments) {
                        Ok(Value::Object(map)) => Ok(map),
                        _ => Err(denied(
                            known,
                            "a policy left arguments that are not a JSON object".into(),
                        )),
                    };
                }
                CallVerdict::Denied(message) => return Err(denied(known, message)),
                CallVerdict::Ask {
                    question,
                    plugin,
                    rule,
                    arguments,
                    resume,
                } => {
                    let request = ApprovalRequest {
                        agent: current.agent.clone(),
                        service: current.service.clone(),
                        tool: current.tool.clone(),
                        raw_tool: current.raw_tool.clone(),
                        arguments: serde_json::from_str(&arguments).unwrap_or(Value::Null),
                        question: known.scrub_owned(&question),
                        plugin: plugin.clone(),
                        rule: rule.clone(),
                    };
                    let (decision, note) = match self.access.answer(request).await? {
                        Answered::NoOne => {
                            return Err(denied(
                                known,
                                format!(
                                    "needs a person's approval, and none can be asked here: {question} (policy {plugin}, rule {rule})"
                                ),
                            ));
                        }
                        Answered::Declined => ("declined", question.clone()),
                        Answered::Approved(None) => ("approved", question.clone()),
                        Answered::Approved(Some(id)) => (
                            "approved",
                            format!("{question} (remembered as approval {id})"),
                        ),
                        Answered::ByGrant(id) => (
                            "approved",
                            format!("{question} (by remembered approval {id})"),
                        ),
                    };
                    self.record(
                        call,
                        vec![PolicyRecord {
                            plugin: plugin.clone(),
                            rule: rule.clone(),
                            decision,
                            reason: Some(note),
                            mode: crate::config::PolicyMode::Enforce,
                        }],
                        known,
                        stage,
                    );
                    if decision == "declined" {
                        return Err(denied(
                            known,
                            format!("a person declined: {question} (policy {plugin}, rule {rule})"),
                        ));
                    }
                    current.arguments = arguments;
                    from = resume;
                }
            }
        }
    }

    /// Runs the chain on a redacted result: released (`None`), withheld
    /// (`policy_denied`), or replaced (the caller converts and redacts the replacement).
    pub(super) async fn after(
        &self,
        call: &Call,
        pipeline: &ServicePipeline,
        result: &WitResult,
        known: &KnownSecrets,
        stage: &mut Stage,
    ) -> Result<Option<WitResult>, CallError> {
        let mut records = Vec::new();
        let outcome = pipeline
            .policy()
            .check_result(call, result, known, &mut records)
            .await;
        self.record(call, records, known, stage);
        match outcome {
            ResultOutcome::Release => Ok(None),
            ResultOutcome::Withheld(message) => Err(denied(known, message)),
            ResultOutcome::Replaced(result) => Ok(Some(result)),
        }
    }

    /// Logs each decision, records the last on the policy `stage`, and sends each as an
    /// event, scrubbed of `known`.
    fn record(
        &self,
        call: &Call,
        records: Vec<PolicyRecord>,
        known: &KnownSecrets,
        stage: &mut Stage,
    ) {
        for mut record in records {
            record.reason = record.reason.map(|r| known.scrub_owned(&r));
            stage.set_str("airlock.policy.plugin", &record.plugin);
            stage.set_str("airlock.policy.decision", record.decision);
            stage.set_str("airlock.policy.rule", &record.rule);
            tracing::info!(
                agent = %call.agent,
                service = %call.service,
                tool = %call.tool,
                plugin = %record.plugin,
                rule = %record.rule,
                decision = record.decision,
                mode = ?record.mode,
                reason = record.reason.as_deref().unwrap_or(""),
                "policy decided"
            );
            // Built only when someone takes every event (`Airlock::events()`: the
            // console, `/metrics`, `call --events`).
            self.events.emit_with(|| Event::PolicyDecided {
                agent: call.agent.clone(),
                service: call.service.clone(),
                tool: call.tool.clone(),
                plugin: record.plugin,
                rule: record.rule,
                decision: record.decision.to_string(),
                reason: record.reason,
                mode: match record.mode {
                    crate::config::PolicyMode::Enforce => "enforce",
                    crate::config::PolicyMode::Audit => "audit",
                }
                .to_string(),
            });
        }
    }

    /// Runs `service`'s policy chain on a URL-mode elicitation of `agent`'s. Returns the
    /// URL to send the user to (rewritten by a policy, or the server's), or the refusal
    /// the server is answered with.
    async fn check_url_question(
        &self,
        agent: &str,
        service: &str,
        arguments: Value,
        trace: &CallTrace,
    ) -> Result<Option<String>, McpError> {
        let Some(svc) = self.services.get(service) else {
            return Ok(None);
        };
        let Some(pipeline) = svc.pipeline.clone() else {
            return Ok(None);
        };
        if pipeline.policy().is_empty() {
            return Ok(None);
        }
        let call = Call {
            agent: agent.to_string(),
            service: service.to_string(),
            tool: URL_ELICITATION.to_string(),
            raw_tool: URL_ELICITATION.to_string(),
            arguments: arguments.to_string(),
            annotations: None,
            roots: self.agents.root_uris(agent),
        };
        let given = match arguments {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        // A stage of the call that asks (its decision recorded on it), but no sample of
        // the policy stage's time: that counts calls.
        let mut stage = trace.stage("policy");
        let checked = self
            .enforce_call(&pipeline, &call, &svc.secrets(), given, &mut stage)
            .await;
        drop(stage);
        match checked {
            Ok(allowed) => Ok(allowed
                .get("url")
                .and_then(Value::as_str)
                .map(str::to_string)),
            Err(e) => Err(McpError::invalid_request(
                format!(
                    "Airlock's policy refused to send the user to this URL: {}",
                    e.message
                ),
                None,
            )),
        }
    }
}

impl QuestionGate for PolicyStage {
    fn check_url<'a>(
        &'a self,
        agent: &'a str,
        service: &'a str,
        arguments: Value,
        trace: &'a CallTrace,
    ) -> Pin<Box<dyn Future<Output = Result<Option<String>, McpError>> + Send + 'a>> {
        Box::pin(self.check_url_question(agent, service, arguments, trace))
    }
}

fn denied(known: &KnownSecrets, message: String) -> CallError {
    CallError::new(ErrorCode::PolicyDenied, known.scrub_owned(&message))
}
