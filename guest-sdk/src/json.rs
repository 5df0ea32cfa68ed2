//! JSON helpers: content blocks in their MCP wire form, and a walk over every string in
//! a JSON document (what redaction needs for `structuredContent` and unknown blocks).

use serde_json::{Map, Value, json};

use crate::{ContentBlock, ResourceContents};

/// Parses optional JSON text carried through the contract, yielding `None` when absent
/// or malformed.
pub fn parse(text: Option<&str>) -> Option<Value> {
    text.and_then(|t| serde_json::from_str(t).ok())
}

fn with_extras(
    mut obj: Map<String, Value>,
    annotations: &Option<String>,
    meta: &Option<String>,
) -> Value {
    if let Some(a) = parse(annotations.as_deref()) {
        obj.insert("annotations".into(), a);
    }
    if let Some(m) = parse(meta.as_deref()) {
        obj.insert("_meta".into(), m);
    }
    Value::Object(obj)
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// A content block in its MCP JSON form (`{"type": ..., ...}`), as a server sends it.
pub fn block_to_mcp(block: &ContentBlock) -> Value {
    match block {
        ContentBlock::Text(t) => with_extras(
            object(json!({"type": "text", "text": t.text})),
            &t.annotations,
            &t.meta,
        ),
        ContentBlock::Image(m) | ContentBlock::Audio(m) => {
            let kind = if matches!(block, ContentBlock::Image(_)) {
                "image"
            } else {
                "audio"
            };
            with_extras(
                object(json!({"type": kind, "data": m.data, "mimeType": m.mime_type})),
                &m.annotations,
                &m.meta,
            )
        }
        ContentBlock::ResourceLink(l) => {
            let mut obj = object(json!({"type": "resource_link", "uri": l.uri, "name": l.name}));
            if let Some(v) = &l.title {
                obj.insert("title".into(), json!(v));
            }
            if let Some(v) = &l.description {
                obj.insert("description".into(), json!(v));
            }
            if let Some(v) = &l.mime_type {
                obj.insert("mimeType".into(), json!(v));
            }
            if let Some(v) = l.size {
                obj.insert("size".into(), json!(v));
            }
            with_extras(obj, &l.annotations, &l.meta)
        }
        ContentBlock::Embedded(r) => {
            let contents = match &r.contents {
                ResourceContents::Text(t) => {
                    let mut o = object(json!({"uri": t.uri, "text": t.text}));
                    if let Some(m) = &t.mime_type {
                        o.insert("mimeType".into(), json!(m));
                    }
                    with_extras(o, &None, &t.meta)
                }
                ResourceContents::Blob(b) => {
                    let mut o = object(json!({"uri": b.uri, "blob": b.blob}));
                    if let Some(m) = &b.mime_type {
                        o.insert("mimeType".into(), json!(m));
                    }
                    with_extras(o, &None, &b.meta)
                }
            };
            with_extras(
                object(json!({"type": "resource", "resource": contents})),
                &r.annotations,
                &r.meta,
            )
        }
        ContentBlock::Unknown(u) => serde_json::from_str(&u.raw).unwrap_or_else(|_| json!(u.raw)),
    }
}

/// Applies `f` to every string (object keys excluded) in `value`, in place. Returns how
/// many strings `f` changed.
pub fn map_strings(value: &mut Value, f: &mut dyn FnMut(&str) -> Option<String>) -> usize {
    match value {
        Value::String(s) => match f(s) {
            Some(new) => {
                *s = new;
                1
            }
            None => 0,
        },
        Value::Array(items) => items.iter_mut().map(|v| map_strings(v, f)).sum(),
        Value::Object(map) => map.values_mut().map(|v| map_strings(v, f)).sum(),
        _ => 0,
    }
}
