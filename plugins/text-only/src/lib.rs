//! The bundled `text-only` plugin: a content stage that turns every non-text block into a
//! placeholder — `[image content]`, `[audio content]`, `[resource content]` — for models
//! that take text alone. Unknown future blocks become their raw JSON text. `is_error` is
//! kept.

use airlock_guest::{
    Config, Content, ContentBlock, Plugin, Stage, TextBlock, ToolResult, export_plugin, json,
};

/// The plugin value (it has no options).
pub struct TextOnly;

impl Plugin for TextOnly {
    const NAME: &'static str = "text-only";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");

    fn new(stage: Stage, config: Config) -> Result<Self, String> {
        if stage != Stage::Content {
            return Err("text-only implements only the content stage".into());
        }
        config.deny_unknown(&[])?;
        Ok(TextOnly)
    }
}

/// Converts one block to text.
pub fn convert_block(block: ContentBlock) -> ContentBlock {
    let text = match &block {
        ContentBlock::Text(_) => return block,
        ContentBlock::Image(_) => "[image content]".to_string(),
        ContentBlock::Audio(_) => "[audio content]".to_string(),
        ContentBlock::Embedded(_) | ContentBlock::ResourceLink(_) => {
            "[resource content]".to_string()
        }
        ContentBlock::Unknown(_) => json::block_to_mcp(&block).to_string(),
    };
    ContentBlock::Text(TextBlock {
        text,
        annotations: None,
        meta: None,
    })
}

/// Converts a whole result.
pub fn convert(mut result: ToolResult) -> ToolResult {
    result.content = result.content.into_iter().map(convert_block).collect();
    result
}

impl Content for TextOnly {
    fn convert(&self, result: ToolResult) -> Result<ToolResult, String> {
        Ok(convert(result))
    }
}

export_plugin!(TextOnly, stages: [content]);
