//! Asking a person what a policy asks. A question is answered, in order, by a
//! remembered approval (a scoped grant in the registry), by the agent's own MCP client
//! when it answers elicitation (behind `airlock serve`), or by the embedder's
//! [`Approver`] (the CLI prompts on a terminal). A person may ask for the answer to be
//! remembered: for these arguments or any, for a while or until revoked
//! (`airlock grants revoke ID`, [`Access::revoke_approval`]).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use super::Access;
use crate::airlock::services::registry_failure;
use crate::error::{CallError, ErrorCode};
use crate::registry::{ApprovalGrant, ApprovalScope, glob_literal};

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

/// A person's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approval {
    /// The call may not run.
    Decline,
    /// This call may run; ask again next time.
    Once,
    /// This call may run, and so may later calls in the same scope, without asking.
    Remember {
        /// Which later calls: with these very arguments, or with any.
        arguments: RememberArguments,
        /// How long the grant lasts; `None` until it is revoked.
        expires_in: Option<Duration>,
    },
}

/// Which arguments a remembered approval covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RememberArguments {
    /// Exactly the arguments of the approved call (compared as canonical JSON).
    Same,
    /// Any arguments to the same tool.
    Any,
}

impl From<bool> for Approval {
    fn from(yes: bool) -> Self {
        if yes {
            Approval::Once
        } else {
            Approval::Decline
        }
    }
}

/// Answers a policy's questions for a person: the CLI prompts on a terminal, an embedder
/// does what it likes. An agent whose own MCP client answers elicitation (behind
/// `airlock serve`) is asked there first. With no one to ask, a call that needs a
/// person's approval is denied, with the question in the message.
///
/// `approve` may wait for a person: it runs on a blocking thread, never on an async
/// worker. A closure `Fn(&ApprovalRequest) -> bool` (or `-> Approval`) is an `Approver`
/// too.
pub trait Approver: Send + Sync {
    /// The person's answer.
    fn approve(&self, request: &ApprovalRequest) -> Approval;
}

impl<F, A> Approver for F
where
    F: Fn(&ApprovalRequest) -> A + Send + Sync,
    A: Into<Approval>,
{
    fn approve(&self, request: &ApprovalRequest) -> Approval {
        self(request).into()
    }
}

/// How a question was answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Answered {
    /// A remembered approval let the call through.
    ByGrant(i64),
    /// A person allowed it, and the answer was remembered as this grant, if asked to.
    Approved(Option<i64>),
    /// A person declined.
    Declined,
    /// No one could be asked.
    NoOne,
}

impl Access {
    /// Answers `request`: a remembered approval, else a person (see the module).
    pub(crate) async fn answer(&self, request: ApprovalRequest) -> Result<Answered, CallError> {
        let arguments = canonical_json(&request.arguments);
        let registry = self.registry.clone();
        let question = request.clone();
        let remembered = blocking(move || {
            registry.matching_approval(&scope(&question, &question.raw_tool, &arguments), now_ms())
        })
        .await?;
        if let Some(grant) = remembered {
            return Ok(Answered::ByGrant(grant.id));
        }
        let Some(approval) = self.ask_person(&request).await else {
            return Ok(Answered::NoOne);
        };
        let (arguments, expires_in) = match approval {
            Approval::Decline => return Ok(Answered::Declined),
            Approval::Once => return Ok(Answered::Approved(None)),
            Approval::Remember {
                arguments,
                expires_in,
            } => (arguments, expires_in),
        };
        let arguments = match arguments {
            RememberArguments::Same => glob_literal(&canonical_json(&request.arguments)),
            RememberArguments::Any => "*".to_string(),
        };
        let expires_at = expires_in.map(|d| now_ms().saturating_add(d.as_millis() as i64));
        let registry = self.registry.clone();
        let id = blocking(move || {
            let tool = glob_literal(&request.raw_tool);
            registry.remember_approval(&scope(&request, &tool, &arguments), expires_at)
        })
        .await?;
        tracing::info!(grant = id, "a person's approval is remembered");
        Ok(Answered::Approved(Some(id)))
    }

    /// Asks a person: through the agent's own MCP client when it answers elicitation
    /// (the gateway's downstream client), else through the embedder's [`Approver`].
    /// `None` when there is no one to ask.
    async fn ask_person(&self, request: &ApprovalRequest) -> Option<Approval> {
        let client = self
            .agents
            .client(&request.agent)
            .filter(|client| client.capabilities().elicitation);
        if let Some(client) = client {
            return Some(elicit_approval(client.as_ref(), request).await);
        }
        let approver = self.approver.clone()?;
        let request = request.clone();
        Some(
            tokio::task::spawn_blocking(move || approver.approve(&request))
                .await
                .unwrap_or(Approval::Decline),
        )
    }
}

impl Access {
    /// The approvals remembered for `agent` (every agent's with `None`), oldest first.
    pub fn approvals(&self, agent: Option<&str>) -> Result<Vec<ApprovalGrant>, CallError> {
        self.registry.approvals(agent).map_err(registry_failure)
    }

