//! A call's outcome as the downstream client receives it. A complete result passes its
//! converted, redacted blocks (and structured content); an incomplete one passes the
//! preview, its non-text blocks, and a last block saying how to read the rest with
//! `airlock_output`. `_meta` carries the retention record. Airlock's own refusals are
//! tool errors that carry the error code.

use rmcp::model::{CallToolResult, ResultType};
use serde_json::{Value, json};

use crate::{CallError, CallOutput};

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

/// A completed call (the server's `isError` kept) as a `tools/call` result.
pub fn from_output(out: &CallOutput) -> CallToolResult {
    let r = &out.retained;
    let mut result = if r.complete {
        let mut v = json!({ "content": out.content, "isError": out.is_error });
        if let Some(sc) = &out.structured_content {
            v["structuredContent"] = sc.clone();
        }
        v
    } else {
        let mut content = vec![json!({"type": "text", "text": out.preview})];
        content.extend(out.content.iter().filter(|b| b["type"] != "text").cloned());
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
        content.push(json!({"type": "text", "text": rest}));
        json!({ "content": content, "isError": out.is_error })
    };
    result["_meta"] = retention_meta(out);
    let mut result = serde_json::from_value::<CallToolResult>(result.clone()).unwrap_or_else(|e| {
        // A block the MCP model cannot hold: keep the text so nothing is lost.
        tracing::warn!("a converted result does not fit the MCP model ({e}); sending it as text");
        let mut fallback = CallToolResult::success(vec![rmcp::model::ContentBlock::text(
            result["content"].to_string(),
        )]);
        fallback.is_error = Some(out.is_error);
        fallback
    });
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
