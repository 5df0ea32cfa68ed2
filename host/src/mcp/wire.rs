//! The wire form of tool results (MCP JSON), both ways and exact: a block is read into
//! its typed variant only when that variant holds every field it has (with the types the
//! specification gives them); anything else stays an [`UnknownBlock`] with the block as
//! sent, so writing it out gives the same JSON back. A field sent as `null` carries
//! nothing and reads as absent.

use serde::{Serialize, Serializer};
use serde_json::{Map, Value, json};

use super::{
    ContentBlock, EmbeddedResource, MediaBlock, ResourceContents, ResourceLink, TextBlock,
    ToolResult, UnknownBlock,
};

/// A `tools/call` result read from its wire form. Anything but an object reads as an
/// empty result; a `content` that is not an array as no blocks.
pub fn result_from_wire(value: Value) -> ToolResult {
    let Value::Object(mut obj) = value else {
        return ToolResult::default();
    };
    let content = match obj.remove("content") {
        Some(Value::Array(blocks)) => blocks.into_iter().map(block_from_wire).collect(),
        _ => Vec::new(),
    };
    ToolResult {
        content,
        structured_content: obj.remove("structuredContent"),
        is_error: obj.get("isError").and_then(Value::as_bool).unwrap_or(false),
        meta: match obj.remove("_meta") {
            Some(Value::Object(meta)) => Some(meta),
            _ => None,
        },
    }
}

/// A tool result in its wire form (`content`, `structuredContent`, `isError`, `_meta`).
pub fn result_to_wire(result: &ToolResult) -> Value {
    let mut o = Map::new();
    o.insert(
        "content".into(),
        Value::Array(result.content.iter().map(block_to_wire).collect()),
    );
    if let Some(sc) = &result.structured_content {
        o.insert("structuredContent".into(), sc.clone());
    }
    o.insert("isError".into(), Value::Bool(result.is_error));
    if let Some(meta) = &result.meta {
        o.insert("_meta".into(), Value::Object(meta.clone()));
    }
    Value::Object(o)
}

/// One block read from its wire form (see the module).
pub fn block_from_wire(value: Value) -> ContentBlock {
    match typed_block(&value) {
        Some(block) => block,
        None => ContentBlock::Unknown(UnknownBlock {
            kind: value
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            raw: value,
        }),
    }
}

/// The fields each block type may have.
const TEXT_FIELDS: &[&str] = &["type", "text", "annotations", "_meta"];
const MEDIA_FIELDS: &[&str] = &["type", "data", "mimeType", "annotations", "_meta"];
const LINK_FIELDS: &[&str] = &[
    "type",
    "uri",
    "name",
    "title",
    "description",
    "mimeType",
    "size",
    "annotations",
    "_meta",
];
const RESOURCE_FIELDS: &[&str] = &["type", "resource", "annotations", "_meta"];
const CONTENTS_FIELDS: &[&str] = &["uri", "mimeType", "text", "blob", "_meta"];

/// Reads a block's fields, refusing (with `None`) what the typed form cannot hold.
struct Fields<'a>(&'a Map<String, Value>);

impl<'a> Fields<'a> {
    /// `Some` when every present, non-null field is one of `allowed`.
    fn only(obj: &'a Map<String, Value>, allowed: &[&str]) -> Option<Fields<'a>> {
        obj.iter()
            .all(|(k, v)| v.is_null() || allowed.contains(&k.as_str()))
            .then_some(Fields(obj))
    }

    fn present(&self, key: &str) -> Option<&'a Value> {
        self.0.get(key).filter(|v| !v.is_null())
    }

    /// A required string.
    fn string(&self, key: &str) -> Option<String> {
        self.present(key)?.as_str().map(str::to_string)
    }

    /// An optional string: `Some(None)` when absent, `None` when of another type.
    fn opt_string(&self, key: &str) -> Option<Option<String>> {
        match self.present(key) {
            None => Some(None),
            Some(Value::String(s)) => Some(Some(s.clone())),
            Some(_) => None,
        }
    }

    /// An optional JSON object (`annotations`, `_meta`).
    fn opt_object(&self, key: &str) -> Option<Option<Value>> {
        match self.present(key) {
            None => Some(None),
            Some(v @ Value::Object(_)) => Some(Some(v.clone())),
            Some(_) => None,
        }
    }
}

