//! Airlock's typed MCP values ([`crate::mcp`]) and the contract's, both ways, by value:
//! strings move across, and only the free-form JSON fields (annotations, `_meta`,
//! `structuredContent`, an unknown block), which the contract carries as JSON text, are
//! written or read.

use serde_json::Value;

use super::bindings::airlock::adapter::types as wit;
use crate::mcp;

/// A result as the contract takes it.
pub fn result_into_wit(result: mcp::ToolResult) -> wit::ToolResult {
    wit::ToolResult {
        content: result.content.into_iter().map(block_into_wit).collect(),
        structured_content: result.structured_content.map(|v| v.to_string()),
        is_error: result.is_error,
        meta: result.meta.map(|m| Value::Object(m).to_string()),
    }
}

/// A result as the contract gave it back. Text that should be JSON and is not (a
/// plugin's mistake) is kept as a JSON string rather than dropped.
pub fn result_from_wit(result: wit::ToolResult) -> mcp::ToolResult {
    mcp::ToolResult {
        content: result.content.into_iter().map(block_from_wit).collect(),
        structured_content: result.structured_content.map(value_or_string),
        is_error: result.is_error,
        meta: match result.meta.as_deref().map(serde_json::from_str) {
            Some(Ok(Value::Object(meta))) => Some(meta),
            _ => None,
        },
    }
}

fn text(value: Option<Value>) -> Option<String> {
    value.map(|v| v.to_string())
}

fn value(text: Option<String>) -> Option<Value> {
    text.and_then(|t| serde_json::from_str(&t).ok())
}

fn value_or_string(text: String) -> Value {
    serde_json::from_str(&text).unwrap_or(Value::String(text))
}

fn media_into_wit(m: mcp::MediaBlock) -> wit::MediaBlock {
    wit::MediaBlock {
        data: m.data,
        mime_type: m.mime_type,
        annotations: text(m.annotations),
        meta: text(m.meta),
    }
}

fn media_from_wit(m: wit::MediaBlock) -> mcp::MediaBlock {
    mcp::MediaBlock {
        data: m.data,
        mime_type: m.mime_type,
        annotations: value(m.annotations),
        meta: value(m.meta),
    }
}

fn block_into_wit(block: mcp::ContentBlock) -> wit::ContentBlock {
    match block {
        mcp::ContentBlock::Text(t) => wit::ContentBlock::Text(wit::TextBlock {
            text: t.text,
            annotations: text(t.annotations),
            meta: text(t.meta),
        }),
        mcp::ContentBlock::Image(m) => wit::ContentBlock::Image(media_into_wit(m)),
        mcp::ContentBlock::Audio(m) => wit::ContentBlock::Audio(media_into_wit(m)),
        mcp::ContentBlock::ResourceLink(l) => wit::ContentBlock::ResourceLink(wit::ResourceLink {
            uri: l.uri,
            name: l.name,
            title: l.title,
            description: l.description,
            mime_type: l.mime_type,
            size: l.size,
            annotations: text(l.annotations),
            meta: text(l.meta),
        }),
        mcp::ContentBlock::Resource(r) => wit::ContentBlock::Embedded(wit::EmbeddedResource {
            contents: match r.contents {
                mcp::ResourceContents::Text {
                    uri,
                    mime_type,
                    text: body,
                    meta,
                } => wit::ResourceContents::Text(wit::TextResource {
                    uri,
                    mime_type,
                    text: body,
                    meta: text(meta),
                }),
                mcp::ResourceContents::Blob {
                    uri,
                    mime_type,
                    blob,
                    meta,
                } => wit::ResourceContents::Blob(wit::BlobResource {
                    uri,
                    mime_type,
                    blob,
                    meta: text(meta),
                }),
            },
            annotations: text(r.annotations),
            meta: text(r.meta),
        }),
        mcp::ContentBlock::Unknown(u) => wit::ContentBlock::Unknown(wit::UnknownBlock {
            kind: u.kind,
            raw: u.raw.to_string(),
        }),
    }
}

fn block_from_wit(block: wit::ContentBlock) -> mcp::ContentBlock {
    match block {
        wit::ContentBlock::Text(t) => mcp::ContentBlock::Text(mcp::TextBlock {
            text: t.text,
            annotations: value(t.annotations),
            meta: value(t.meta),
        }),
        wit::ContentBlock::Image(m) => mcp::ContentBlock::Image(media_from_wit(m)),
        wit::ContentBlock::Audio(m) => mcp::ContentBlock::Audio(media_from_wit(m)),
        wit::ContentBlock::ResourceLink(l) => mcp::ContentBlock::ResourceLink(mcp::ResourceLink {
            uri: l.uri,
            name: l.name,
            title: l.title,
            description: l.description,
            mime_type: l.mime_type,
            size: l.size,
            annotations: value(l.annotations),
            meta: value(l.meta),
        }),
        wit::ContentBlock::Embedded(r) => mcp::ContentBlock::Resource(mcp::EmbeddedResource {
            contents: match r.contents {
                wit::ResourceContents::Text(t) => mcp::ResourceContents::Text {
                    uri: t.uri,
                    mime_type: t.mime_type,
                    text: t.text,
                    meta: value(t.meta),
                },
                wit::ResourceContents::Blob(b) => mcp::ResourceContents::Blob {
                    uri: b.uri,
                    mime_type: b.mime_type,
                    blob: b.blob,
                    meta: value(b.meta),
                },
            },
            annotations: value(r.annotations),
            meta: value(r.meta),
        }),
        wit::ContentBlock::Unknown(u) => mcp::ContentBlock::Unknown(mcp::UnknownBlock {
            kind: u.kind,
            raw: value_or_string(u.raw),
        }),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::mcp::wire::{result_from_wire, result_to_wire};

    #[test]
    fn every_block_crosses_the_contract_and_back_unchanged() {
        let wire = json!({
            "content": [
                {"type": "text", "text": "hi", "annotations": {"priority": 0.5}, "_meta": {"k": 1}},
                {"type": "image", "data": "AAA=", "mimeType": "image/png"},
                {"type": "audio", "data": "BBB=", "mimeType": "audio/wav"},
                {"type": "resource_link", "uri": "file:///a", "name": "a", "size": 3},
                {"type": "resource", "resource": {"uri": "mem://t", "text": "body"}},
                {"type": "resource", "resource": {"uri": "mem://b", "blob": "Q0Q=", "mimeType": "application/pdf"}},
                {"type": "hologram", "depth": 3}
            ],
            "structuredContent": [1, "two"],
            "isError": true,
            "_meta": {"m": null}
        });
        let ours = result_from_wire(wire.clone());
        let back = result_from_wit(result_into_wit(ours));
        assert_eq!(result_to_wire(&back), wire);
    }
}
