//! Conversion between MCP wire JSON and the contract's types. Every block the server
//! sent survives: a block of an unknown type, or a known type with missing fields, is
//! carried as an `unknown` block holding its raw JSON.

use serde_json::{Map, Value, json};

use super::bindings::airlock::adapter::types::{
    BlobResource, EmbeddedResource, MediaBlock, ResourceContents, ResourceLink, TextBlock,
    TextResource, UnknownBlock,
};
use super::{ContentBlock, Tool, ToolResult};

fn opt_json(obj: &Map<String, Value>, key: &str) -> Option<String> {
    obj.get(key).filter(|v| !v.is_null()).map(Value::to_string)
}

fn opt_str(obj: &Map<String, Value>, key: &str) -> Option<String> {
    obj.get(key).and_then(Value::as_str).map(str::to_string)
}

fn req_str(obj: &Map<String, Value>, key: &str) -> Option<String> {
    opt_str(obj, key)
}

/// One MCP content block → contract block.
pub fn block_from_mcp(value: &Value) -> ContentBlock {
    let unknown = || {
        ContentBlock::Unknown(UnknownBlock {
            kind: value
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            raw: value.to_string(),
        })
    };
    let Some(obj) = value.as_object() else {
        return unknown();
    };
    let annotations = opt_json(obj, "annotations");
    let meta = opt_json(obj, "_meta");
    let parsed = match obj.get("type").and_then(Value::as_str) {
        Some("text") => req_str(obj, "text").map(|text| {
            ContentBlock::Text(TextBlock {
                text,
                annotations,
                meta,
            })
        }),
        Some(kind @ ("image" | "audio")) => {
            match (req_str(obj, "data"), req_str(obj, "mimeType")) {
                (Some(data), Some(mime_type)) => {
                    let m = MediaBlock {
                        data,
                        mime_type,
                        annotations,
                        meta,
                    };
                    Some(if kind == "image" {
                        ContentBlock::Image(m)
                    } else {
                        ContentBlock::Audio(m)
                    })
                }
                _ => None,
            }
        }
        Some("resource_link") => match (req_str(obj, "uri"), req_str(obj, "name")) {
            (Some(uri), Some(name)) => Some(ContentBlock::ResourceLink(ResourceLink {
                uri,
                name,
                title: opt_str(obj, "title"),
                description: opt_str(obj, "description"),
                mime_type: opt_str(obj, "mimeType"),
                size: obj.get("size").and_then(Value::as_u64),
                annotations,
                meta,
            })),
            _ => None,
        },
        Some("resource") => obj
            .get("resource")
            .and_then(Value::as_object)
            .and_then(|r| {
                let uri = req_str(r, "uri")?;
                let mime_type = opt_str(r, "mimeType");
                let rmeta = opt_json(r, "_meta");
                let contents = if let Some(text) = req_str(r, "text") {
                    ResourceContents::Text(TextResource {
                        uri,
                        mime_type,
                        text,
                        meta: rmeta,
                    })
                } else {
                    ResourceContents::Blob(BlobResource {
                        uri,
                        mime_type,
                        blob: req_str(r, "blob")?,
                        meta: rmeta,
                    })
                };
                Some(ContentBlock::Embedded(EmbeddedResource {
                    contents,
                    annotations,
                    meta,
                }))
            }),
        _ => None,
    };
    parsed.unwrap_or_else(unknown)
}

/// A `tools/call` result (its JSON) → contract result.
pub fn result_from_mcp(value: &Value) -> ToolResult {
    let obj = value.as_object();
    let content = obj
        .and_then(|o| o.get("content"))
        .and_then(Value::as_array)
        .map(|blocks| blocks.iter().map(block_from_mcp).collect())
        .unwrap_or_default();
    ToolResult {
        content,
        structured_content: obj
            .and_then(|o| o.get("structuredContent"))
            .map(Value::to_string),
        is_error: obj
            .and_then(|o| o.get("isError"))
            .and_then(Value::as_bool)
            .unwrap_or(false),
        meta: obj.and_then(|o| opt_json(o, "_meta")),
    }
}

