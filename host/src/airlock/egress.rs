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

impl Inner {
    /// `value` from `service`'s server, redacted for egress.
    pub(super) async fn redact_value(&self, service: &str, value: Value) -> Value {
        let Some(svc) = self.service(service) else {
            return value;
        };
        redact_with(svc.pipeline.as_ref(), &svc.secrets(), value).await
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
