//! The one egress rule: everything that came from a server (or may hold a known secret)
//! passes the service's redaction before it leaves Airlock — results through the full
//! pipeline (`calls.rs`), and everything else here: tool metadata, resource contents,
//! prompt messages, error messages, progress and log text. The service's redaction chain
//! runs with its secrets and configured patterns; the host's scrubber runs after it, and
//! alone when the chain itself fails (a failing plugin cannot open a hole).

use std::sync::Arc;

use serde_json::Value;

use super::Inner;
use crate::error::CallError;
use crate::plugin::{ServicePipeline, plugin_secrets};
use crate::secrets::KnownSecrets;

/// `value` through `pipeline`'s redaction chain, then the host's scrubber. When the chain
/// fails, the host's scrubber alone, and a warning naming the plugin.
pub(crate) async fn redact_with(
    pipeline: Option<&Arc<ServicePipeline>>,
    secrets: &KnownSecrets,
    value: Value,
) -> Value {
    let mut value = match pipeline {
        Some(pipeline) => match pipeline
            .redact_json(value.clone(), plugin_secrets(secrets))
            .await
        {
            Ok(redacted) => redacted,
            Err(e) => {
                tracing::warn!(
                    "the redaction chain failed on server metadata ({}); the host's scrubber was applied instead",
                    secrets.scrub(&e.to_string())
                );
                value
            }
        },
        None => value,
    };
    secrets.scrub_json(&mut value);
    value
}

/// A server's tool listing (MCP tool JSON) redacted for egress, without the tools whose
/// name the redaction changed: such a name holds a known secret, and a tool is called by
/// its name, shown by it and stored under it, so it cannot be offered. Each one skipped
/// is logged by its redacted name.
pub(crate) async fn redact_listing(
    pipeline: Option<&Arc<ServicePipeline>>,
    secrets: &KnownSecrets,
    service: &str,
    listed: Vec<Value>,
) -> Vec<Value> {
    let redacted = match redact_with(pipeline, secrets, Value::Array(listed.clone())).await {
        Value::Array(tools) if tools.len() == listed.len() => tools,
        // A chain that changed the list's shape: the host's scrubber alone.
        _ => {
            let mut value = Value::Array(listed.clone());
            secrets.scrub_json(&mut value);
            match value {
                Value::Array(tools) => tools,
                _ => unreachable!("scrubbing keeps an array an array"),
            }
        }
    };
    listed
        .iter()
        .zip(redacted)
        .filter_map(|(raw, clean)| {
            if raw.get("name") == clean.get("name") {
                return Some(clean);
            }
            let shown = clean.get("name").and_then(Value::as_str).unwrap_or("?");
            tracing::warn!(
                service,
                "not offering the tool {shown:?}: the redaction rule changes its name (it holds a known secret or a redacted pattern)"
            );
            None
        })
        .collect()
}

impl Inner {
    /// `value` from `service`'s server, redacted for egress.
    pub(super) async fn redact_value(&self, service: &str, value: Value) -> Value {
        let Some(svc) = self.service(service) else {
            return value;
        };
        redact_with(svc.pipeline.as_ref(), &svc.secrets(), value).await
    }

    /// `service`'s tool listing, redacted for egress (see [`redact_listing`]).
    pub(super) async fn redact_tools(&self, service: &str, listed: Vec<Value>) -> Vec<Value> {
        let Some(svc) = self.service(service) else {
            return listed;
        };
        redact_listing(svc.pipeline.as_ref(), &svc.secrets(), service, listed).await
    }

    /// `text` from (or about) `service`'s server, redacted for egress.
    pub(super) async fn redact_text(&self, service: &str, text: &str) -> String {
        match self
            .redact_value(service, Value::String(text.to_string()))
            .await
        {
            Value::String(s) => s,
            other => other.to_string(),
        }
    }

    /// `error` with its message redacted for egress.
    pub(super) async fn redact_error(&self, service: &str, mut error: CallError) -> CallError {
        error.message = self.redact_text(service, &error.message).await;
        error
    }
}
