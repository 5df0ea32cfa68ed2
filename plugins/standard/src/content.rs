//! Lossless content conversion: text as-is; images keep data and MIME type; an embedded
//! text resource becomes `[resource <uri>]\n<text>`; a binary one
//! `[resource <uri>] (binary, <mime>)`; anything else (audio, resource links, unknown
//! future blocks) becomes its raw JSON as text. Nothing is dropped; `is_error` is kept.

use airlock_guest::{Content, ContentBlock, ResourceContents, TextBlock, ToolResult, json};

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

/// Converts a whole result.
pub fn convert(mut result: ToolResult) -> ToolResult {
    result.content = result.content.into_iter().map(convert_block).collect();
    result
}

impl Content for Standard {
    fn convert(&self, result: ToolResult) -> Result<ToolResult, String> {
        match self {
            Standard::Content => Ok(convert(result)),
            _ => Err(self.wrong_stage("content")),
        }
    }
}
