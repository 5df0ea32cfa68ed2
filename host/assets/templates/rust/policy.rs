//! `{{name}}`: an Airlock policy plugin. It denies calls to tools whose name starts with
//! one of `deny_prefixes` (default `["delete_"]`), asks a person before tools whose
//! name starts with one of `ask_prefixes`, and allows the rest.
//!
//! Configure it per service:
//! `adapter_config = { policy = { deny_prefixes = ["delete_", "drop_"] } }`

use airlock_guest::{Call, Config, Decision, Plugin, Policy, Stage, Verdict, export_plugin};

/// The plugin's rules.
pub struct Guard {
    deny_prefixes: Vec<String>,
    ask_prefixes: Vec<String>,
}

impl Plugin for Guard {
    const NAME: &'static str = "{{name}}";

    fn new(_stage: Stage, config: Config) -> Result<Self, String> {
        config.deny_unknown(&["deny_prefixes", "ask_prefixes"])?;
        Ok(Guard {
            deny_prefixes: config
                .typed("deny_prefixes")?
                .unwrap_or_else(|| vec!["delete_".to_string()]),
            ask_prefixes: config.typed("ask_prefixes")?.unwrap_or_default(),
        })
    }
}

fn verdict(decision: Decision, rule: &str) -> Verdict {
    Verdict {
        decision,
        rule: rule.to_string(),
    }
}

impl Policy for Guard {
    fn check_call(&self, call: &Call) -> Result<Verdict, String> {
        let tool = call.raw_tool.as_str();
        if let Some(prefix) = self.deny_prefixes.iter().find(|p| tool.starts_with(p.as_str())) {
            let reason = format!("tools named \"{prefix}…\" are not allowed");
            return Ok(verdict(Decision::Deny(reason), "deny_prefixes"));
        }
        if let Some(prefix) = self.ask_prefixes.iter().find(|p| tool.starts_with(p.as_str())) {
            let question = format!("Run {tool} on {} (it starts with \"{prefix}\")?", call.service);
            return Ok(verdict(Decision::Ask(question), "ask_prefixes"));
        }
        Ok(verdict(Decision::Allow, "default"))
    }
}

export_plugin!(Guard, stages: [policy]);

#[cfg(test)]
mod tests {
    use super::*;

    fn call(raw_tool: &str) -> Call {
        Call {
            agent: "default".into(),
            service: "notes".into(),
            tool: format!("mcp__notes__{raw_tool}"),
            raw_tool: raw_tool.into(),
            arguments: "{}".into(),
            annotations: None,
            roots: vec![],
        }
    }

    fn guard(config: &str) -> Guard {
        Guard::new(Stage::Policy, Config::parse(config).unwrap()).unwrap()
    }

    #[test]
    fn denies_asks_and_allows_by_tool_name() {
        let g = guard(r#"{"deny_prefixes": ["delete_"], "ask_prefixes": ["send_"]}"#);
        let deny = g.check_call(&call("delete_note")).unwrap();
        assert!(matches!(deny.decision, Decision::Deny(_)), "{deny:?}");
        assert_eq!(deny.rule, "deny_prefixes");
        let ask = g.check_call(&call("send_mail")).unwrap();
        assert!(matches!(ask.decision, Decision::Ask(_)), "{ask:?}");
        let allow = g.check_call(&call("read_note")).unwrap();
        assert!(matches!(allow.decision, Decision::Allow), "{allow:?}");
    }

    #[test]
    fn unknown_settings_are_refused() {
        let err = Guard::new(Stage::Policy, Config::parse(r#"{"deny": []}"#).unwrap());
        assert!(err.is_err());
    }
}
