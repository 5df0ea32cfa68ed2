//! A policy plugin for tests, doing what its configuration's `action` says:
//!
//! - `rewrite`: merges the `set` object into the call's arguments;
//! - `trap`: panics on every call (a trap: the host applies `on_failure`);
//! - `withhold`: allows the call, withholds its result;
//! - `replace`: allows the call, replaces its result with one text block `replaced: ` +
//!   the `text` option (tests put a known secret there: it must come out redacted);
//! - `leak`: allows every call, and keeps 4 MiB more memory after each one (as a
//!   garbage-collected engine's heap creeps up), so the host must recycle the instance
//!   before it reaches the memory cap.

use airlock_guest::{
    Call, Config, ContentBlock, Decision, Plugin, Policy, ResultDecision, ResultVerdict, Stage,
    TextBlock, ToolResult, Verdict, export_plugin,
};
use serde_json::Value;

/// What `leak` keeps, for the instance's life.
static LEAKED: std::sync::Mutex<Vec<Vec<u8>>> = std::sync::Mutex::new(Vec::new());

struct Fixture {
    action: String,
    set: serde_json::Map<String, Value>,
    text: String,
}

impl Plugin for Fixture {
    const NAME: &'static str = "policy-fixture";

    fn new(stage: Stage, config: Config) -> Result<Self, String> {
        if stage != Stage::Policy {
            return Err("policy-fixture implements only the policy stage".into());
        }
        config.deny_unknown(&["action", "set", "text"])?;
        let action = config.string("action")?.unwrap_or_else(|| "rewrite".into());
        if !["rewrite", "trap", "withhold", "replace", "leak"].contains(&action.as_str()) {
            return Err(format!("unknown action {action:?}"));
        }
        Ok(Fixture {
            action,
            set: config.typed("set")?.unwrap_or_default(),
            text: config.string("text")?.unwrap_or_default(),
        })
    }
}

impl Policy for Fixture {
    fn check_call(&self, call: &Call) -> Result<Verdict, String> {
        match self.action.as_str() {
            "trap" => panic!("policy-fixture traps, as configured"),
            "leak" => {
                LEAKED
                    .lock()
                    .map_err(|e| e.to_string())?
                    .push(vec![1u8; 4 << 20]);
                Ok(Verdict {
                    decision: Decision::Allow,
                    rule: "leak".into(),
                })
            }
            "rewrite" => {
                let mut arguments: serde_json::Map<String, Value> =
                    serde_json::from_str(&call.arguments).map_err(|e| e.to_string())?;
                arguments.extend(self.set.clone());
                Ok(Verdict {
                    decision: Decision::Rewrite(Value::Object(arguments).to_string()),
                    rule: "set".into(),
                })
            }
            _ => Ok(Verdict {
                decision: Decision::Allow,
                rule: "default".into(),
            }),
        }
    }

    fn check_result(&self, _call: &Call, _result: ToolResult) -> Result<ResultVerdict, String> {
        let decision = match self.action.as_str() {
            "withhold" => ResultDecision::Withhold("results of this tool stay inside".into()),
            "replace" => ResultDecision::Replace(ToolResult {
                content: vec![ContentBlock::Text(TextBlock {
                    text: format!("replaced: {}", self.text),
                    annotations: None,
                    meta: None,
                })],
                structured_content: None,
                is_error: false,
                meta: None,
            }),
            _ => ResultDecision::Allow,
        };
        Ok(ResultVerdict {
            decision,
            rule: self.action.clone(),
        })
    }
}

export_plugin!(Fixture, stages: [policy]);