fn typed_block(value: &Value) -> Option<ContentBlock> {
    let obj = value.as_object()?;
    let kind = obj.get("type")?.as_str()?;
    Some(match kind {
        "text" => {
            let f = Fields::only(obj, TEXT_FIELDS)?;
            ContentBlock::Text(TextBlock {
                text: f.string("text")?,
                annotations: f.opt_object("annotations")?,
                meta: f.opt_object("_meta")?,
            })
        }
        "image" | "audio" => {
            let f = Fields::only(obj, MEDIA_FIELDS)?;
            let media = MediaBlock {
                data: f.string("data")?,
                mime_type: f.string("mimeType")?,
                annotations: f.opt_object("annotations")?,
                meta: f.opt_object("_meta")?,
            };
            if kind == "image" {
                ContentBlock::Image(media)
            } else {
                ContentBlock::Audio(media)
            }
        }
        "resource_link" => {
            let f = Fields::only(obj, LINK_FIELDS)?;
            let size = match f.present("size") {
                None => None,
                Some(v) => Some(v.as_u64()?),
            };
            ContentBlock::ResourceLink(ResourceLink {
                uri: f.string("uri")?,
                name: f.string("name")?,
                title: f.opt_string("title")?,
                description: f.opt_string("description")?,
                mime_type: f.opt_string("mimeType")?,
                size,
                annotations: f.opt_object("annotations")?,
                meta: f.opt_object("_meta")?,
            })
        }
        "resource" => {
            let f = Fields::only(obj, RESOURCE_FIELDS)?;
            let contents = Fields::only(f.present("resource")?.as_object()?, CONTENTS_FIELDS)?;
            let (uri, mime_type, meta) = (
                contents.string("uri")?,
                contents.opt_string("mimeType")?,
                contents.opt_object("_meta")?,
            );
            let contents = match (contents.present("text"), contents.present("blob")) {
                (Some(Value::String(text)), None) => ResourceContents::Text {
                    uri,
                    mime_type,
                    text: text.clone(),
                    meta,
                },
                (None, Some(Value::String(blob))) => ResourceContents::Blob {
                    uri,
                    mime_type,
                    blob: blob.clone(),
                    meta,
                },
                _ => return None,
            };
            ContentBlock::Resource(EmbeddedResource {
                contents,
                annotations: f.opt_object("annotations")?,
                meta: f.opt_object("_meta")?,
            })
        }
        _ => return None,
    })
}

/// `obj` with `annotations` and `_meta` added when present.
fn with_extras(
    mut obj: Map<String, Value>,
    annotations: &Option<Value>,
    meta: &Option<Value>,
) -> Value {
    if let Some(a) = annotations {
        obj.insert("annotations".into(), a.clone());
    }
    if let Some(m) = meta {
        obj.insert("_meta".into(), m.clone());
    }
    Value::Object(obj)
}

fn object(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

fn insert_opt(o: &mut Map<String, Value>, key: &str, value: &Option<String>) {
    if let Some(v) = value {
        o.insert(key.into(), Value::String(v.clone()));
    }
}

/// One block in its wire form.
pub fn block_to_wire(block: &ContentBlock) -> Value {
    match block {
        ContentBlock::Text(t) => with_extras(
            object(json!({"type": "text", "text": t.text})),
            &t.annotations,
            &t.meta,
        ),
        ContentBlock::Image(m) | ContentBlock::Audio(m) => with_extras(
            object(json!({"type": block.kind(), "data": m.data, "mimeType": m.mime_type})),
            &m.annotations,
            &m.meta,
        ),
        ContentBlock::ResourceLink(l) => {
            let mut o = object(json!({"type": "resource_link", "uri": l.uri, "name": l.name}));
            insert_opt(&mut o, "title", &l.title);
            insert_opt(&mut o, "description", &l.description);
            insert_opt(&mut o, "mimeType", &l.mime_type);
            if let Some(size) = l.size {
                o.insert("size".into(), json!(size));
            }
            with_extras(o, &l.annotations, &l.meta)
        }
        ContentBlock::Resource(r) => {
            let contents = match &r.contents {
                ResourceContents::Text {
                    uri,
                    mime_type,
                    text,
                    meta,
                } => {
                    let mut o = object(json!({"uri": uri}));
                    insert_opt(&mut o, "mimeType", mime_type);
                    o.insert("text".into(), Value::String(text.clone()));
                    with_extras(o, &None, meta)
                }
                ResourceContents::Blob {
                    uri,
                    mime_type,
                    blob,
                    meta,
                } => {
                    let mut o = object(json!({"uri": uri}));
                    insert_opt(&mut o, "mimeType", mime_type);
                    o.insert("blob".into(), Value::String(blob.clone()));
                    with_extras(o, &None, meta)
                }
            };
            with_extras(
                object(json!({"type": "resource", "resource": contents})),
                &r.annotations,
                &r.meta,
            )
        }
        ContentBlock::Unknown(u) => u.raw.clone(),
    }
}

impl Serialize for ContentBlock {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        block_to_wire(self).serialize(serializer)
    }
}

