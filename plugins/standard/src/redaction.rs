//! Redaction: known secrets (values the host passes in) and patterns (built-in provider
//! token shapes plus `patterns` from the configuration). Each match becomes
//! `[REDACTED:<rule>]` and is recorded in a mark naming the location and the rule.
//!
//! One pass per string: every secret and every pattern are compiled into one
//! multi-pattern regex (secrets first, longest first, then patterns), and the rule of a
//! match is its pattern's id. Inside the sandbox a vector prefilter finds where a match
//! may start (see [`crate::finder`]). The matcher is kept for as long as the secrets stay the
//! same. A string is copied only from its first match on. Every field a block carries is
//! redacted — text, URIs, names, titles, descriptions, MIME types, data, and every string
//! and key of its JSON (annotations, `_meta`, structured content, unknown blocks).

use std::cell::RefCell;
use std::collections::BTreeMap;

use airlock_guest::{
    Config, ContentBlock, Redacted, Redaction, RedactionMark, ResourceContents, Secret, ToolResult,
};
use regex_automata::meta::Regex;

use crate::finder::Finder;
use serde::Deserialize;
use serde_json::Value;

use crate::Standard;

/// Token shapes redacted unless `builtin_patterns = false`.
pub const BUILTIN_PATTERNS: &[(&str, &str)] = &[
    (
        "private_key",
        r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
    ),
    (
        "github_token",
        r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
    ),
    ("anthropic_key", r"\bsk-ant-[A-Za-z0-9_-]{20,}"),
    ("openai_key", r"\bsk-(?:proj-|svcacct-)?[A-Za-z0-9_-]{20,}"),
    ("aws_access_key", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    ("slack_token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    ("google_api_key", r"\bAIza[0-9A-Za-z_-]{35}"),
    ("stripe_key", r"\b[rs]k_live_[0-9a-zA-Z]{24,}"),
    (
        "jwt",
        r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
    ),
];

/// A pattern from the configuration: a bare regex, or a named one.
#[derive(Deserialize)]
#[serde(untagged)]
enum PatternSpec {
    Bare(String),
    Named { name: String, regex: String },
}

/// The compiled matcher for one set of secrets: one regex for all of them and every
/// pattern, and the rule each pattern id stands for.
struct Matcher {
    /// The secrets it was built for (name, value), to know when to rebuild.
    secrets: Vec<(String, String)>,
    finder: Option<Finder>,
    rules: Vec<String>,
}

/// The configured redaction policy.
pub struct RedactionPolicy {
    patterns: Vec<(String, String)>,
    min_secret_len: usize,
    matcher: RefCell<Option<Matcher>>,
}

/// Redaction counts per (location, rule), in a stable order.
type Tally = BTreeMap<(String, String), u32>;

/// Escapes `text` to match itself literally.
fn literal(text: &str) -> String {
    regex_syntax::escape(text)
}

impl RedactionPolicy {
    /// Reads `patterns`, `builtin_patterns` and `min_secret_len`, checking every regex.
    pub fn from_config(config: &Config) -> Result<Self, String> {
        config.deny_unknown(&["patterns", "builtin_patterns", "min_secret_len"])?;
        let mut patterns = Vec::new();
        if config.bool("builtin_patterns")?.unwrap_or(true) {
            for (name, re) in BUILTIN_PATTERNS {
                patterns.push((name.to_string(), re.to_string()));
            }
        }
        let specs: Vec<PatternSpec> = config.typed("patterns")?.unwrap_or_default();
        for (i, spec) in specs.into_iter().enumerate() {
            let (name, re) = match spec {
                PatternSpec::Bare(re) => (format!("custom{}", i + 1), re),
                PatternSpec::Named { name, regex } => (name, regex),
            };
            if re.is_empty() {
                return Err(format!("`patterns[{i}]` is empty"));
            }
            Regex::new(&re)
                .map_err(|e| format!("`patterns[{i}]` ({re:?}) is not a valid regex: {e}"))?;
            patterns.push((name, re));
        }
        let min_secret_len = config.u64("min_secret_len")?.unwrap_or(4) as usize;
        Ok(RedactionPolicy {
            patterns,
            min_secret_len: min_secret_len.max(1),
            matcher: RefCell::new(None),
        })
    }

    /// The matcher for `secrets`, built when they differ from the last call's.
    fn matcher(&self, secrets: &[Secret]) -> Result<std::cell::Ref<'_, Matcher>, String> {
        let used = || {
            secrets
                .iter()
                .filter(|s| s.value.len() >= self.min_secret_len)
        };
        // Compared in place: the same secrets arrive with every call, so nothing is
        // copied unless they changed.
        let fresh = self.matcher.borrow().as_ref().is_some_and(|m| {
            m.secrets.len() == used().count()
                && m.secrets
                    .iter()
                    .zip(used())
                    .all(|((name, value), s)| *name == s.name && *value == s.value)
        });
        if !fresh {
            let wanted: Vec<(String, String)> =
                used().map(|s| (s.name.clone(), s.value.clone())).collect();
            let mut ordered: Vec<&(String, String)> = wanted.iter().collect();
            // Longest first, so a secret that contains another wins where both match.
            ordered.sort_by_key(|s| std::cmp::Reverse(s.1.len()));
            let mut sources = Vec::new();
            let mut rules = Vec::new();
            for (name, value) in ordered {
                sources.push(literal(value));
                rules.push(format!("secret:{name}"));
            }
            for (name, re) in &self.patterns {
                sources.push(re.clone());
                rules.push(format!("pattern:{name}"));
            }
            let finder = if sources.is_empty() {
                None
            } else {
                Some(Finder::new(&sources)?)
            };
            *self.matcher.borrow_mut() = Some(Matcher {
                secrets: wanted,
                finder,
                rules,
            });
        }
        Ok(std::cell::Ref::map(self.matcher.borrow(), |m| {
            m.as_ref().expect("built above")
        }))
    }

    /// Redacts `result`, replacing every known secret and pattern match in every field.
    pub fn redact(&self, mut result: ToolResult, secrets: &[Secret]) -> Result<Redacted, String> {
        let matcher = self.matcher(secrets)?;
        let Some(finder) = matcher.finder.as_ref() else {
            return Ok(Redacted {
                result,
                marks: Vec::new(),
            });
        };
        let scrub = Scrubber {
            finder,
            rules: &matcher.rules,
        };
        let mut tally = Tally::new();
        for (i, block) in result.content.iter_mut().enumerate() {
            let location = format!("content[{i}]");
            scrub.block(block, &location, &mut tally);
        }
        if let Some(sc) = result.structured_content.as_mut() {
            scrub.json(sc, "structuredContent", &mut tally);
        }
        if let Some(meta) = result.meta.as_mut() {
            scrub.json(meta, "_meta", &mut tally);
        }
        let marks = tally
            .into_iter()
            .map(|((location, rule), count)| RedactionMark {
                location,
                rule,
                count,
            })
            .collect();
        Ok(Redacted { result, marks })
    }
}

struct Scrubber<'a> {
    finder: &'a Finder,
    rules: &'a [String],
}

