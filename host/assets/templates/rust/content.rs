//! `{{name}}`: an Airlock content plugin. It keeps text blocks, caps each at
//! `max_chars` characters (default 2000), and turns every other block into a one-line
//! text note, so a model sees only text.
//!
//! Configure it per service: `adapters = { content = "./{{crate}}.wasm" }` and
//! `adapter_config = { content = { max_chars = 500 } }`

use airlock_guest::{Config, Content, ContentBlock, Plugin, Stage, TextBlock, ToolResult, export_plugin};

/// The text cap.
pub struct TextOnly {
    max_chars: usize,
}

impl Plugin for TextOnly {
    const NAME: &'static str = "{{name}}";

    fn new(_stage: Stage, config: Config) -> Result<Self, String> {
        config.deny_unknown(&["max_chars"])?;
        let max_chars = config.u64("max_chars")?.unwrap_or(2000);
        Ok(TextOnly { max_chars: max_chars as usize })
    }
}

fn note(text: String) -> ContentBlock {
    ContentBlock::Text(TextBlock { text, annotations: None, meta: None })
}

impl Content for TextOnly {
    fn convert(&self, mut result: ToolResult) -> Result<ToolResult, String> {
        result.content = result
            .content
            .into_iter()
            .map(|block| match block {
                ContentBlock::Text(mut t) => {
                    if let Some((cut, _)) = t.text.char_indices().nth(self.max_chars) {
                        t.text.truncate(cut);
                        t.text.push_str(" [cut]");
                    }
                    ContentBlock::Text(t)
                }
                ContentBlock::Image(m) => note(format!("[image: {}]", m.mime_type)),
                ContentBlock::Audio(m) => note(format!("[audio: {}]", m.mime_type)),
                ContentBlock::ResourceLink(l) => note(format!("[resource: {}]", l.uri)),
                ContentBlock::Embedded(_) => note("[embedded resource]".to_string()),
                ContentBlock::Unknown(u) => note(format!("[{} block]", u.kind)),
            })
            .collect();
        Ok(result)
    }
}

export_plugin!(TextOnly, stages: [content]);

#[cfg(test)]
mod tests {
    use super::*;
    use airlock_guest::MediaBlock;

    #[test]
    fn caps_text_and_notes_other_blocks() {
        let plugin = TextOnly::new(Stage::Content, Config::parse(r#"{"max_chars": 5}"#).unwrap()).unwrap();
        let input = ToolResult {
            content: vec![
                note("hello world".into()),
                ContentBlock::Image(MediaBlock { data: "AAAA".into(), mime_type: "image/png".into(), annotations: None, meta: None }),
            ],
            structured_content: None,
            is_error: false,
            meta: None,
        };
        let out = plugin.convert(input).unwrap();
        let texts: Vec<String> = out.content.into_iter().map(|b| match b {
            ContentBlock::Text(t) => t.text,
            other => panic!("{other:?}"),
        }).collect();
        assert_eq!(texts, ["hello [cut]", "[image: image/png]"]);
    }
}
