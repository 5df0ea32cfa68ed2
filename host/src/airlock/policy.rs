//! The policy stage on the data path: before a call reaches its server, the service's
//! policy chain may allow it, deny it, rewrite its arguments or ask a person
//! (`approvals`); after redaction it may withhold or replace the result.
//! Every decision is logged and sent as a `policy_decided` event, scrubbed of the
//! service's known secrets.

use serde_json::Value;

use super::Inner;
use super::approvals::{Answered, ApprovalRequest};
use crate::error::{CallError, ErrorCode};
use crate::events::Event;
use crate::plugin::{Call, CallVerdict, PolicyRecord, ResultOutcome, ToolResult};
use crate::secrets::KnownSecrets;

impl Inner {
    /// The call record policies see.
    pub(super) fn policy_call(
        &self,
        agent: &str,
        entry: &crate::catalog::CatalogTool,
        arguments: &serde_json::Map<String, Value>,
    ) -> Call {
        let roots = self
            .agent_roots(agent)
            .into_iter()
            .map(|path| format!("file://{path}"))
            .collect();
        Call {
            agent: agent.to_string(),
            service: entry.service.clone(),
            tool: entry.name.clone(),
            raw_tool: entry.raw_name.clone(),
            arguments: Value::Object(arguments.clone()).to_string(),
            annotations: entry.annotations.as_ref().map(Value::to_string),
            roots,
        }
    }

    /// Runs the service's policy chain on a call. Returns the arguments to run it with,
    /// or `policy_denied`.
    pub(super) async fn enforce_call_policy(
        &self,
        pipeline: &crate::plugin::ServicePipeline,
        call: &Call,
        known: &KnownSecrets,
    ) -> Result<serde_json::Map<String, Value>, CallError> {
        let chain = pipeline.policy();
        let mut from = 0;
        let mut current = call.clone();
        loop {
            let mut records = Vec::new();
            let verdict = chain.check_call(&current, from, known, &mut records).await;
            self.record_policy(call, records, known);
            match verdict {
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
                    let (decision, note) = match self.answer(request).await? {
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
                    self.record_policy(
                        call,
                        vec![PolicyRecord {
                            plugin: plugin.clone(),
                            rule: rule.clone(),
                            decision,
                            reason: Some(note),
                            mode: crate::config::PolicyMode::Enforce,
                        }],
                        known,
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

    /// Runs the service's policy chain on a redacted result: released, withheld
    /// (`policy_denied`), or replaced (the caller redacts the replacement again).
    pub(super) async fn enforce_result_policy(
        &self,
        pipeline: &crate::plugin::ServicePipeline,
        call: &Call,
        result: &ToolResult,
        known: &KnownSecrets,
    ) -> Result<Option<ToolResult>, CallError> {
        let mut records = Vec::new();
        let outcome = pipeline
            .policy()
            .check_result(call, result, known, &mut records)
            .await;
        self.record_policy(call, records, known);
        match outcome {
            ResultOutcome::Release => Ok(None),
            ResultOutcome::Withheld(message) => Err(denied(known, message)),
            ResultOutcome::Replaced(result) => Ok(Some(result)),
        }
    }

    /// Logs each decision and sends it as an event, scrubbed of `known`.
    fn record_policy(&self, call: &Call, records: Vec<PolicyRecord>, known: &KnownSecrets) {
        let span = tracing::Span::current();
        for mut record in records {
            record.reason = record.reason.map(|r| known.scrub_owned(&r));
            span.record("airlock.policy.plugin", record.plugin.as_str());
            span.record("airlock.policy.decision", record.decision);
            span.record("airlock.policy.rule", record.rule.as_str());
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
            self.emit(Event::PolicyDecided {
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
}

fn denied(known: &KnownSecrets, message: String) -> CallError {
    CallError::new(ErrorCode::PolicyDenied, known.scrub_owned(&message))
}
