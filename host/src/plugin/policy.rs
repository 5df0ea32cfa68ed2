//! A service's policy chain: the policy plugins consulted, in order, before a call
//! reaches its server and on its redacted result before it leaves.
//!
//! Each link is enforced or audited (`mode`), and fails closed or open (`on_failure`).
//! An audited link's decisions are recorded and change nothing. A link that fails (an
//! error, a trap, a deadline, an answer that breaks the contract) denies the call when
//! it fails closed and is enforced; otherwise the failure is recorded and the chain goes
//! on.

use std::sync::Arc;

use serde::Serialize;

use super::work::{approx_size, blocking};
use super::{Call, Decision, PluginError, ResultDecision, StageInstance, ToolResult};
use crate::config::{OnFailure, PolicyMode};
use crate::secrets::KnownSecrets;

/// One policy of a chain.
pub struct PolicyLink {
    pub(super) stage: Arc<StageInstance>,
    /// Enforced or audited.
    pub mode: PolicyMode,
    /// What its failure means.
    pub on_failure: OnFailure,
}

impl PolicyLink {
    /// A decision of this link, for the record.
    fn record(
        &self,
        plugin: &str,
        rule: String,
        decision: &'static str,
        reason: Option<String>,
    ) -> PolicyRecord {
        PolicyRecord {
            plugin: plugin.to_string(),
            rule,
            decision,
            reason,
            mode: self.mode,
        }
    }
}

/// One decision, as recorded for the log and the `policy_decided` event.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PolicyRecord {
    /// The plugin that decided.
    pub plugin: String,
    /// The rule it named (`failed` when the plugin failed).
    pub rule: String,
    /// `allow`, `deny`, `rewrite`, `ask`, `withhold`, `replace` or `failed`.
    pub decision: &'static str,
    /// The reason, question or failure, when there is one.
    pub reason: Option<String>,
    /// Whether the link was enforced or audited.
    pub mode: PolicyMode,
}

/// What the chain decided about a call.
#[derive(Debug, Clone, PartialEq)]
pub enum CallVerdict {
    /// It may run, with these arguments (JSON text; rewritten or as given).
    Run(String),
    /// It must not run; the message names the plugin and the rule.
    Denied(String),
    /// A person must be asked first. When they agree, the chain goes on from link
    /// `resume` with `arguments`.
    Ask {
        /// The question.
        question: String,
        /// The plugin that asked.
        plugin: String,
        /// The rule that asked.
        rule: String,
        /// The arguments so far.
        arguments: String,
        /// The next link to consult after a yes.
        resume: usize,
    },
}

/// What the chain decided about a result.
#[derive(Debug, Clone)]
pub enum ResultOutcome {
    /// It may leave as it is.
    Release,
    /// It is held back; the message names the plugin and the rule.
    Withheld(String),
    /// This result goes instead (it must be redacted again before it leaves).
    Replaced(ToolResult),
}

/// The policy chain of one service.
#[derive(Default)]
pub struct PolicyChain {
    links: Vec<PolicyLink>,
}

impl PolicyChain {
    pub(super) fn new(links: Vec<PolicyLink>) -> Self {
        PolicyChain { links }
    }

    /// A chain of one enforced, fail-closed policy (for offline replays).
    pub fn single(stage: Arc<StageInstance>) -> Self {
        PolicyChain {
            links: vec![PolicyLink {
                stage,
                mode: PolicyMode::Enforce,
                on_failure: OnFailure::Closed,
            }],
        }
    }

    /// The links, in the order they decide.
    pub fn links(&self) -> &[PolicyLink] {
        &self.links
    }

    /// Whether the service has any policy.
    pub fn is_empty(&self) -> bool {
        self.links.is_empty()
    }

