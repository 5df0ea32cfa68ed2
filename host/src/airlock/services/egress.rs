//! The one egress rule, for everything but tool results (which pass the whole pipeline
//! on the call path): what came from a server (or may hold a known secret) passes the
//! service's redaction chain before it leaves Airlock — tool metadata, resource
//! contents, prompt messages, error messages, progress and log text. Each distinct
//! string of a JSON document (object keys too) goes to the chain as a text, and comes
//! back in its place; the host's scrubber runs after the chain, and alone when the chain
//! fails (a failing plugin cannot open a hole).

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::Services;
use crate::error::CallError;
use crate::plugin::{ServicePipeline, plugin_secrets};
use crate::secrets::KnownSecrets;

/// `value` through `pipeline`'s redaction chain, then the host's scrubber. When the chain
/// fails, the host's scrubber alone, and a warning naming the plugin.
pub(crate) async fn redact_with(
    pipeline: Option<&Arc<ServicePipeline>>,
    secrets: &KnownSecrets,
    mut value: Value,
) -> Value {
    if let Some(pipeline) = pipeline {
        let strings = Strings::of(&value);
        if !strings.texts.is_empty() {
            match pipeline
                .redact_texts(strings.texts.clone(), plugin_secrets(secrets))
                .await
            {
                Ok(redacted) => value = strings.replace(value, &redacted),
                Err(e) => tracing::warn!(
                    "the redaction chain failed on server metadata ({}); the host's scrubber was applied instead",
                    secrets.scrub(&e.to_string())
                ),
            }
        }
    }
    secrets.scrub_json(&mut value);
    value
}

/// The distinct strings of a JSON document, keys and values, in first-seen order.
struct Strings {
    texts: Vec<String>,
    index: HashMap<String, usize>,
}

impl Strings {
    fn of(value: &Value) -> Strings {
        let mut strings = Strings {
            texts: Vec::new(),
            index: HashMap::new(),
        };
        strings.collect(value);
        strings
    }

    fn note(&mut self, text: &str) {
        if !self.index.contains_key(text) {
            self.index.insert(text.to_string(), self.texts.len());
            self.texts.push(text.to_string());
        }
    }

    fn collect(&mut self, value: &Value) {
        match value {
            Value::String(s) => self.note(s),
            Value::Array(items) => items.iter().for_each(|v| self.collect(v)),
            Value::Object(map) => {
                for (key, v) in map {
                    self.note(key);
                    self.collect(v);
                }
            }
            _ => {}
        }
    }

    /// `value` with every string replaced by its redacted text.
    fn replace(&self, value: Value, redacted: &[String]) -> Value {
        let swap = |s: String| match self.index.get(&s) {
            Some(&i) => redacted[i].clone(),
            None => s,
        };
        match value {
            Value::String(s) => Value::String(swap(s)),
            Value::Array(items) => Value::Array(
                items
                    .into_iter()
                    .map(|v| self.replace(v, redacted))
                    .collect(),
            ),
            Value::Object(map) => Value::Object(
                map.into_iter()
                    .map(|(k, v)| (swap(k), self.replace(v, redacted)))
                    .collect::<Map<String, Value>>(),
            ),
            other => other,
        }
    }
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
        Value::Array(tools) => tools,
        _ => unreachable!("redaction keeps an array an array"),
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

impl Services {
    /// `value` from `service`'s server, redacted for egress.
    pub(crate) async fn redact_value(&self, service: &str, value: Value) -> Value {
        let Some(svc) = self.get(service) else {
            return value;
        };
        redact_with(svc.pipeline.as_ref(), &svc.secrets(), value).await
    }

    /// `service`'s tool listing, redacted for egress (see [`redact_listing`]).
    pub(crate) async fn redact_tools(&self, service: &str, listed: Vec<Value>) -> Vec<Value> {
        let Some(svc) = self.get(service) else {
            return listed;
        };
        redact_listing(svc.pipeline.as_ref(), &svc.secrets(), service, listed).await
    }

    /// `text` from (or about) `service`'s server, redacted for egress.
    pub(crate) async fn redact_text(&self, service: &str, text: &str) -> String {
        match self
            .redact_value(service, Value::String(text.to_string()))
            .await
        {
            Value::String(s) => s,
            other => other.to_string(),
        }
    }

    /// `error` with its message redacted for egress.
    pub(crate) async fn redact_error(&self, service: &str, mut error: CallError) -> CallError {
        error.message = self.redact_text(service, &error.message).await;
        error
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn every_distinct_string_is_listed_once_and_put_back_in_place() {
        let doc = json!({"name": "a", "list": ["a", {"token": "t0k"}], "n": 3, "b": null});
        let strings = Strings::of(&doc);
        let mut texts = strings.texts.clone();
        texts.sort();
        assert_eq!(texts, ["a", "b", "list", "n", "name", "t0k", "token"]);
        let redacted: Vec<String> = strings
            .texts
            .iter()
            .map(|t| {
                if t == "t0k" || t == "token" {
                    "[R]".into()
                } else {
                    t.clone()
                }
            })
            .collect();
        assert_eq!(
            strings.replace(doc, &redacted),
            json!({"name": "a", "list": ["a", {"[R]": "[R]"}], "n": 3, "b": null})
        );
    }
}