impl Scrubber<'_> {
    /// Every field of one block.
    fn block(&self, block: &mut ContentBlock, location: &str, tally: &mut Tally) {
        let mut text = |s: &mut String| self.text(s, location, tally);
        let mut json_fields = Vec::new();
        match block {
            ContentBlock::Text(t) => {
                text(&mut t.text);
                json_fields.extend([&mut t.annotations, &mut t.meta]);
            }
            ContentBlock::Image(m) | ContentBlock::Audio(m) => {
                text(&mut m.data);
                text(&mut m.mime_type);
                json_fields.extend([&mut m.annotations, &mut m.meta]);
            }
            ContentBlock::ResourceLink(l) => {
                text(&mut l.uri);
                text(&mut l.name);
                for field in [&mut l.title, &mut l.description, &mut l.mime_type] {
                    if let Some(f) = field.as_mut() {
                        text(f);
                    }
                }
                json_fields.extend([&mut l.annotations, &mut l.meta]);
            }
            ContentBlock::Embedded(r) => {
                match &mut r.contents {
                    ResourceContents::Text(t) => {
                        text(&mut t.uri);
                        text(&mut t.text);
                        if let Some(m) = t.mime_type.as_mut() {
                            text(m);
                        }
                        json_fields.push(&mut t.meta);
                    }
                    ResourceContents::Blob(b) => {
                        text(&mut b.uri);
                        text(&mut b.blob);
                        if let Some(m) = b.mime_type.as_mut() {
                            text(m);
                        }
                        json_fields.push(&mut b.meta);
                    }
                }
                json_fields.extend([&mut r.annotations, &mut r.meta]);
            }
            ContentBlock::Unknown(u) => {
                text(&mut u.kind);
                self.json(&mut u.raw, location, tally);
            }
        }
        for field in json_fields.into_iter().flatten() {
            self.json(field, location, tally);
        }
    }

    /// Redacts one string in place.
    fn text(&self, text: &mut String, location: &str, tally: &mut Tally) {
        if let Some(new) = self.redact_str(text, location, tally) {
            *text = new;
        }
    }

    /// Redacts every string and key inside a JSON document (kept as JSON text); text
    /// that is not JSON is redacted as plain text, so nothing escapes.
    fn json(&self, text: &mut String, location: &str, tally: &mut Tally) {
        match serde_json::from_str::<Value>(text) {
            Ok(mut value) => {
                if self.walk(&mut value, location, tally) {
                    *text = value.to_string();
                }
            }
            Err(_) => self.text(text, location, tally),
        }
    }

    /// Redacts a JSON value in place; returns whether anything changed.
    fn walk(&self, value: &mut Value, location: &str, tally: &mut Tally) -> bool {
        match value {
            Value::String(s) => match self.redact_str(s, location, tally) {
                Some(new) => {
                    *s = new;
                    true
                }
                None => false,
            },
            Value::Array(items) => items
                .iter_mut()
                .fold(false, |changed, v| self.walk(v, location, tally) | changed),
            Value::Object(map) => {
                let mut changed = false;
                if map.keys().any(|k| self.finder.is_match(k.as_str())) {
                    let old = std::mem::take(map);
                    for (key, v) in old {
                        let key = self.redact_str(&key, location, tally).unwrap_or(key);
                        map.insert(key, v);
                    }
                    changed = true;
                }
                map.values_mut().fold(changed, |changed, v| {
                    self.walk(v, location, tally) | changed
                })
            }
            _ => false,
        }
    }

    /// `text` with every match replaced, or `None` when nothing matched (no copy made).
    fn redact_str(&self, text: &str, location: &str, tally: &mut Tally) -> Option<String> {
        let mut matches = self.finder.find_iter(text).peekable();
        matches.peek()?;
        let mut out = String::with_capacity(text.len());
        let mut last = 0;
        for m in matches {
            if m.is_empty() {
                continue;
            }
            let rule = &self.rules[m.pattern().as_usize()];
            out.push_str(&text[last..m.start()]);
            out.push_str("[REDACTED:");
            out.push_str(rule);
            out.push(']');
            *tally
                .entry((location.to_string(), rule.clone()))
                .or_default() += 1;
            last = m.end();
        }
        if last == 0 {
            return None;
        }
        out.push_str(&text[last..]);
        Some(out)
    }
}

