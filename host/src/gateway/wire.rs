//! Results whose blocks rmcp's model cannot hold, sent in their wire form.
//!
//! rmcp's `ContentBlock` has a variant for each block the specification defines and none
//! for a future one, and a `tools/call` handler can only answer with that model. A
//! result holding such a block (Airlock keeps it, [`crate::mcp::ContentBlock::Unknown`])
//! leaves the handler as a typed stand-in whose `_meta` carries the real result's wire
//! form under [`WIRE`]; on the way out, the stand-in is replaced by that wire form, byte
//! for byte: in the stdio transport (typed, [`WireTransport`]) and in the streamable
//! HTTP responses, JSON and SSE alike ([`rewrite_responses`]). `resultType` stays as
//! rmcp left it for the client's revision.

use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use rmcp::RoleServer;
use rmcp::model::{CallToolResult, ServerJsonRpcMessage, ServerResult};
use rmcp::transport::Transport;
use serde_json::{Value, json};

use crate::mcp;

/// The `_meta` key under which a stand-in carries the real result's wire form.
pub const WIRE: &str = "io.airlock/wire";

/// A typed stand-in for `result` (with `meta`, the retention record, as its `_meta`),
/// carrying its wire form.
pub fn stand_in(result: mcp::ToolResult, meta: Value) -> CallToolResult {
    let mut wire = mcp::wire::result_to_wire(&result);
    wire["_meta"] = meta;
    let mut stand_in = CallToolResult::success(vec![rmcp::model::ContentBlock::text(
        "[airlock] This result holds content blocks this client library cannot type.",
    )]);
    stand_in.is_error = Some(result.is_error);
    let mut carried = rmcp::model::MetaObject::default();
    carried.0.insert(WIRE.into(), wire);
    stand_in.meta = Some(carried);
    stand_in
}

/// The wire form of a `tools/call` result: the one it stands in for, when it carries
/// one, else its own.
pub fn wire_of(result: &CallToolResult) -> Value {
    if let Some(wire) = result.meta.as_ref().and_then(|m| m.0.get(WIRE)) {
        return wire.clone();
    }
    mcp::rmcp_model::json_text_value(result)
}

/// The wire form a stand-in result (as JSON) carries, with the stand-in's `resultType`;
/// `None` for any other result.
fn unwrapped(result: &Value) -> Option<Value> {
    let mut wire = result.get("_meta")?.get(WIRE)?.clone();
    if let Some(kind) = result.get("resultType") {
        wire["resultType"] = kind.clone();
    }
    Some(wire)
}

/// `message` with a stand-in result replaced by the wire form it carries.
fn unwrap_message(message: ServerJsonRpcMessage) -> ServerJsonRpcMessage {
    match message {
        ServerJsonRpcMessage::Response(mut response) => {
            if let ServerResult::CallToolResult(typed) = &response.result
                && typed.meta.as_ref().is_some_and(|m| m.0.contains_key(WIRE))
            {
                let mut wire = wire_of(typed);
                if typed.result_type.is_some() {
                    wire["resultType"] = json!("complete");
                }
                response.result = ServerResult::CustomResult(rmcp::model::CustomResult(wire));
            }
            ServerJsonRpcMessage::Response(response)
        }
        other => other,
    }
}

/// A server transport whose stand-in results go out in their wire form (stdio).
pub struct WireTransport<T>(pub T);

impl<T: Transport<RoleServer>> Transport<RoleServer> for WireTransport<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.0.send(unwrap_message(item))
    }

    fn receive(
        &mut self,
    ) -> impl Future<Output = Option<rmcp::model::ClientJsonRpcMessage>> + Send {
        self.0.receive()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.0.close()
    }
}

/// Whether `bytes` may hold a stand-in.
fn mentions_wire(bytes: &[u8]) -> bool {
    memchr::memmem::find(bytes, WIRE.as_bytes()).is_some()
}

/// One JSON-RPC message (its text) with a stand-in result replaced; `None` when it has
/// none.
fn rewrite_json(text: &[u8]) -> Option<Vec<u8>> {
    let mut message: Value = serde_json::from_slice(text).ok()?;
    let wire = unwrapped(message.get("result")?)?;
    message["result"] = wire;
    serde_json::to_vec(&message).ok()
}

