//! Redaction: known secrets (values the host passes in) and patterns (built-in provider
//! token shapes plus `patterns` from the configuration). Each match becomes
//! `[REDACTED:<rule>]` and is recorded in a mark naming the location and the rule.

use std::collections::BTreeMap;

use aho_corasick::{AhoCorasick, MatchKind};
use airlock_guest::{
    Config, ContentBlock, Redacted, Redaction, RedactionMark, ResourceContents, Secret, ToolResult,
    json,
};
use regex::Regex;
use serde::Deserialize;

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

/// The configured redaction policy.
pub struct RedactionPolicy {
    patterns: Vec<(String, Regex)>,
    min_secret_len: usize,
}

/// Redaction counts per (location, rule), in a stable order.
type Tally = BTreeMap<(String, String), u32>;

impl RedactionPolicy {
    /// Reads `patterns`, `builtin_patterns` and `min_secret_len`, compiling every regex.
    pub fn from_config(config: &Config) -> Result<Self, String> {
        config.deny_unknown(&["patterns", "builtin_patterns", "min_secret_len"])?;
        let mut patterns = Vec::new();
        if config.bool("builtin_patterns")?.unwrap_or(true) {
            for (name, re) in BUILTIN_PATTERNS {
                patterns.push((
                    name.to_string(),
                    Regex::new(re).map_err(|e| format!("built-in {name}: {e}"))?,
                ));
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
            let compiled = Regex::new(&re)
                .map_err(|e| format!("`patterns[{i}]` ({re:?}) is not a valid regex: {e}"))?;
            patterns.push((name, compiled));
        }
        let min_secret_len = config.u64("min_secret_len")?.unwrap_or(4) as usize;
        Ok(RedactionPolicy {
            patterns,
            min_secret_len: min_secret_len.max(1),
        })
    }

    /// Redacts `result`, replacing every known secret and pattern match.
    pub fn redact(&self, mut result: ToolResult, secrets: &[Secret]) -> Result<Redacted, String> {
        let secrets: Vec<&Secret> = secrets
            .iter()
            .filter(|s| s.value.len() >= self.min_secret_len)
            .collect();
        let matcher = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .build(secrets.iter().map(|s| s.value.as_bytes()))
            .map_err(|e| format!("cannot build the secret matcher: {e}"))?;
        let scrub = Scrubber {
            policy: self,
            secrets: &secrets,
            matcher: &matcher,
        };
        let mut tally = Tally::new();
        for (i, block) in result.content.iter_mut().enumerate() {
            let location = format!("content[{i}]");
            let mut f = |s: &mut String| scrub.apply(s, &location, &mut tally);
            match block {
                ContentBlock::Text(t) => f(&mut t.text),
                ContentBlock::Image(_) | ContentBlock::Audio(_) => {}
                ContentBlock::ResourceLink(l) => {
                    f(&mut l.uri);
                    f(&mut l.name);
                    l.title.as_mut().map(&mut f);
                    l.description.as_mut().map(&mut f);
                }
                ContentBlock::Embedded(r) => match &mut r.contents {
                    ResourceContents::Text(t) => {
                        f(&mut t.uri);
                        f(&mut t.text);
                    }
                    ResourceContents::Blob(b) => f(&mut b.uri),
                },
                ContentBlock::Unknown(u) => scrub.apply_json(&mut u.raw, &location, &mut tally),
            }
        }
        if let Some(sc) = result.structured_content.as_mut() {
            scrub.apply_json(sc, "structuredContent", &mut tally);
        }
        if let Some(meta) = result.meta.as_mut() {
            scrub.apply_json(meta, "_meta", &mut tally);
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
    policy: &'a RedactionPolicy,
    secrets: &'a [&'a Secret],
    matcher: &'a AhoCorasick,
}

impl Scrubber<'_> {
    /// Redacts one string in place, tallying matches under `location`.
    fn apply(&self, text: &mut String, location: &str, tally: &mut Tally) {
        if let Some(new) = self.redact_str(text, location, tally) {
            *text = new;
        }
    }

    /// Redacts every string inside a JSON document (kept as JSON text).
    fn apply_json(&self, text: &mut String, location: &str, tally: &mut Tally) {
        match serde_json::from_str::<serde_json::Value>(text) {
            Ok(mut value) => {
                if json::map_strings(&mut value, &mut |s| self.redact_str(s, location, tally)) > 0 {
                    *text = value.to_string();
                }
            }
            // Not JSON: redact it as plain text so nothing escapes.
            Err(_) => self.apply(text, location, tally),
        }
    }

    fn redact_str(&self, text: &str, location: &str, tally: &mut Tally) -> Option<String> {
        let mut current: Option<String> = None;
        if !self.secrets.is_empty() && self.matcher.is_match(text) {
            let mut out = String::with_capacity(text.len());
            let mut last = 0;
            for m in self.matcher.find_iter(text) {
                let name = &self.secrets[m.pattern().as_usize()].name;
                out.push_str(&text[last..m.start()]);
                out.push_str(&format!("[REDACTED:secret:{name}]"));
                *tally
                    .entry((location.to_string(), format!("secret:{name}")))
                    .or_default() += 1;
                last = m.end();
            }
            out.push_str(&text[last..]);
            current = Some(out);
        }
        for (name, re) in &self.policy.patterns {
            let source = current.as_deref().unwrap_or(text);
            let mut count = 0u32;
            let replaced = re.replace_all(source, |_: &regex::Captures| {
                count += 1;
                format!("[REDACTED:pattern:{name}]")
            });
            if count > 0 {
                let replaced = replaced.into_owned();
                *tally
                    .entry((location.to_string(), format!("pattern:{name}")))
                    .or_default() += count;
                current = Some(replaced);
            }
        }
        current
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
