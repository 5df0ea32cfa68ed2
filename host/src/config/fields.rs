//! Typed reads of a config table's fields, with errors that name the field and what
//! it holds instead ([`kind`]). Every table's parser uses these.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::SettingError;

/// What a JSON value is, in words for an error ("a string", "a table"…).
pub(super) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "a table",
    }
}

/// The items of an array, if every one is a string; else the index of the first that
/// is not.
pub(super) fn string_list(items: &[Value]) -> Result<Vec<String>, usize> {
    items
        .iter()
        .enumerate()
        .map(|(i, v)| v.as_str().map(str::to_string).ok_or(i))
        .collect()
}

/// Typed reads of one table's fields, with errors naming the field.
pub(super) struct Fields<'a> {
    pub(super) map: &'a Map<String, Value>,
}

impl Fields<'_> {
    pub(super) fn string(&self, key: &str) -> Result<Option<String>, SettingError> {
        match self.map.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(format!("\"{key}\" must be a string, got {}", kind(other)).into()),
        }
    }

    pub(super) fn bool(&self, key: &str) -> Result<Option<bool>, SettingError> {
        match self.map.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => {
                Err(format!("\"{key}\" must be true or false, got {}", kind(other)).into())
            }
        }
    }

    pub(super) fn string_list(&self, key: &str) -> Result<Option<Vec<String>>, SettingError> {
        match self.map.get(key) {
            None => Ok(None),
            Some(Value::Array(items)) => string_list(items)
                .map(Some)
                .map_err(|i| format!("\"{key}[{i}]\" must be a string").into()),
            Some(other) => {
                Err(format!("\"{key}\" must be an array of strings, got {}", kind(other)).into())
            }
        }
    }

    pub(super) fn string_map(
        &self,
        key: &str,
    ) -> Result<Option<BTreeMap<String, String>>, SettingError> {
        match self.map.get(key) {
            None => Ok(None),
            Some(Value::Object(m)) => m
                .iter()
                .map(|(k, v)| match v {
                    Value::String(s) => Ok((k.clone(), s.clone())),
                    other => {
                        Err(format!("\"{key}.{k}\" must be a string, got {}", kind(other)).into())
                    }
                })
                .collect::<Result<_, _>>()
                .map(Some),
            Some(other) => {
                Err(format!("\"{key}\" must be a table of strings, got {}", kind(other)).into())
            }
        }
    }
}
