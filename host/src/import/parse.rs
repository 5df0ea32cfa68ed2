//! Parsing a client's whole file (JSON, JSONC or TOML) into JSON, with error messages
//! that never quote the file, and how JSON values are described in messages.

use serde_json::Value;

use super::EntryError;
use super::jsonc::strip_jsonc;

/// Parses a whole file to JSON. Error messages never quote the file's content.
/// The syntax of a client's file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Format {
    /// JSON; comments and trailing commas (JSONC, as VS Code and Gemini allow) are tolerated.
    Json,
    /// TOML (Codex).
    Toml,
}

pub(super) fn parse(text: &str, format: Format) -> Result<Value, EntryError> {
    match format {
        Format::Json => serde_json::from_str(&strip_jsonc(text))
            .map_err(|e| format!("invalid JSON: {e}").into()),
        Format::Toml => {
            let table: toml::Table = toml::from_str(text).map_err(|e| {
                // The error's `Display` quotes the offending line, which may hold a
                // secret: build the message from its parts instead.
                let message = e.message().trim().replace('\n', "; ");
                match e.span() {
                    Some(span) => {
                        let (line, column) = line_column(text, span.start);
                        format!("invalid TOML at line {line} column {column}: {message}")
                    }
                    None => format!("invalid TOML: {message}"),
                }
            })?;
            serde_json::to_value(table).map_err(|e| format!("cannot convert the TOML: {e}").into())
        }
    }
}

/// 1-based line and column (in bytes) of byte `offset` in `text`.
pub(super) fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text.as_bytes()[..offset.min(text.len())];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let column = match before.iter().rposition(|&b| b == b'\n') {
        Some(newline) => before.len() - newline,
        None => before.len() + 1,
    };
    (line, column)
}

/// How a JSON value is described in messages.
pub(super) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