fn with_extras(
    mut obj: Map<String, Value>,
    annotations: &Option<String>,
    meta: &Option<String>,
) -> Value {
    let parse = |s: &Option<String>| {
        s.as_deref()
            .and_then(|t| serde_json::from_str::<Value>(t).ok())
    };
    if let Some(a) = parse(annotations) {
        obj.insert("annotations".into(), a);
    }
    if let Some(m) = parse(meta) {
        obj.insert("_meta".into(), m);
    }
    Value::Object(obj)
}

fn object(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// Contract block → MCP JSON.
pub fn block_to_mcp(block: &ContentBlock) -> Value {
    match block {
        ContentBlock::Text(t) => with_extras(
            object(json!({"type": "text", "text": t.text})),
            &t.annotations,
            &t.meta,
        ),
        ContentBlock::Image(m) => with_extras(
            object(json!({"type": "image", "data": m.data, "mimeType": m.mime_type})),
            &m.annotations,
            &m.meta,
        ),
        ContentBlock::Audio(m) => with_extras(
            object(json!({"type": "audio", "data": m.data, "mimeType": m.mime_type})),
            &m.annotations,
            &m.meta,
        ),
        ContentBlock::ResourceLink(l) => {
            let mut o = object(json!({"type": "resource_link", "uri": l.uri, "name": l.name}));
            for (k, v) in [
                ("title", &l.title),
                ("description", &l.description),
                ("mimeType", &l.mime_type),
            ] {
                if let Some(v) = v {
                    o.insert(k.into(), json!(v));
                }
            }
            if let Some(size) = l.size {
                o.insert("size".into(), json!(size));
            }
            with_extras(o, &l.annotations, &l.meta)
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

/// Contract result → MCP JSON.
pub fn result_to_mcp(result: &ToolResult) -> Value {
    let mut o = Map::new();
    o.insert(
        "content".into(),
        Value::Array(result.content.iter().map(block_to_mcp).collect()),
    );
    if let Some(sc) = &result.structured_content {
        o.insert(
            "structuredContent".into(),
            serde_json::from_str(sc).unwrap_or_else(|_| json!(sc)),
        );
    }
    o.insert("isError".into(), json!(result.is_error));
    Value::Object(o)
}

/// The text of a result: the text of its text blocks joined by newlines.
pub fn result_text(result: &ToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// An MCP tool (its JSON from `tools/list`) → contract tool. `None` when it has no name.
pub fn tool_from_mcp(value: &Value) -> Option<Tool> {
    let obj = value.as_object()?;
    Some(Tool {
        name: opt_str(obj, "name")?,
        title: opt_str(obj, "title"),
        description: opt_str(obj, "description"),
        input_schema: opt_json(obj, "inputSchema"),
        output_schema: opt_json(obj, "outputSchema"),
        annotations: opt_json(obj, "annotations"),
        meta: opt_json(obj, "_meta"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_block_round_trips_and_unknown_blocks_survive() {
        let result = json!({
            "content": [
                {"type": "text", "text": "hi", "annotations": {"priority": 1}},
                {"type": "image", "data": "AAA=", "mimeType": "image/png"},
                {"type": "audio", "data": "BBB=", "mimeType": "audio/wav"},
                {"type": "resource_link", "uri": "file:///a", "name": "a", "size": 3},
                {"type": "resource", "resource": {"uri": "mem://t", "text": "body", "mimeType": "text/plain"}},
                {"type": "resource", "resource": {"uri": "mem://b", "blob": "Q0Q=", "mimeType": "application/pdf"}},
                {"type": "hologram", "depth": 3},
                {"type": "image"}
            ],
            "structuredContent": {"a": 1},
            "isError": true
        });
        let parsed = result_from_mcp(&result);
        assert_eq!(parsed.content.len(), 8);
        assert!(parsed.is_error);
        assert!(matches!(&parsed.content[6], ContentBlock::Unknown(u) if u.kind == "hologram"));
        assert!(matches!(&parsed.content[7], ContentBlock::Unknown(u) if u.kind == "image"));
        let back = result_to_mcp(&parsed);
        assert_eq!(back["content"], result["content"]);
        assert_eq!(back["structuredContent"], json!({"a": 1}));
    }
}
