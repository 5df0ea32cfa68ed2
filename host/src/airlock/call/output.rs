//! What a completed call hands back ([`CallOutput`], its [`Redaction`] marks) and the
//! JSON it renders to (`airlock --json call`, the demo, DESIGN.md's public surface).

use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};

use crate::error::{CallError, ErrorCode};
use crate::mcp::ContentBlock;
use crate::plugin::RedactionMark;
use crate::results::Retained;

/// A completed call (including one the server marked `isError`).
#[derive(Debug, Clone, Serialize)]
pub struct CallOutput {
    /// The service that ran it.
    pub service: String,
    /// The qualified tool name.
    pub tool: String,
    /// The server's raw tool name.
    pub raw_tool: String,
    /// Whether the server marked the result as an error.
    pub is_error: bool,
    /// The retention record.
    pub retained: Retained,
    /// The converted, redacted content blocks.
    pub content: Vec<ContentBlock>,
    /// The converted, redacted `structuredContent`, if any.
    pub structured_content: Option<Value>,
    /// The preview of the full text.
    pub preview: String,
    /// Where redactions happened.
    pub redactions: Vec<Redaction>,
    /// How long the call took.
    pub elapsed: Duration,
    /// Progress notifications seen.
    pub progress_seen: usize,
    /// Set when an earlier cancelled call on this session never answered.
    pub warning: Option<String>,
}

/// One redaction mark.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Redaction {
    /// `content[N]`, `structuredContent` or `_meta`.
    pub location: String,
    /// `secret:NAME` or `pattern:NAME`.
    pub rule: String,
    /// Occurrences replaced.
    pub count: u32,
}

impl From<RedactionMark> for Redaction {
    fn from(m: RedactionMark) -> Self {
        Redaction {
            location: m.location,
            rule: m.rule,
            count: m.count,
        }
    }
}

/// The JSON object `airlock --json call` prints for a call's outcome (DESIGN.md's
/// public surface): `ok`, the service, tool, retention record, converted blocks and the
/// preview on success; `ok:false` with the error code and message otherwise. A result
/// the server marked `isError` is `ok:false` with `tool_error` and keeps its content.
pub fn call_json(outcome: &Result<CallOutput, CallError>) -> Value {
    match outcome {
        Ok(out) => {
            let mut v = json!({
                "ok": !out.is_error,
                "service": out.service,
                "tool": out.tool,
                "output_id": out.retained.output_id,
                "size": out.retained.size,
                "digest": out.retained.digest,
                "complete": out.retained.complete,
                "redacted": out.retained.redacted,
                "redactions": out.redactions,
                "content": out.content,
                "text": out.preview,
            });
            if let Some(sc) = &out.structured_content {
                v["structured_content"] = sc.clone();
            }
            if let Some(warning) = &out.warning {
                v["warning"] = json!(warning);
            }
            if let Some(reason) = &out.retained.not_retained_reason {
                v["retained"] = json!(false);
                v["retention_message"] = json!(reason);
            }
            if out.is_error {
                v["error"] = json!(ErrorCode::ToolError);
                v["message"] = json!(out.preview);
            }
            v
        }
        Err(e) => {
            let mut v = json!({"ok": false, "error": e.code, "message": e.message});
            if let Some(wait) = e.retry_after {
                v["retry_after_ms"] = json!(wait.as_millis() as u64);
            }
            v
        }
    }
}

impl CallOutput {
    /// The converted, redacted blocks in their wire form (MCP JSON).
    pub fn content_json(&self) -> Vec<Value> {
        self.content
            .iter()
            .map(crate::mcp::wire::block_to_wire)
            .collect()
    }

    /// This output as `airlock --json call` prints it (see [`call_json`]).
    pub fn to_json(&self) -> Value {
        call_json(&Ok(self.clone()))
    }
}