    /// Forgets the remembered approval `id`: the next call it covered asks again.
    /// Returns whether there was one.
    pub fn revoke_approval(&self, id: i64) -> Result<bool, CallError> {
        self.registry.revoke_approval(id).map_err(registry_failure)
    }
}

/// The question's scope, with `tool` and `arguments` given (values or globs).
fn scope<'a>(request: &'a ApprovalRequest, tool: &'a str, arguments: &'a str) -> ApprovalScope<'a> {
    ApprovalScope {
        agent: &request.agent,
        service: &request.service,
        tool,
        arguments,
        plugin: &request.plugin,
        rule: &request.rule,
    }
}

/// Runs a registry call on a blocking thread.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, crate::registry::RegistryError> + Send + 'static,
) -> Result<T, CallError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| CallError::new(ErrorCode::ServiceUnavailable, format!("approvals: {e}")))?
        .map_err(registry_failure)
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// `value` as compact JSON with every object's keys sorted, so that the same arguments
/// in another key order compare equal.
pub(crate) fn canonical_json(value: &Value) -> String {
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<_> = map.keys().collect();
                keys.sort();
                Value::Object(
                    keys.into_iter()
                        .map(|k| (k.clone(), sorted(&map[k])))
                        .collect(),
                )
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    sorted(value).to_string()
}

/// Asks the agent's client with `elicitation/create`: a form with a required boolean,
/// `approve`, and optionally whether and how long to remember the answer. Only an
/// accepted form with `approve: true` is a yes.
#[allow(deprecated)]
async fn elicit_approval(
    client: &dyn crate::session::AgentClient,
    request: &ApprovalRequest,
) -> Approval {
    let params = serde_json::from_value::<rmcp::model::ElicitRequestParams>(serde_json::json!({
        "mode": "form",
        "message": format!(
            "{}\n(tool {} on service {}; policy {}, rule {})",
            request.question, request.raw_tool, request.service, request.plugin, request.rule
        ),
        "requestedSchema": {
            "type": "object",
            "properties": {
                "approve": {"type": "boolean", "title": "Allow this call?"},
                "remember": {
                    "type": "string",
                    "title": "Remember this answer for later calls?",
                    "enum": ["no", "these arguments", "any arguments"],
                    "default": "no",
                },
                "remember_hours": {
                    "type": "integer",
                    "minimum": 1,
                    "title": "For how many hours (leave empty: until revoked)",
                },
            },
            "required": ["approve"],
        },
    }));
    let Ok(params) = params else {
        return Approval::Decline;
    };
    match client.elicit(request.service.clone(), params).await {
        Ok(answer) if answer.action == rmcp::model::ElicitationAction::Accept => {
            approval_from_form(answer.content.as_ref().unwrap_or(&Value::Null))
        }
        Ok(_) => Approval::Decline,
        Err(e) => {
            tracing::warn!(agent = %request.agent, error = %e, "the agent's client did not answer a policy's question");
            Approval::Decline
        }
    }
}

/// Reads an accepted approval form.
fn approval_from_form(form: &Value) -> Approval {
    if form["approve"] != Value::Bool(true) {
        return Approval::Decline;
    }
    let arguments = match form["remember"].as_str() {
        Some("these arguments") => RememberArguments::Same,
        Some("any arguments") => RememberArguments::Any,
        _ => return Approval::Once,
    };
    let expires_in = form["remember_hours"]
        .as_u64()
        .filter(|h| *h > 0)
        .map(|h| Duration::from_secs(h.saturating_mul(3600)));
    Approval::Remember {
        arguments,
        expires_in,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_json_sorts_keys_at_every_depth() {
        let a = json!({"b": 1, "a": {"y": [{"d": 1, "c": 2}], "x": null}});
        assert_eq!(
            canonical_json(&a),
            r#"{"a":{"x":null,"y":[{"c":2,"d":1}]},"b":1}"#
        );
    }

    #[test]
    fn an_approval_form_is_read_strictly() {
        assert_eq!(
            approval_from_form(&json!({"approve": false, "remember": "any arguments"})),
            Approval::Decline
        );
        assert_eq!(
            approval_from_form(&json!({"approve": "yes"})),
            Approval::Decline
        );
        assert_eq!(
            approval_from_form(&json!({"approve": true})),
            Approval::Once
        );
        assert_eq!(
            approval_from_form(
                &json!({"approve": true, "remember": "these arguments", "remember_hours": 2})
            ),
            Approval::Remember {
                arguments: RememberArguments::Same,
                expires_in: Some(Duration::from_secs(7200))
            }
        );
        assert_eq!(
            approval_from_form(&json!({"approve": true, "remember": "any arguments"})),
            Approval::Remember {
                arguments: RememberArguments::Any,
                expires_in: None
            }
        );
    }
}
