//! rmcp's model types and Airlock's, both ways, by value (no string is copied).
//!
//! Upstream, rmcp reads a `tools/call` result into its typed `CallToolResult` when every
//! block fits its model, else hands it over as raw JSON (then [`super::wire`] reads it).
//! Downstream, a result whose blocks all fit rmcp's model goes out typed; one with an
//! unknown block cannot (rmcp's `ContentBlock` has no variant for it), and the gateway
//! sends its wire form instead.
//!
//! One loss is rmcp's, not Airlock's: it reads an annotation's `priority` as an `f32`.
//! A priority comes back as the shortest decimal of that `f32` (`0.7` stays `0.7`; `1`
//! becomes `1.0`).

use rmcp::model::{self as m, Annotations, MetaObject};
use serde_json::{Map, Number, Value};

use super::{
    ContentBlock, EmbeddedResource, MediaBlock, ResourceContents, ResourceLink, TextBlock,
    ToolResult, UnknownBlock,
};

/// An rmcp result as Airlock's.
pub fn result_from_rmcp(result: m::CallToolResult) -> ToolResult {
    ToolResult {
        content: result.content.into_iter().map(block_from_rmcp).collect(),
        structured_content: result.structured_content,
        is_error: result.is_error.unwrap_or(false),
        meta: result.meta.map(|m| m.0),
    }
}

/// One rmcp block as Airlock's.
pub fn block_from_rmcp(block: m::ContentBlock) -> ContentBlock {
    match block {
        m::ContentBlock::Text(t) => ContentBlock::Text(TextBlock {
            text: t.text,
            annotations: t.annotations.map(annotations_value),
            meta: t.meta.map(meta_value),
        }),
        m::ContentBlock::Image(i) => ContentBlock::Image(MediaBlock {
            data: i.data,
            mime_type: i.mime_type,
            annotations: i.annotations.map(annotations_value),
            meta: i.meta.map(meta_value),
        }),
        m::ContentBlock::Audio(a) => ContentBlock::Audio(MediaBlock {
            data: a.data,
            mime_type: a.mime_type,
            annotations: a.annotations.map(annotations_value),
            meta: a.meta.map(meta_value),
        }),
        m::ContentBlock::Resource(r) if known_contents(&r.resource) => {
            ContentBlock::Resource(EmbeddedResource {
                contents: match r.resource {
                    m::ResourceContents::TextResourceContents {
                        uri,
                        mime_type,
                        text,
                        meta,
                    } => ResourceContents::Text {
                        uri,
                        mime_type,
                        text,
                        meta: meta.map(meta_value),
                    },
                    m::ResourceContents::BlobResourceContents {
                        uri,
                        mime_type,
                        blob,
                        meta,
                    } => ResourceContents::Blob {
                        uri,
                        mime_type,
                        blob,
                        meta: meta.map(meta_value),
                    },
                    _ => unreachable!("checked by known_contents"),
                },
                annotations: r.annotations.map(annotations_value),
                meta: r.meta.map(meta_value),
            })
        }
        m::ContentBlock::ResourceLink(l) if l.icons.is_none() => {
            ContentBlock::ResourceLink(ResourceLink {
                uri: l.uri,
                name: l.name,
                title: l.title,
                description: l.description,
                mime_type: l.mime_type,
                size: l.size,
                annotations: l.annotations.map(annotations_value),
                meta: l.meta.map(meta_value),
            })
        }
        // A link with icons (the contract has no field for them), or a block of a kind
        // a newer rmcp knows: kept whole.
        other => unknown(&other),
    }
}

/// Whether Airlock holds these embedded contents typed (text or blob).
fn known_contents(contents: &m::ResourceContents) -> bool {
    matches!(
        contents,
        m::ResourceContents::TextResourceContents { .. }
            | m::ResourceContents::BlobResourceContents { .. }
    )
}

fn unknown(block: &m::ContentBlock) -> ContentBlock {
    let raw = json_text_value(block);
    ContentBlock::Unknown(UnknownBlock {
        kind: raw
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        raw,
    })
}

/// `value` as the JSON it writes: through its text, so an `f32` reads as the decimal it
/// is written as (`serde_json::to_value` widens it to the nearest `f64` instead).
pub fn json_text_value<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_string(value)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or(Value::Null)
}

/// rmcp's typed annotations as JSON, with `priority` as the shortest decimal of its f32.
fn annotations_value(a: Annotations) -> Value {
    let mut o = Map::new();
    if let Some(audience) = a.audience {
        o.insert(
            "audience".into(),
            serde_json::to_value(audience).unwrap_or(Value::Null),
        );
    }
    if let Some(priority) = a.priority {
        let decimal = priority.to_string().parse::<f64>().ok();
        if let Some(n) = decimal.and_then(Number::from_f64) {
            o.insert("priority".into(), Value::Number(n));
        }
    }
    if let Some(last_modified) = a.last_modified {
        o.insert("lastModified".into(), Value::String(last_modified));
    }
    Value::Object(o)
}

fn meta_value(meta: MetaObject) -> Value {
    Value::Object(meta.0)
}

fn meta_of(value: Option<Value>) -> Result<Option<MetaObject>, ()> {
    match value {
        None => Ok(None),
        Some(Value::Object(map)) => Ok(Some(MetaObject(map))),
        Some(_) => Err(()),
    }
}

fn annotations_of(value: Option<Value>) -> Result<Option<Annotations>, ()> {
    value
        .map(|v| serde_json::from_value(v).map_err(|_| ()))
        .transpose()
}

