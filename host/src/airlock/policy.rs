//! The policy stage on the data path: before a call reaches its server, the service's
//! policy chain may allow it, deny it, rewrite its arguments or ask a person (through
//! the embedder's [`Approver`]); after redaction it may withhold or replace the result.
//! Every decision is logged and sent as a `policy_decided` event, scrubbed of the
//! service's known secrets.

use serde_json::Value;

use super::Inner;
use crate::error::{CallError, ErrorCode};
use crate::events::Event;
use crate::plugin::{Call, CallVerdict, PolicyRecord, ResultOutcome, ToolResult};
use crate::secrets::KnownSecrets;

/// A question a policy asks a person before a call runs.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRequest {
    /// The agent making the call.
    pub agent: String,
    /// The service.
    pub service: String,
    /// The qualified tool name.
    pub tool: String,
    /// The server's own tool name.
    pub raw_tool: String,
    /// The arguments the call would run with.
    pub arguments: Value,
    /// The policy's question.
    pub question: String,
    /// The plugin that asks.
    pub plugin: String,
    /// The rule that asks.
    pub rule: String,
}

/// Answers a policy's questions for a person: the CLI prompts on a terminal, an embedder
/// does what it likes. An agent whose own MCP client answers elicitation (behind
/// `airlock serve`) is asked there first. With no one to ask, a call that needs a
/// person's approval is denied, with the question in the message.
///
/// `approve` may wait for a person: it runs on a blocking thread, never on an async
/// worker. A closure `Fn(&ApprovalRequest) -> bool` is an `Approver` too.
pub trait Approver: Send + Sync {
    /// Whether the person allows the call.
    fn approve(&self, request: &ApprovalRequest) -> bool;
}

impl<F> Approver for F
where
    F: Fn(&ApprovalRequest) -> bool + Send + Sync,
{
    fn approve(&self, request: &ApprovalRequest) -> bool {
        self(request)
    }
}

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
                    let Some(approved) = self.ask_person(request).await else {
                        return Err(denied(
                            known,
                            format!(
                                "needs a person's approval, and none can be asked here: {question} (policy {plugin}, rule {rule})"
                            ),
                        ));
                    };
                    self.record_policy(
                        call,
                        vec![PolicyRecord {
                            plugin: plugin.clone(),
                            rule: rule.clone(),
                            decision: if approved { "approved" } else { "declined" },
                            reason: Some(question.clone()),
                            mode: crate::config::PolicyMode::Enforce,
                        }],
                        known,
                    );
                    if !approved {
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

    /// Asks a person: through the agent's own MCP client when it answers elicitation
    /// (the gateway's downstream client), else through the embedder's [`Approver`].
    /// `None` when there is no one to ask.
    async fn ask_person(&self, request: ApprovalRequest) -> Option<bool> {
        let client = self
            .agent_clients
            .read()
            .expect("agent clients poisoned")
            .get(&request.agent)
            .and_then(|link| link.get())
            .filter(|client| client.capabilities().elicitation);
        if let Some(client) = client {
            return Some(elicit_approval(client.as_ref(), &request).await);
        }
        let approver = self.approver.clone()?;
        Some(
            tokio::task::spawn_blocking(move || approver.approve(&request))
                .await
                .unwrap_or(false),
        )
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
        for mut record in records {
            record.reason = record.reason.map(|r| known.scrub_owned(&r));
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

/// Asks the agent's client with `elicitation/create`: a form with one required boolean,
/// `approve`. Only an accepted form with `approve: true` is a yes.
#[allow(deprecated)]
async fn elicit_approval(
    client: &dyn crate::session::AgentClient,
    request: &ApprovalRequest,
) -> bool {
    let params = serde_json::from_value::<rmcp::model::ElicitRequestParams>(serde_json::json!({
        "mode": "form",
        "message": format!(
            "{}\n(tool {} on service {}; policy {}, rule {})",
            request.question, request.raw_tool, request.service, request.plugin, request.rule
        ),
        "requestedSchema": {
            "type": "object",
            "properties": {"approve": {"type": "boolean", "title": "Allow this call?"}},
            "required": ["approve"],
        },
    }));
    let Ok(params) = params else {
        return false;
    };
    match client.elicit(request.service.clone(), params).await {
        Ok(answer) => {
            answer.action == rmcp::model::ElicitationAction::Accept
                && answer
                    .content
                    .as_ref()
                    .is_some_and(|c| c["approve"] == Value::Bool(true))
        }
        Err(e) => {
            tracing::warn!(agent = %request.agent, error = %e, "the agent's client did not answer a policy's question");
            false
        }
    }
}

fn denied(known: &KnownSecrets, message: String) -> CallError {
    CallError::new(ErrorCode::PolicyDenied, known.scrub_owned(&message))
}
