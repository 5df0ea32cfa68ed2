//! `{{name}}`: an Airlock redaction plugin. It replaces the service's known secrets and
//! each of the configured `words` in every text block with `[REDACTED:<rule>]`, and marks
//! what it removed.
//!
//! Configure it per service:
//! `adapters = { redaction = ["builtin:standard", "./{{crate}}.wasm"] }` and
//! `adapter_config = { redaction = { words = ["Project Falcon"] } }`

use airlock_guest::{
    Config, ContentBlock, Plugin, Redacted, Redaction, RedactionMark, Secret, Stage, TextBlock,
    ToolResult, export_plugin,
};

/// The words to remove, besides the service's secrets.
pub struct Scrub {
    words: Vec<String>,
}

impl Plugin for Scrub {
    const NAME: &'static str = "{{name}}";

    fn new(_stage: Stage, config: Config) -> Result<Self, String> {
        config.deny_unknown(&["words"])?;
        let words: Vec<String> = config.typed("words")?.unwrap_or_default();
        if words.iter().any(String::is_empty) {
            return Err("`words` must not hold an empty string".to_string());
        }
        Ok(Scrub { words })
    }
}

impl Redaction for Scrub {
    fn redact(&self, mut result: ToolResult, secrets: Vec<Secret>) -> Result<Redacted, String> {
        let mut needles: Vec<(&str, String)> = secrets
            .iter()
            .filter(|s| !s.value.is_empty())
            .map(|s| (s.value.as_str(), format!("secret:{}", s.name)))
            .collect();
        needles.extend(self.words.iter().map(|w| (w.as_str(), "word".to_string())));
        let mut marks = Vec::new();
        for (index, block) in result.content.iter_mut().enumerate() {
            let ContentBlock::Text(TextBlock { text, .. }) = block else {
                continue;
            };
            for (needle, rule) in &needles {
                let count = text.matches(needle).count();
                if count > 0 {
                    *text = text.replace(needle, &format!("[REDACTED:{rule}]"));
                    marks.push(RedactionMark {
                        location: format!("content[{index}].text"),
                        rule: rule.clone(),
                        count: count as u32,
                    });
                }
            }
        }
        Ok(Redacted { result, marks })
    }
}

export_plugin!(Scrub, stages: [redaction]);

#[cfg(test)]
mod tests {
    use super::*;

    fn text(t: &str) -> ToolResult {
        ToolResult {
            content: vec![ContentBlock::Text(TextBlock {
                text: t.into(),
                annotations: None,
                meta: None,
            })],
            structured_content: None,
            is_error: false,
            meta: None,
        }
    }

    #[test]
    fn removes_secrets_and_words_and_marks_them() {
        let scrub = Scrub::new(Stage::Redaction, Config::parse(r#"{"words": ["Falcon"]}"#).unwrap()).unwrap();
        let secret = Secret { name: "API_TOKEN".into(), value: "tok-123".into() };
        let out = scrub.redact(text("Falcon uses tok-123 and tok-123"), vec![secret]).unwrap();
        let ContentBlock::Text(block) = &out.result.content[0] else { panic!() };
        assert_eq!(block.text, "[REDACTED:word] uses [REDACTED:secret:API_TOKEN] and [REDACTED:secret:API_TOKEN]");
        assert_eq!(out.marks.iter().map(|m| m.count).sum::<u32>(), 3);
    }
}