/// Airlock's result as rmcp's, when every block fits rmcp's model; else the result back
/// unchanged (send its wire form).
pub fn result_to_rmcp(result: ToolResult) -> Result<m::CallToolResult, ToolResult> {
    if !result.is_fully_typed() || !result.content.iter().all(fits_rmcp) {
        return Err(result);
    }
    let content = result
        .content
        .into_iter()
        .map(|b| block_to_rmcp(b).expect("checked by fits_rmcp"))
        .collect();
    let mut out = m::CallToolResult::success(content);
    out.is_error = Some(result.is_error);
    out.structured_content = result.structured_content;
    out.meta = result.meta.map(MetaObject);
    Ok(out)
}

/// Whether rmcp's model holds `block` exactly (its annotations fit rmcp's typed form).
fn fits_rmcp(block: &ContentBlock) -> bool {
    let fits = |annotations: &Option<Value>, meta: &Option<Value>| {
        meta.as_ref().is_none_or(Value::is_object)
            && annotations.as_ref().is_none_or(annotations_fit)
    };
    match block {
        ContentBlock::Text(t) => fits(&t.annotations, &t.meta),
        ContentBlock::Image(b) | ContentBlock::Audio(b) => fits(&b.annotations, &b.meta),
        ContentBlock::ResourceLink(l) => fits(&l.annotations, &l.meta),
        ContentBlock::Resource(r) => {
            let inner = match &r.contents {
                ResourceContents::Text { meta, .. } | ResourceContents::Blob { meta, .. } => meta,
            };
            fits(&r.annotations, &r.meta) && inner.as_ref().is_none_or(Value::is_object)
        }
        ContentBlock::Unknown(_) => false,
    }
}

/// Whether rmcp's `Annotations` holds `value` without losing a field.
fn annotations_fit(value: &Value) -> bool {
    let Some(obj) = value.as_object() else {
        return false;
    };
    obj.keys()
        .all(|k| matches!(k.as_str(), "audience" | "priority" | "lastModified"))
        && serde_json::from_value::<Annotations>(value.clone()).is_ok()
}

fn block_to_rmcp(block: ContentBlock) -> Result<m::ContentBlock, ()> {
    Ok(match block {
        ContentBlock::Text(t) => {
            let mut c = m::TextContent::new(t.text);
            c.annotations = annotations_of(t.annotations)?;
            c.meta = meta_of(t.meta)?;
            m::ContentBlock::Text(c)
        }
        ContentBlock::Image(i) => {
            let mut c = m::ImageContent::new(i.data, i.mime_type);
            c.annotations = annotations_of(i.annotations)?;
            c.meta = meta_of(i.meta)?;
            m::ContentBlock::Image(c)
        }
        ContentBlock::Audio(a) => {
            let mut c = m::AudioContent::new(a.data, a.mime_type);
            c.annotations = annotations_of(a.annotations)?;
            c.meta = meta_of(a.meta)?;
            m::ContentBlock::Audio(c)
        }
        ContentBlock::ResourceLink(l) => {
            let mut r = m::Resource::new(l.uri, l.name);
            r.title = l.title;
            r.description = l.description;
            r.mime_type = l.mime_type;
            r.size = l.size;
            r.annotations = annotations_of(l.annotations)?;
            r.meta = meta_of(l.meta)?;
            m::ContentBlock::ResourceLink(r)
        }
        ContentBlock::Resource(e) => {
            let contents = match e.contents {
                ResourceContents::Text {
                    uri,
                    mime_type,
                    text,
                    meta,
                } => m::ResourceContents::TextResourceContents {
                    uri,
                    mime_type,
                    text,
                    meta: meta_of(meta)?,
                },
                ResourceContents::Blob {
                    uri,
                    mime_type,
                    blob,
                    meta,
                } => m::ResourceContents::BlobResourceContents {
                    uri,
                    mime_type,
                    blob,
                    meta: meta_of(meta)?,
                },
            };
            let mut c = m::EmbeddedResource::new(contents);
            c.annotations = annotations_of(e.annotations)?;
            c.meta = meta_of(e.meta)?;
            m::ContentBlock::Resource(c)
        }
        ContentBlock::Unknown(_) => return Err(()),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::mcp::wire::{result_from_wire, result_to_wire};

    #[test]
    fn typed_results_cross_rmcp_both_ways_unchanged() {
        let wire = json!({
            "content": [
                {"type": "text", "text": "hi", "annotations": {"audience": ["user"], "priority": 0.7}, "_meta": {"k": 1}},
                {"type": "image", "data": "AAA=", "mimeType": "image/png"},
                {"type": "audio", "data": "BBB=", "mimeType": "audio/wav", "_meta": {"a": [1, 2]}},
                {"type": "resource_link", "uri": "file:///a", "name": "a", "title": "A", "size": 3},
                {"type": "resource", "resource": {"uri": "mem://t", "mimeType": "text/plain", "text": "body"}},
                {"type": "resource", "resource": {"uri": "mem://b", "blob": "Q0Q="}, "annotations": {"lastModified": "2025-01-01T00:00:00Z"}}
            ],
            "structuredContent": {"a": 1},
            "isError": false,
        });
        let ours = result_from_wire(wire.clone());
        let typed = result_to_rmcp(ours.clone()).expect("every block fits rmcp");
        assert_eq!(json_text_value(&typed)["content"], wire["content"]);
        let back = result_from_rmcp(typed);
        assert_eq!(result_to_wire(&back), result_to_wire(&ours));
    }

    #[test]
    fn unknown_blocks_and_unmodelled_annotations_stay_out_of_rmcp() {
        for block in [
            json!({"type": "hologram", "depth": 3}),
            json!({"type": "text", "text": "x", "annotations": {"audience": ["user"], "tone": "dry"}}),
        ] {
            let ours = result_from_wire(json!({"content": [block]}));
            let back = result_to_rmcp(ours.clone()).unwrap_err();
            assert_eq!(back, ours);
        }
    }
}
