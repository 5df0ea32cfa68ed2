//! The bundled `policy` plugin: a policy stage configured by rules, checked in this
//! order — the first that decides wins:
//!
//! 1. `max_argument_bytes`: arguments larger than this (as JSON) are denied;
//! 2. `deny = ["GLOB", …]`: tools whose raw name matches are denied;
//! 3. `allow = ["GLOB", …]`: when given, tools matching none are denied;
//! 4. `deny_arguments = ["REGEX" | { name, regex }, …]`: a string anywhere in the
//!    arguments matching one is denied;
//! 5. `confine_paths = true`: path-like arguments (absolute paths, `file://` URIs, `~/`,
//!    values of keys naming a path, file, folder or directory) must lie inside one of
//!    the agent's roots;
//! 6. `ask_destructive = true`: tools annotated `destructiveHint: true` need a person's
//!    approval;
//! 7. otherwise the call is allowed (rule `default`).
//!
//! Globs use `*` (any run of characters) and `?` (one character).

use airlock_guest::{Call, Config, Decision, Plugin, Policy, Stage, Verdict, export_plugin};
use regex_automata::meta::Regex;
use serde::Deserialize;
use serde_json::Value;

/// A `deny_arguments` entry: a bare regex, or a named one.
#[derive(Deserialize)]
#[serde(untagged)]
enum PatternSpec {
    Bare(String),
    Named { name: String, regex: String },
}

/// The configured rules.
pub struct Rules {
    max_argument_bytes: Option<u64>,
    deny: Vec<String>,
    allow: Vec<String>,
    deny_arguments: Vec<(String, Regex)>,
    confine_paths: bool,
    ask_destructive: bool,
}

impl Plugin for Rules {
    const NAME: &'static str = "policy";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");

    fn new(stage: Stage, config: Config) -> Result<Self, String> {
        if stage != Stage::Policy {
            return Err("the policy plugin implements only the policy stage".into());
        }
        Rules::from_config(&config)
    }
}

impl Rules {
    /// Reads the rules, checking every glob and regex.
    pub fn from_config(config: &Config) -> Result<Self, String> {
        config.deny_unknown(&[
            "max_argument_bytes",
            "deny",
            "allow",
            "deny_arguments",
            "confine_paths",
            "ask_destructive",
        ])?;
        let globs = |key: &str| -> Result<Vec<String>, String> {
            let list: Vec<String> = config.typed(key)?.unwrap_or_default();
            if let Some(i) = list.iter().position(String::is_empty) {
                return Err(format!("`{key}[{i}]` is empty"));
            }
            Ok(list)
        };
        let specs: Vec<PatternSpec> = config.typed("deny_arguments")?.unwrap_or_default();
        let mut deny_arguments = Vec::new();
        for (i, spec) in specs.into_iter().enumerate() {
            let (name, re) = match spec {
                PatternSpec::Bare(re) => (format!("{}", i + 1), re),
                PatternSpec::Named { name, regex } => (name, regex),
            };
            let compiled = Regex::new(&re)
                .map_err(|e| format!("`deny_arguments[{i}]` ({re:?}) is not a valid regex: {e}"))?;
            deny_arguments.push((name, compiled));
        }
        Ok(Rules {
            max_argument_bytes: config.u64("max_argument_bytes")?,
            deny: globs("deny")?,
            allow: globs("allow")?,
            deny_arguments,
            confine_paths: config.bool("confine_paths")?.unwrap_or(false),
            ask_destructive: config.bool("ask_destructive")?.unwrap_or(false),
        })
    }

