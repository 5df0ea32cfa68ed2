//! MCP values as Airlock keeps them: a tool result and its content blocks, typed from the
//! session that receives them to the gateway that sends them on. The types map 1:1 to
//! the plugin contract's `tool-result` (`wit/adapter.wit`), and to the wire: every block
//! the specification defines has its own variant, and a block Airlock cannot hold in one
//! of them (a future type, or a known type with fields the contract does not model) is an
//! [`ContentBlock::Unknown`] that keeps the block exactly as the server sent it.
//!
//! `serde_json::Value` appears only where the protocol says "any JSON": annotations,
//! `_meta`, `structuredContent`.
//!
//! - [`wire`]: the wire form (MCP JSON) both ways, exact.
//! - [`rmcp_model`]: rmcp's model types both ways, for the session (upstream) and the
//!   gateway (downstream).
//!
//! Layer 0 (leaf). Imports nothing of the crate.

pub mod rmcp_model;
pub mod wire;

use serde_json::{Map, Value};

/// The result of `tools/call`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolResult {
    /// The content blocks, in order.
    pub content: Vec<ContentBlock>,
    /// The `structuredContent` value, if the server sent one (any JSON).
    pub structured_content: Option<Value>,
    /// Whether the server marked the result as an error (`isError`).
    pub is_error: bool,
    /// The result's `_meta` object, if any.
    pub meta: Option<Map<String, Value>>,
}

/// One content block of a tool result.
#[derive(Debug, Clone, PartialEq)]
pub enum ContentBlock {
    /// `type: "text"`.
    Text(TextBlock),
    /// `type: "image"`.
    Image(MediaBlock),
    /// `type: "audio"`.
    Audio(MediaBlock),
    /// `type: "resource_link"`: a pointer to a resource the server can read.
    ResourceLink(ResourceLink),
    /// `type: "resource"`: a resource embedded in the result.
    Resource(EmbeddedResource),
    /// A block none of the above holds exactly, kept as the server sent it.
    Unknown(UnknownBlock),
}

/// A `text` block.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TextBlock {
    /// The text itself.
    pub text: String,
    /// The block's `annotations` object, if any.
    pub annotations: Option<Value>,
    /// The block's `_meta` object, if any.
    pub meta: Option<Value>,
}

/// An `image` or `audio` block: base64 data and its MIME type.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MediaBlock {
    /// Base64-encoded bytes.
    pub data: String,
    /// The MIME type, for example `image/png`.
    pub mime_type: String,
    /// The block's `annotations` object, if any.
    pub annotations: Option<Value>,
    /// The block's `_meta` object, if any.
    pub meta: Option<Value>,
}

/// A `resource_link` block.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ResourceLink {
    /// The resource URI.
    pub uri: String,
    /// The resource's programmatic name.
    pub name: String,
    /// A human-readable title.
    pub title: Option<String>,
    /// A description of the resource.
    pub description: Option<String>,
    /// The resource's MIME type, if known.
    pub mime_type: Option<String>,
    /// The resource's size in bytes, if known.
    pub size: Option<u64>,
    /// The block's `annotations` object, if any.
    pub annotations: Option<Value>,
    /// The block's `_meta` object, if any.
    pub meta: Option<Value>,
}

/// A `resource` block: embedded contents.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddedResource {
    /// The embedded contents.
    pub contents: ResourceContents,
    /// The block's `annotations` object, if any.
    pub annotations: Option<Value>,
    /// The block's `_meta` object, if any.
    pub meta: Option<Value>,
}

/// The contents of an embedded resource.
#[derive(Debug, Clone, PartialEq)]
pub enum ResourceContents {
    /// Text contents.
    Text {
        /// The resource URI.
        uri: String,
        /// The MIME type, if known.
        mime_type: Option<String>,
        /// The text.
        text: String,
        /// The contents' `_meta` object, if any.
        meta: Option<Value>,
    },
    /// Binary contents.
    Blob {
        /// The resource URI.
        uri: String,
        /// The MIME type, if known.
        mime_type: Option<String>,
        /// Base64-encoded bytes.
        blob: String,
        /// The contents' `_meta` object, if any.
        meta: Option<Value>,
    },
}

/// A block kept as the server sent it.
#[derive(Debug, Clone, PartialEq)]
pub struct UnknownBlock {
    /// The block's `type` field, or an empty string when it has none.
    pub kind: String,
    /// The whole block.
    pub raw: Value,
}

impl ToolResult {
    /// A result of text blocks, one per string.
    pub fn of_texts(texts: impl IntoIterator<Item = String>) -> ToolResult {
        ToolResult {
            content: texts
                .into_iter()
                .map(|text| {
                    ContentBlock::Text(TextBlock {
                        text,
                        ..Default::default()
                    })
                })
                .collect(),
            ..Default::default()
        }
    }

    /// The text of the result: the text of its text blocks joined by newlines (what
    /// Airlock retains and previews).
    pub fn text(&self) -> String {
        let mut texts = self.content.iter().filter_map(ContentBlock::as_text);
        let Some(first) = texts.next() else {
            return String::new();
        };
        let mut out = first.to_string();
        for text in texts {
            out.push('\n');
            out.push_str(text);
        }
        out
    }

    /// Roughly how many bytes of data the result holds (what a plugin works through).
    pub fn approx_size(&self) -> usize {
        let blocks: usize = self.content.iter().map(ContentBlock::approx_size).sum();
        blocks
            + self
                .structured_content
                .as_ref()
                .map_or(0, wire::approx_json_size)
    }

    /// Whether every block is of a type the specification defines in full (no
    /// [`ContentBlock::Unknown`]).
    pub fn is_fully_typed(&self) -> bool {
        !self
            .content
            .iter()
            .any(|b| matches!(b, ContentBlock::Unknown(_)))
    }
}

impl ContentBlock {
    /// A plain text block.
    pub fn text(text: impl Into<String>) -> ContentBlock {
        ContentBlock::Text(TextBlock {
            text: text.into(),
            ..Default::default()
        })
    }

    /// The block's wire `type`.
    pub fn kind(&self) -> &str {
        match self {
            ContentBlock::Text(_) => "text",
            ContentBlock::Image(_) => "image",
            ContentBlock::Audio(_) => "audio",
            ContentBlock::ResourceLink(_) => "resource_link",
            ContentBlock::Resource(_) => "resource",
            ContentBlock::Unknown(u) => &u.kind,
        }
    }

    /// The text of a text block.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            ContentBlock::Text(t) => Some(&t.text),
            _ => None,
        }
    }

    fn approx_size(&self) -> usize {
        match self {
            ContentBlock::Text(t) => t.text.len(),
            ContentBlock::Image(m) | ContentBlock::Audio(m) => m.data.len(),
            ContentBlock::ResourceLink(l) => l.uri.len() + l.name.len(),
            ContentBlock::Resource(r) => match &r.contents {
                ResourceContents::Text { text, .. } => text.len(),
                ResourceContents::Blob { blob, .. } => blob.len(),
            },
            ContentBlock::Unknown(u) => wire::approx_json_size(&u.raw),
        }
    }
}
