//! Tool-name helpers: sanitizing, short hashes, unique namespaces and qualified names
//! that always match `^[a-zA-Z0-9_-]{1,64}$`.

use std::collections::{HashMap, HashSet};

use sha2::{Digest, Sha256};

use crate::{NamedTool, Tool};

/// The longest qualified name model APIs accept.
pub const MAX_NAME_LEN: usize = 64;

/// The separator between a namespace and a tool name.
pub const SEPARATOR: &str = "__";

/// Replaces every character outside `[a-zA-Z0-9_-]` with `_`.
pub fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The first `len` hex digits of the SHA-256 of `text` (`len` at most 64).
pub fn short_hash(text: &str, len: usize) -> String {
    let digest = Sha256::digest(text.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    hex[..len.min(hex.len())].to_string()
}

/// Cuts an ASCII string to at most `max` bytes.
fn cut(text: &str, max: usize) -> &str {
    // Sanitized names are ASCII, so any byte index is a character boundary.
    &text[..text.len().min(max)]
}

/// Returns `base` (cut to `max` bytes) if no one holds it, else `base_2`, `base_3`…
/// cut so the whole stays within `max`.
pub fn unique_namespace(base: &str, taken: &[String], max: usize) -> String {
    let taken: HashSet<&str> = taken.iter().map(String::as_str).collect();
    let first = cut(base, max).to_string();
    if !taken.contains(first.as_str()) {
        return first;
    }
    (2u32..)
        .map(|n| {
            let suffix = format!("_{n}");
            format!("{}{suffix}", cut(base, max.saturating_sub(suffix.len())))
        })
        .find(|candidate| !taken.contains(candidate.as_str()))
        .expect("an unbounded counter always finds a free name")
}

/// Derives a label namespace: lower case, sanitized, trimmed of `_`, at most `max`
/// characters; falls back to `fallback` (the service id) when the label has none.
pub fn label_namespace(label: &str, fallback: &str, max: usize) -> String {
    let from = |s: &str| {
        let s = sanitize(&s.to_lowercase());
        let s = s.trim_matches('_');
        cut(s, max).trim_end_matches('_').to_string()
    };
    let ns = from(label);
    if ns.is_empty() { from(fallback) } else { ns }
}

/// The default `inputSchema` when a server declares none.
pub const EMPTY_OBJECT_SCHEMA: &str = r#"{"type":"object"}"#;

/// Names each tool `{namespace}__{sanitized tool}`, or just `{sanitized tool}` when
/// `namespace` is empty (the raw style of a transparent gateway). A name gets a short
/// hash of the raw tool name only when it would exceed 64 characters or read the same
/// as another; the raw name is kept for the call. `description_prefix`, when given, is
/// prepended to descriptions as `[prefix] `.
pub fn qualify_tools(
    namespace: &str,
    tools: Vec<Tool>,
    description_prefix: Option<&str>,
) -> Vec<NamedTool> {
    let plain: Vec<String> = tools
        .iter()
        .map(|t| {
            if namespace.is_empty() {
                sanitize(&t.name)
            } else {
                format!("{namespace}{SEPARATOR}{}", sanitize(&t.name))
            }
        })
        .collect();
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for name in &plain {
        *counts.entry(name.as_str()).or_default() += 1;
    }
    let mut used: HashSet<String> = plain
        .iter()
        .filter(|n| n.len() <= MAX_NAME_LEN && counts[n.as_str()] == 1)
        .cloned()
        .collect();
    let mut named = Vec::with_capacity(tools.len());
    for (tool, candidate) in tools.into_iter().zip(&plain) {
        let name = if candidate.len() <= MAX_NAME_LEN && counts[candidate.as_str()] == 1 {
            candidate.clone()
        } else {
            hashed_name(candidate, &tool.name, &mut used)
        };
        let description = match (description_prefix, tool.description) {
            (Some(prefix), Some(d)) => Some(format!("[{prefix}] {d}")),
            (Some(prefix), None) => Some(format!("[{prefix}]")),
            (None, d) => d,
        };
        named.push(NamedTool {
            raw_name: tool.name,
            name,
            description,
            input_schema: tool
                .input_schema
                .unwrap_or_else(|| EMPTY_OBJECT_SCHEMA.to_string()),
        });
    }
    named
}

/// `candidate` cut short and suffixed with `_` + a hash of the raw name, lengthening the
/// hash in the (astronomically rare) case that it still collides.
fn hashed_name(candidate: &str, raw: &str, used: &mut HashSet<String>) -> String {
    for hash_len in (8..=32).step_by(4) {
        let suffix = format!("_{}", short_hash(raw, hash_len));
        let name = format!("{}{suffix}", cut(candidate, MAX_NAME_LEN - suffix.len()));
        if used.insert(name.clone()) {
            return name;
        }
    }
    // Identical raw names (a server listing one tool twice): disambiguate by position.
    (2u32..)
        .map(|n| {
            let suffix = format!("_{}_{n}", short_hash(raw, 8));
            format!("{}{suffix}", cut(candidate, MAX_NAME_LEN - suffix.len()))
        })
        .find(|name| used.insert(name.clone()))
        .expect("an unbounded counter always finds a free name")
}

/// Whether `name` is a valid qualified name: `^[a-zA-Z0-9_-]{1,64}$`.
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str) -> Tool {
        Tool {
            name: name.into(),
            title: None,
            description: Some("d".into()),
            input_schema: None,
            output_schema: None,
            annotations: None,
            meta: None,
        }
    }

    #[test]
    fn plain_names_are_sanitized_and_unhashed() {
        let named = qualify_tools("mcp__fs", vec![tool("read.file"), tool("list")], None);
        assert_eq!(named[0].name, "mcp__fs__read_file");
        assert_eq!(named[0].raw_name, "read.file");
        assert_eq!(named[1].name, "mcp__fs__list");
        assert_eq!(named[1].input_schema, EMPTY_OBJECT_SCHEMA);
    }

    #[test]
    fn collisions_and_long_names_get_hashes_and_stay_valid() {
        let long = "x".repeat(80);
        let named = qualify_tools(
            "ns",
            vec![tool("a.b"), tool("a_b"), tool(&long), tool("ok")],
            None,
        );
        let names: HashSet<_> = named.iter().map(|n| n.name.clone()).collect();
        assert_eq!(names.len(), 4);
        assert!(named.iter().all(|n| is_valid_name(&n.name)), "{named:?}");
        assert!(named[0].name.starts_with("ns__a_b_") && named[1].name.starts_with("ns__a_b_"));
        assert_ne!(named[0].name, named[1].name);
        assert_eq!(named[2].name.len(), 64);
        assert_eq!(named[3].name, "ns__ok");
    }

    #[test]
    fn an_empty_namespace_keeps_the_sanitized_raw_names() {
        let named = qualify_tools(
            "",
            vec![tool("echo"), tool("get.sum"), tool("get_sum")],
            None,
        );
        assert_eq!(named[0].name, "echo");
        assert!(named[1].name.starts_with("get_sum_") && named[2].name.starts_with("get_sum_"));
        assert!(named.iter().all(|n| is_valid_name(&n.name)), "{named:?}");
    }

    #[test]
    fn namespaces_are_unique_and_bounded() {
        let taken = vec!["rea".to_string(), "rea_2".to_string()];
        assert_eq!(unique_namespace("rea", &taken, 24), "rea_3");
        assert_eq!(label_namespace("REA", "svc", 24), "rea");
        assert_eq!(
            label_namespace("My Very Long Service Label Indeed", "svc", 24),
            "my_very_long_service_lab"
        );
        assert_eq!(label_namespace("!!!", "Svc.1", 24), "svc_1");
        let t = vec!["abcdefghijklmnopqrstuvwx".to_string()];
        assert_eq!(
            unique_namespace("abcdefghijklmnopqrstuvwx", &t, 24),
            "abcdefghijklmnopqrstuv_2"
        );
    }
}