    /// The verdict on one call.
    pub fn decide(&self, call: &Call) -> Verdict {
        let deny = |rule: String, reason: String| Verdict {
            decision: Decision::Deny(reason),
            rule,
        };
        if let Some(max) = self.max_argument_bytes
            && call.arguments.len() as u64 > max
        {
            return deny(
                "max_argument_bytes".into(),
                format!(
                    "the arguments are {} bytes; this policy allows at most {max}",
                    call.arguments.len()
                ),
            );
        }
        if let Some(glob) = self.deny.iter().find(|g| glob_match(g, &call.raw_tool)) {
            return deny(
                format!("deny:{glob}"),
                format!("tool \"{}\" is denied by this policy", call.raw_tool),
            );
        }
        if !self.allow.is_empty() && !self.allow.iter().any(|g| glob_match(g, &call.raw_tool)) {
            return deny(
                "allow".into(),
                format!(
                    "tool \"{}\" is not in this policy's allow list",
                    call.raw_tool
                ),
            );
        }
        let arguments: Value = serde_json::from_str(&call.arguments).unwrap_or(Value::Null);
        let mut strings = Vec::new();
        collect_strings(&arguments, None, &mut strings);
        for (name, regex) in &self.deny_arguments {
            if strings.iter().any(|(_, s)| regex.is_match(s.as_str())) {
                return deny(
                    format!("deny_arguments:{name}"),
                    format!("an argument matches the denied pattern \"{name}\""),
                );
            }
        }
        if self.confine_paths {
            let roots: Vec<String> = call.roots.iter().filter_map(|r| root_path(r)).collect();
            for (key, value) in &strings {
                let Some(path) = path_like(key.as_deref(), value) else {
                    continue;
                };
                if !roots.iter().any(|root| inside(&path, root)) {
                    return deny(
                        "confine_paths".into(),
                        format!(
                            "the path {value:?} is outside the agent's roots ({})",
                            if roots.is_empty() {
                                "it has none".to_string()
                            } else {
                                roots.join(", ")
                            }
                        ),
                    );
                }
            }
        }
        if self.ask_destructive
            && call
                .annotations
                .as_deref()
                .and_then(|a| serde_json::from_str::<Value>(a).ok())
                .is_some_and(|a| a["destructiveHint"] == Value::Bool(true))
        {
            return Verdict {
                decision: Decision::Ask(format!(
                    "Allow \"{}\" on service \"{}\"? The server marks it destructive.",
                    call.raw_tool, call.service
                )),
                rule: "ask_destructive".into(),
            };
        }
        Verdict {
            decision: Decision::Allow,
            rule: "default".into(),
        }
    }
}

impl Policy for Rules {
    fn check_call(&self, call: &Call) -> Result<Verdict, String> {
        Ok(self.decide(call))
    }
}

/// Whether `text` matches `glob` (`*` any run, `?` one character).
pub fn glob_match(glob: &str, text: &str) -> bool {
    let (g, t): (Vec<char>, Vec<char>) = (glob.chars().collect(), text.chars().collect());
    let (mut gi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if gi < g.len() && (g[gi] == '?' || g[gi] == t[ti]) {
            gi += 1;
            ti += 1;
        } else if gi < g.len() && g[gi] == '*' {
            star = Some((gi, ti));
            gi += 1;
        } else if let Some((sg, st)) = star {
            gi = sg + 1;
            ti = st + 1;
            star = Some((sg, st + 1));
        } else {
            return false;
        }
    }
    g[gi..].iter().all(|c| *c == '*')
}

/// Every string in `value` with the object key it sits under.
fn collect_strings(value: &Value, key: Option<&str>, out: &mut Vec<(Option<String>, String)>) {
    match value {
        Value::String(s) => out.push((key.map(str::to_string), s.clone())),
        Value::Array(items) => items.iter().for_each(|v| collect_strings(v, key, out)),
        Value::Object(map) => map
            .iter()
            .for_each(|(k, v)| collect_strings(v, Some(k), out)),
        _ => {}
    }
}

/// The absolute path a root URI names (`file:///a/b` → `/a/b`).
fn root_path(uri: &str) -> Option<String> {
    let path = uri.strip_prefix("file://")?;
    Some(normalize(path))
}

/// The absolute path a path-like argument names, when it is one.
fn path_like(key: Option<&str>, value: &str) -> Option<String> {
    let named = key.is_some_and(|k| {
        let k = k.to_ascii_lowercase();
        ["path", "file", "dir", "folder", "directory"]
            .iter()
            .any(|w| k.contains(w))
    });
    if let Some(rest) = value.strip_prefix("file://") {
        return Some(normalize(rest));
    }
    if value.starts_with('/') {
        return Some(normalize(value));
    }
    if value.starts_with("~/") || value == "~" || (named && !value.is_empty()) {
        // A relative or home path: it cannot be shown to lie inside a root.
        return Some(value.to_string());
    }
    None
}