impl Redaction for Standard {
    fn redact(&self, result: ToolResult, secrets: Vec<Secret>) -> Result<Redacted, String> {
        match self {
            Standard::Redaction(p) => p.redact(result, &secrets),
            _ => Err(self.wrong_stage("redaction")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use airlock_guest::TextBlock;

    fn text_of(redacted: &Redacted) -> &str {
        match &redacted.result.content[0] {
            ContentBlock::Text(t) => &t.text,
            _ => unreachable!("one text block"),
        }
    }

    /// The matcher is kept while the secrets stay the same, and rebuilt when they change.
    #[test]
    fn a_changed_secret_set_rebuilds_the_matcher() {
        let policy = RedactionPolicy::from_config(&Config::default()).unwrap();
        let result = || ToolResult {
            content: vec![ContentBlock::Text(TextBlock {
                text: "alpha-secret and beta-secret".into(),
                annotations: None,
                meta: None,
            })],
            structured_content: None,
            is_error: false,
            meta: None,
        };
        let secret = |name: &str, value: &str| Secret {
            name: name.into(),
            value: value.into(),
        };
        let alpha = [secret("A", "alpha-secret")];
        let first = policy.redact(result(), &alpha).unwrap();
        assert_eq!(text_of(&first), "[REDACTED:secret:A] and beta-secret");
        let again = policy.redact(result(), &alpha).unwrap();
        assert_eq!(text_of(&again), text_of(&first));
        let beta = [secret("B", "beta-secret")];
        let second = policy.redact(result(), &beta).unwrap();
        assert_eq!(text_of(&second), "alpha-secret and [REDACTED:secret:B]");
        let renamed = [secret("C", "beta-secret")];
        let third = policy.redact(result(), &renamed).unwrap();
        assert_eq!(text_of(&third), "alpha-secret and [REDACTED:secret:C]");
    }
}
