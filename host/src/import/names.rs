//! Server names: which entry keys can be used as they are, how the others are sanitized,
//! and how a name already taken gets a `-2`, `-3`… suffix.

use std::collections::HashSet;

/// Longest server name kept, in characters.
const MAX_NAME: usize = 64;

/// Whether `name` can be used as is: `^[A-Za-z0-9_-]{1,64}$`.
pub(super) fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// `key` with every other character replaced by `_`, cut to 64 characters.
pub(super) fn sanitize_name(key: &str) -> String {
    let name: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(MAX_NAME)
        .collect();
    if name.is_empty() {
        "server".to_string()
    } else {
        name
    }
}

/// `base`, or `base-2`, `base-3`… (cut to stay within 64 characters), whichever is free.
pub(super) fn unique_name(base: &str, taken: &HashSet<String>) -> String {
    if !taken.contains(base) {
        return base.to_string();
    }
    let mut n = 2u32;
    loop {
        let suffix = format!("-{n}");
        let stem: String = base.chars().take(MAX_NAME - suffix.len()).collect();
        let name = format!("{stem}{suffix}");
        if !taken.contains(&name) {
            return name;
        }
        n += 1;
    }
}