/// `path` with `.` and `..` resolved lexically (never above `/`).
fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    format!("/{}", parts.join("/"))
}

/// Whether `path` (absolute, normalized) lies in `root`.
fn inside(path: &str, root: &str) -> bool {
    path.starts_with('/')
        && (root == "/"
            || path == root
            || path
                .strip_prefix(root)
                .is_some_and(|rest| rest.starts_with('/')))
}

export_plugin!(Rules, stages: [policy]);

#[cfg(test)]
mod tests {
    use super::*;

    fn call(tool: &str, arguments: Value, annotations: Option<Value>) -> Call {
        Call {
            agent: "a".into(),
            service: "fs".into(),
            tool: format!("mcp__fs__{tool}"),
            raw_tool: tool.into(),
            arguments: arguments.to_string(),
            annotations: annotations.map(|a| a.to_string()),
            roots: vec!["file:///work/project".into()],
        }
    }

    fn rules(config: Value) -> Rules {
        Rules::from_config(&Config::from_value(config).unwrap()).unwrap()
    }

    #[test]
    fn rules_decide_in_order() {
        let r = rules(serde_json::json!({
            "deny": ["delete_*"], "allow": ["read_*", "write_*", "delete_*"],
            "deny_arguments": [{"name": "rm", "regex": "rm -rf"}],
            "confine_paths": true, "ask_destructive": true, "max_argument_bytes": 200
        }));
        let rule = |c: Call| r.decide(&c).rule;
        assert_eq!(
            rule(call(
                "read_file",
                serde_json::json!({"path": "/work/project/a.txt"}),
                None
            )),
            "default"
        );
        assert_eq!(
            rule(call("delete_file", serde_json::json!({}), None)),
            "deny:delete_*"
        );
        assert_eq!(
            rule(call("move_file", serde_json::json!({}), None)),
            "allow"
        );
        assert_eq!(
            rule(call(
                "write_x",
                serde_json::json!({"cmd": "rm -rf /"}),
                None
            )),
            "deny_arguments:rm"
        );
        assert_eq!(
            rule(call(
                "read_file",
                serde_json::json!({"path": "/work/project/../secret"}),
                None
            )),
            "confine_paths"
        );
        assert_eq!(
            rule(call(
                "read_file",
                serde_json::json!({"path": "/work/projectX/a"}),
                None
            )),
            "confine_paths"
        );
        assert_eq!(
            rule(call(
                "read_file",
                serde_json::json!({"uri": "file:///etc/passwd"}),
                None
            )),
            "confine_paths"
        );
        assert_eq!(
            rule(call(
                "write_x",
                serde_json::json!({}),
                Some(serde_json::json!({"destructiveHint": true}))
            )),
            "ask_destructive"
        );
        assert_eq!(
            rule(call(
                "read_file",
                serde_json::json!({"text": "x".repeat(300)}),
                None
            )),
            "max_argument_bytes"
        );
    }

    #[test]
    fn globs() {
        assert!(glob_match("read_*", "read_file"));
        assert!(glob_match("*", ""));
        assert!(glob_match("a?c", "abc"));
        assert!(glob_match("*_file", "read_text_file"));
        assert!(!glob_match("read_*", "write_file"));
        assert!(!glob_match("a?c", "ac"));
    }

    #[test]
    fn bad_rules_are_named() {
        let err = |v: Value| {
            Rules::from_config(&Config::from_value(v).unwrap())
                .err()
                .unwrap()
        };
        assert!(err(serde_json::json!({"deny_arguments": ["("]})).contains("deny_arguments[0]"));
        assert!(err(serde_json::json!({"deny": [""]})).contains("deny[0]"));
        assert!(err(serde_json::json!({"nope": 1})).contains("nope"));
    }
}
