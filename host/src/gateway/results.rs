//! A call's outcome as the downstream client receives it. A complete result passes its
//! converted, redacted blocks (and structured content); an incomplete one passes the
//! preview, its non-text blocks, and a last block saying how to read the rest with
//! `airlock_output`. `_meta` carries the retention record. Airlock's own refusals are
//! tool errors that carry the error code. A result with a block rmcp's model has no
//! variant for (a future block type) goes out in its wire form, byte for byte
//! (`wire.rs`).

use rmcp::model::{CallToolResult, ResultType};
use serde_json::{Value, json};

use crate::{CallError, CallOutput, mcp};

/// The `_meta` of a result: where it is kept and what it is.
fn retention_meta(out: &CallOutput) -> Value {
    let r = &out.retained;
    let mut meta = json!({
        "service": out.service,
        "tool": out.tool,
        "output_id": r.output_id,
        "size": r.size,
        "digest": r.digest,
        "complete": r.complete,
        "redacted": r.redacted,
    });
    if let Some(reason) = &r.not_retained_reason {
        meta["retained"] = json!(false);
        meta["retention_message"] = json!(reason);
    }
    if let Some(warning) = &out.warning {
        meta["warning"] = json!(warning);
    }
    if !out.redactions.is_empty() {
        meta["redactions"] = json!(out.redactions);
    }
    meta
}

/// A completed call (the server's `isError` kept) as a `tools/call` result. Its blocks go
/// out as they are: typed when rmcp's model holds every one, else in their wire form
/// (see `wire.rs`); none is turned into text.
pub fn from_output(out: CallOutput) -> CallToolResult {
    let meta = retention_meta(&out);
    let r = &out.retained;
    let result = if r.complete {
        mcp::ToolResult {
            content: out.content,
            structured_content: out.structured_content,
            is_error: out.is_error,
            meta: None,
        }
    } else {
        let rest = match &r.output_id {
            Some(id) => format!(
                "[airlock] This is the first {} of {} bytes. Read the rest with airlock_output {{\"service\": \"{}\", \"output_id\": \"{id}\", \"offset\": {}}}.",
                out.preview.len(),
                r.size,
                out.service,
                out.preview.len()
            ),
            None => format!(
                "[airlock] This is the first {} of {} bytes; the rest was not kept: {}",
                out.preview.len(),
                r.size,
                r.not_retained_reason
                    .as_deref()
                    .unwrap_or("over the retention limit")
            ),
        };
        let mut content = vec![mcp::ContentBlock::text(out.preview)];
        content.extend(
            out.content
                .into_iter()
                .filter(|b| !matches!(b, mcp::ContentBlock::Text(_))),
        );
        content.push(mcp::ContentBlock::text(rest));
        mcp::ToolResult {
            content,
            structured_content: None,
            is_error: out.is_error,
            meta: None,
        }
    };
    let mut result = match mcp::rmcp_model::result_to_rmcp(result) {
        Ok(typed) => typed,
        Err(untyped) => super::wire::stand_in(untyped, meta.clone()),
    };
    let retention = match meta {
        Value::Object(map) => map,
        _ => unreachable!("retention_meta makes an object"),
    };
    let own = result.meta.get_or_insert_with(Default::default);
    for (key, value) in retention {
        own.0.entry(key).or_insert(value);
    }
    result.result_type.get_or_insert(ResultType::COMPLETE);
    result
}

/// A result built here as JSON, as the typed `tools/call` result every era accepts
/// (rmcp drops the `resultType` discriminator for handshake-era peers).
fn typed(value: Value, what: &str) -> CallToolResult {
    let mut result: CallToolResult =
        serde_json::from_value(value).unwrap_or_else(|e| panic!("{what} fits the MCP model: {e}"));
    result.result_type.get_or_insert(ResultType::COMPLETE);
    result
}

/// A refusal or failure of Airlock's (or a server's JSON-RPC error) as a tool error
/// carrying the code.
pub fn from_error(e: &CallError) -> CallToolResult {
    let mut value = json!({
        "content": [{"type": "text", "text": format!("{}: {}", e.code, e.message)}],
        "isError": true,
        "_meta": {"error": e.code, "message": e.message},
    });
    if let Some(wait) = e.retry_after {
        value["_meta"]["retry_after_ms"] = json!(wait.as_millis() as u64);
    }
    typed(value, "an error result")
}

/// A library error as a JSON-RPC error (for methods other than `tools/call`, whose
/// refusals are tool errors): the code travels in `data`.
pub fn rpc_error(e: CallError) -> rmcp::ErrorData {
    let mut data = json!({"error": e.code});
    if let Some(wait) = e.retry_after {
        data["retry_after_ms"] = json!(wait.as_millis() as u64);
    }
    let data = Some(data);
    match e.code {
        crate::ErrorCode::InvalidArguments | crate::ErrorCode::UnknownTool => {
            rmcp::ErrorData::invalid_params(e.message, data)
        }
        _ => rmcp::ErrorData::new(rmcp::model::ErrorCode::INTERNAL_ERROR, e.message, data),
    }
}

/// A result of one of Airlock's own tools: `text` for the model, `structured` for
/// programs.
pub fn own(text: String, structured: Value) -> CallToolResult {
    let value = json!({
        "content": [{"type": "text", "text": text}],
        "structuredContent": structured,
        "isError": false,
    });
    typed(value, "an own-tool result")
}