/// Complete SSE events (each ending in a blank line) with every stand-in replaced.
fn rewrite_events(events: &[u8]) -> Bytes {
    if !mentions_wire(events) {
        return Bytes::copy_from_slice(events);
    }
    let mut out = Vec::with_capacity(events.len());
    for line in events.split_inclusive(|b| *b == b'\n') {
        let rewritten = line
            .strip_prefix(b"data:")
            .filter(|_| mentions_wire(line))
            .and_then(|data| {
                let body = data.strip_suffix(b"\n").unwrap_or(data);
                let body = body.strip_prefix(b" ").unwrap_or(body);
                rewrite_json(body)
            });
        match rewritten {
            Some(json) => {
                out.extend_from_slice(b"data: ");
                out.extend_from_slice(&json);
                out.push(b'\n');
            }
            None => out.extend_from_slice(line),
        }
    }
    Bytes::from(out)
}

/// The end of the last complete SSE event in `buffer` (past its blank line).
fn complete_events(buffer: &[u8]) -> Option<usize> {
    memchr::memmem::rfind(buffer, b"\n\n").map(|i| i + 2)
}

/// An SSE body with every stand-in replaced, event by event, as the events arrive.
fn rewrite_sse(body: axum::body::Body) -> axum::body::Body {
    let mut pending = BytesMut::new();
    let events = body.into_data_stream().map(move |chunk| {
        let chunk = chunk?;
        // The common case: whole events and nothing to replace pass as they are.
        if pending.is_empty() && chunk.ends_with(b"\n\n") && !mentions_wire(&chunk) {
            return Ok::<_, axum::Error>(chunk);
        }
        pending.extend_from_slice(&chunk);
        Ok(match complete_events(&pending) {
            Some(end) => rewrite_events(&pending.split_to(end)),
            None => Bytes::new(),
        })
    });
    let events =
        events.filter(|chunk| std::future::ready(!matches!(chunk, Ok(bytes) if bytes.is_empty())));
    axum::body::Body::from_stream(events)
}

/// The gateway's MCP responses with every stand-in replaced by the wire form it
/// carries: a JSON response whole, an SSE stream event by event.
pub async fn rewrite_responses(response: axum::response::Response) -> axum::response::Response {
    let kind = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if kind.starts_with("text/event-stream") {
        let (parts, body) = response.into_parts();
        return axum::response::Response::from_parts(parts, rewrite_sse(body));
    }
    if !kind.starts_with("application/json") {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(bytes) => bytes,
        Err(e) => {
            tracing::warn!("cannot read a response to send it: {e}");
            return axum::response::Response::from_parts(parts, axum::body::Body::empty());
        }
    };
    let bytes = match mentions_wire(&bytes)
        .then(|| rewrite_json(&bytes))
        .flatten()
    {
        Some(json) => {
            parts.headers.remove(http::header::CONTENT_LENGTH);
            Bytes::from(json)
        }
        None => bytes,
    };
    axum::response::Response::from_parts(parts, axum::body::Body::from(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stand_ins_are_replaced_in_json_and_in_sse_events() {
        let result = mcp::wire::result_from_wire(json!({"content": [
            {"type": "hologram", "depth": 3},
            {"type": "text", "text": "hi"}
        ]}));
        let typed = stand_in(result, json!({"output_id": "x"}));
        let mut typed_json = serde_json::to_value(&typed).unwrap();
        typed_json["resultType"] = json!("complete");
        let message = json!({"jsonrpc": "2.0", "id": 7, "result": typed_json});
        let text = serde_json::to_vec(&message).unwrap();
        let expected = json!({"jsonrpc": "2.0", "id": 7, "result": {
            "content": [{"type": "hologram", "depth": 3}, {"type": "text", "text": "hi"}],
            "isError": false,
            "_meta": {"output_id": "x"},
            "resultType": "complete",
        }});
        let rewritten: Value = serde_json::from_slice(&rewrite_json(&text).unwrap()).unwrap();
        assert_eq!(rewritten, expected);

        let mut sse = b"id: 1\ndata: ".to_vec();
        sse.extend_from_slice(&text);
        sse.extend_from_slice(b"\n\n: keep-alive\n\n");
        let out = rewrite_events(&sse);
        let data = out
            .split(|b| *b == b'\n')
            .find_map(|l| l.strip_prefix(b"data: "))
            .unwrap();
        assert_eq!(serde_json::from_slice::<Value>(data).unwrap(), expected);
        assert!(out.ends_with(b"\n\n: keep-alive\n\n"));
        assert_eq!(complete_events(b"data: x\n\ndata: y"), Some(9));
    }
}
