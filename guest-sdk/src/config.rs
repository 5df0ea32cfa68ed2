//! [`Config`]: a plugin's configuration table, with accessors that produce messages
//! naming the offending key.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// The configuration handed to [`crate::Plugin::new`]: the JSON object from the
/// service's `adapter_config.<stage>` table (empty when absent).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Config {
    table: Map<String, Value>,
}

impl Config {
    /// Parses the JSON text the host sends. Anything but an object is rejected.
    pub fn parse(text: &str) -> Result<Self, String> {
        match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(table)) => Ok(Config { table }),
            Ok(Value::Null) => Ok(Config::default()),
            Ok(other) => Err(format!(
                "configuration must be a table, got {}",
                json_kind(&other)
            )),
            Err(e) => Err(format!("configuration is not valid JSON: {e}")),
        }
    }

    /// Builds a configuration from a JSON value (for native use and tests).
    pub fn from_value(value: Value) -> Result<Self, String> {
        Self::parse(&value.to_string())
    }

    /// The raw value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.table.get(key)
    }

    /// A string option.
    pub fn string(&self, key: &str) -> Result<Option<String>, String> {
        match self.table.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(format!(
                "`{key}` must be a string, got {}",
                json_kind(other)
            )),
        }
    }

    /// A boolean option.
    pub fn bool(&self, key: &str) -> Result<Option<bool>, String> {
        match self.table.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(format!(
                "`{key}` must be true or false, got {}",
                json_kind(other)
            )),
        }
    }

    /// A non-negative integer option.
    pub fn u64(&self, key: &str) -> Result<Option<u64>, String> {
        match self.table.get(key) {
            None => Ok(None),
            Some(Value::Number(n)) if n.as_u64().is_some() => Ok(n.as_u64()),
            Some(other) => Err(format!(
                "`{key}` must be a non-negative integer, got {}",
                json_kind(other)
            )),
        }
    }

    /// Deserializes the option `key` into `T`.
    pub fn typed<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>, String> {
        match self.table.get(key) {
            None => Ok(None),
            Some(v) => serde_json::from_value(v.clone())
                .map(Some)
                .map_err(|e| format!("`{key}`: {e}")),
        }
    }

    /// Rejects keys other than `known`, naming the first unknown one.
    pub fn deny_unknown(&self, known: &[&str]) -> Result<(), String> {
        match self.table.keys().find(|k| !known.contains(&k.as_str())) {
            None => Ok(()),
            Some(k) if known.is_empty() => {
                Err(format!("unknown option `{k}` (this plugin takes none)"))
            }
            Some(k) => Err(format!(
                "unknown option `{k}`; expected one of: {}",
                known.join(", ")
            )),
        }
    }
}

/// A short name for a JSON value's type, for messages.
pub fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "a table",
    }
}
