//! Content conversion, two modes (`mode` in the stage's configuration):
//! - `lossless` (default), for a model: text as-is; images keep data and MIME type; an
//!   embedded text resource becomes `[resource <uri>]\n<text>`; a binary one
//!   `[resource <uri>] (binary, <mime>)`; anything else (audio, resource links, unknown
//!   future blocks) becomes its raw JSON as text;
//! - `passthrough`, for an MCP client behind the gateway: every block as the server sent
//!   it.
//!
//! Nothing is dropped; `is_error` is kept.

use airlock_guest::{Config, Content, ContentBlock, ResourceContents, TextBlock, ToolResult, json};

use crate::Standard;

fn text(text: String, annotations: Option<String>, meta: Option<String>) -> ContentBlock {
    ContentBlock::Text(TextBlock {
        text,
        annotations,
        meta,
    })
}

/// Converts one block losslessly.
pub fn convert_block(block: ContentBlock) -> ContentBlock {
    match block {
        ContentBlock::Text(_) | ContentBlock::Image(_) => block,
        ContentBlock::Embedded(r) => {
            let body = match r.contents {
                ResourceContents::Text(t) => format!("[resource {}]\n{}", t.uri, t.text),
                ResourceContents::Blob(b) => format!(
                    "[resource {}] (binary, {})",
                    b.uri,
                    b.mime_type.as_deref().unwrap_or("application/octet-stream")
                ),
            };
            text(body, r.annotations, r.meta)
        }
        ContentBlock::Audio(_) | ContentBlock::ResourceLink(_) | ContentBlock::Unknown(_) => {
            text(json::block_to_mcp(&block).to_string(), None, None)
        }
    }
}

/// Converts a whole result losslessly.
pub fn convert(mut result: ToolResult) -> ToolResult {
    result.content = result.content.into_iter().map(convert_block).collect();
    result
}

/// How blocks are converted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContentMode {
    /// For a model: see [`convert_block`].
    Lossless,
    /// Every block as the server sent it.
    Passthrough,
}

impl ContentMode {
    /// Reads `mode` (`lossless` or `passthrough`).
    pub fn from_config(config: &Config) -> Result<Self, String> {
        config.deny_unknown(&["mode"])?;
        match config.string("mode")?.as_deref() {
            None | Some("lossless") => Ok(ContentMode::Lossless),
            Some("passthrough") => Ok(ContentMode::Passthrough),
            Some(other) => Err(format!(
                "`mode` must be \"lossless\" or \"passthrough\", got \"{other}\""
            )),
        }
    }
}

impl Content for Standard {
    fn convert(&self, result: ToolResult) -> Result<ToolResult, String> {
        match self {
            Standard::Content(ContentMode::Lossless) => Ok(convert(result)),
            Standard::Content(ContentMode::Passthrough) => Ok(result),
            _ => Err(self.wrong_stage("content")),
        }
    }
}