impl Serialize for ToolResult {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        result_to_wire(self).serialize(serializer)
    }
}

impl<'de> serde::Deserialize<'de> for ContentBlock {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Value::deserialize(deserializer).map(block_from_wire)
    }
}

/// Roughly how many bytes `value` takes as JSON text (its strings' lengths, and a byte
/// for everything else), without writing it.
pub fn approx_json_size(value: &Value) -> usize {
    match value {
        Value::String(s) => s.len() + 2,
        Value::Array(items) => items.iter().map(approx_json_size).sum::<usize>() + 2,
        Value::Object(map) => {
            map.iter()
                .map(|(k, v)| k.len() + 3 + approx_json_size(v))
                .sum::<usize>()
                + 2
        }
        _ => 4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every block the specification defines, with every field it may carry, and blocks
    /// only an unknown block can hold.
    pub(crate) fn every_block() -> Value {
        json!([
            {"type": "text", "text": "hi", "annotations": {"audience": ["user"], "priority": 0.7}, "_meta": {"k": 1}},
            {"type": "image", "data": "AAA=", "mimeType": "image/png", "annotations": {"lastModified": "2025-01-01T00:00:00Z"}},
            {"type": "audio", "data": "BBB=", "mimeType": "audio/wav", "_meta": {"a": [1, 2]}},
            {"type": "resource_link", "uri": "file:///a", "name": "a", "title": "A", "description": "d", "mimeType": "text/plain", "size": 3, "_meta": {"x": true}},
            {"type": "resource", "resource": {"uri": "mem://t", "mimeType": "text/plain", "text": "body", "_meta": {"r": 1}}, "annotations": {"priority": 1}},
            {"type": "resource", "resource": {"uri": "mem://b", "blob": "Q0Q=", "mimeType": "application/pdf"}},
            {"type": "hologram", "depth": 3},
            {"type": "image"},
            {"type": "resource_link", "uri": "file:///i", "name": "i", "icons": [{"src": "https://x/i.png"}]},
            {"type": "text", "text": 5},
            "not an object"
        ])
    }

    #[test]
    fn every_block_reads_typed_or_unknown_and_writes_back_the_same_json() {
        let blocks = every_block();
        let result = result_from_wire(json!({
            "content": blocks,
            "structuredContent": {"a": [1, {"b": null}]},
            "isError": true,
            "_meta": {"progress": 1},
        }));
        let kinds: Vec<&str> = result
            .content
            .iter()
            .map(|b| match b {
                ContentBlock::Unknown(_) => "unknown",
                other => other.kind(),
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "text",
                "image",
                "audio",
                "resource_link",
                "resource",
                "resource",
                "unknown",
                "unknown",
                "unknown",
                "unknown",
                "unknown"
            ]
        );
        let back = result_to_wire(&result);
        assert_eq!(back["content"], blocks);
        assert_eq!(back["structuredContent"], json!({"a": [1, {"b": null}]}));
        assert_eq!(back["isError"], json!(true));
        assert_eq!(back["_meta"], json!({"progress": 1}));
        assert_eq!(
            serde_json::to_value(&result.content).unwrap(),
            blocks,
            "Serialize is the wire form"
        );
    }

    #[test]
    fn null_fields_read_as_absent_and_text_joins_text_blocks() {
        let result = result_from_wire(json!({"content": [
            {"type": "text", "text": "a", "annotations": null},
            {"type": "image", "data": "x", "mimeType": "image/png"},
            {"type": "text", "text": "b"}
        ]}));
        assert!(result.is_fully_typed());
        assert_eq!(result.text(), "a\nb");
        assert!(!result.is_error);
    }
}