    /// Consults the links from `from` on about `call`. Every decision is appended to
    /// `records`. `scrub` (the service's known secrets) is scrubbed from what the plugins
    /// log.
    pub async fn check_call(
        &self,
        call: &Call,
        from: usize,
        scrub: &KnownSecrets,
        records: &mut Vec<PolicyRecord>,
    ) -> CallVerdict {
        let mut arguments = call.arguments.clone();
        for (i, link) in self.links.iter().enumerate().skip(from) {
            let plugin = link.stage.plugin_name().to_string();
            let this = Call {
                arguments: arguments.clone(),
                ..call.clone()
            };
            let stage = link.stage.clone();
            let known = scrub.clone();
            let answer = blocking(move || check_call_now(&stage, &this, &known)).await;
            let record = |rule, decision, reason| link.record(&plugin, rule, decision, reason);
            let verdict = match answer.and_then(|v| checked_rewrite(&link.stage, v)) {
                Ok(verdict) => verdict,
                Err(e) => {
                    records.push(record("failed".into(), "failed", Some(e.to_string())));
                    if link.mode == PolicyMode::Enforce && link.on_failure == OnFailure::Closed {
                        return CallVerdict::Denied(format!(
                            "policy {plugin} failed, and it fails closed: {e}"
                        ));
                    }
                    continue;
                }
            };
            let rule = verdict.rule;
            let enforced = link.mode == PolicyMode::Enforce;
            match verdict.decision {
                Decision::Allow => records.push(record(rule, "allow", None)),
                Decision::Deny(reason) => {
                    records.push(record(rule.clone(), "deny", Some(reason.clone())));
                    if enforced {
                        return CallVerdict::Denied(format!(
                            "{reason} (policy {plugin}, rule {rule})"
                        ));
                    }
                }
                Decision::Rewrite(new) => {
                    records.push(record(rule, "rewrite", None));
                    if enforced {
                        arguments = new;
                    }
                }
                Decision::Ask(question) => {
                    records.push(record(rule.clone(), "ask", Some(question.clone())));
                    if enforced {
                        return CallVerdict::Ask {
                            question,
                            plugin,
                            rule,
                            arguments,
                            resume: i + 1,
                        };
                    }
                }
            }
        }
        CallVerdict::Run(arguments)
    }

    /// Consults every link about the redacted `result` of `call`.
    pub async fn check_result(
        &self,
        call: &Call,
        result: &ToolResult,
        scrub: &KnownSecrets,
        records: &mut Vec<PolicyRecord>,
    ) -> ResultOutcome {
        let mut replaced: Option<ToolResult> = None;
        for link in &self.links {
            let plugin = link.stage.plugin_name().to_string();
            let stage = link.stage.clone();
            let (this, current) = (
                call.clone(),
                replaced.clone().unwrap_or_else(|| result.clone()),
            );
            let known = scrub.clone();
            let answer = blocking(move || {
                stage.call(approx_size(&current), &known, |store, api| {
                    api.check_result(store, &this, &current)
                })
            })
            .await;
            let record = |rule, decision, reason| link.record(&plugin, rule, decision, reason);
            let enforced = link.mode == PolicyMode::Enforce;
            match answer {
                Err(e) => {
                    records.push(record("failed".into(), "failed", Some(e.to_string())));
                    if enforced && link.on_failure == OnFailure::Closed {
                        return ResultOutcome::Withheld(format!(
                            "policy {plugin} failed on the result, and it fails closed: {e}"
                        ));
                    }
                }
                Ok(verdict) => match verdict.decision {
                    ResultDecision::Allow => records.push(record(verdict.rule, "allow", None)),
                    ResultDecision::Withhold(reason) => {
                        records.push(record(
                            verdict.rule.clone(),
                            "withhold",
                            Some(reason.clone()),
                        ));
                        if enforced {
                            return ResultOutcome::Withheld(format!(
                                "{reason} (policy {plugin}, rule {})",
                                verdict.rule
                            ));
                        }
                    }
                    ResultDecision::Replace(new) => {
                        records.push(record(verdict.rule, "replace", None));
                        if enforced {
                            replaced = Some(new);
                        }
                    }
                },
            }
        }
        match replaced {
            Some(result) => ResultOutcome::Replaced(result),
            None => ResultOutcome::Release,
        }
    }
}

/// One policy's verdict on `call`, on the calling thread (blocking: plugins run up to
/// their deadline). `scrub` is scrubbed from what the plugin logs.
pub fn check_call_now(
    stage: &StageInstance,
    call: &Call,
    scrub: &KnownSecrets,
) -> Result<super::Verdict, PluginError> {
    stage.call(call.arguments.len(), scrub, |store, api| {
        api.check_call(store, call)
    })
}

/// A verdict whose rewrite is a JSON object; anything else breaks the contract.
fn checked_rewrite(
    stage: &StageInstance,
    verdict: super::Verdict,
) -> Result<super::Verdict, PluginError> {
    if let Decision::Rewrite(arguments) = &verdict.decision
        && !serde_json::from_str::<serde_json::Value>(arguments).is_ok_and(|v| v.is_object())
    {
        return Err(stage.contract_error(
            "rewrote the arguments to something that is not a JSON object".into(),
        ));
    }
    Ok(verdict)
}
