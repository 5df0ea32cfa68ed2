//! Secrets: what counts as a credential (by name, in a URL), the values a service must
//! never let out ([`KnownSecrets`], with the host's scrubbers), and the store where
//! secret values live ([`SecretStore`]).
//!
//! A leaf of the layering: it imports nothing of Airlock's but [`crate::digest`].
//!
//! Layer 0 (leaf). May import: `digest`.

mod known;
mod log;
#[cfg(feature = "postgres")]
mod seal;
mod shared;
mod store;

pub use known::{KnownSecret, KnownSecrets, MIN_SCRUBBED_LEN};
pub use log::{ScrubbingWriter, log_secrets, register_log_secrets, scrub_log};
#[cfg(feature = "postgres")]
pub use seal::{SealError, Sealer};
pub use shared::{SharedSecrets, is_shared_key};
pub use store::{BackendKind, ExclusiveGuard, SecretError, SecretStore, new_reference};

/// Name fragments that mark a variable or header as a credential (case-insensitive).
pub const CREDENTIAL_MARKERS: &[&str] = &[
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "API_KEY",
    "APIKEY",
    "PRIVATE_KEY",
    "CREDENTIAL",
    "AUTH",
];

/// What is shown in place of a secret value.
pub const MASK: &str = "••••••";

/// Longest secret value accepted, in bytes.
pub const MAX_SECRET_BYTES: usize = 2560;

/// Whether `name` looks like it holds a credential.
pub fn looks_like_credential(name: &str) -> bool {
    let upper = name.to_ascii_uppercase().replace('-', "_");
    CREDENTIAL_MARKERS.iter().any(|m| upper.contains(m))
}

/// A secret value that cannot be stored. The message names the secret, never the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidSecret {
    /// The value is empty.
    #[error("secret \"{0}\" is empty")]
    Empty(String),
    /// The value holds a NUL character.
    #[error("secret \"{0}\" contains a NUL character")]
    Nul(String),
    /// The value is longer than [`MAX_SECRET_BYTES`].
    #[error("secret \"{name}\" is {len} bytes; the limit is {MAX_SECRET_BYTES}")]
    TooLong {
        /// The secret's name.
        name: String,
        /// Its length in bytes.
        len: usize,
    },
}

/// Checks a secret value: non-empty, no NUL, at most [`MAX_SECRET_BYTES`]. Whitespace is
/// kept as given.
pub fn validate_secret(name: &str, value: &str) -> Result<(), InvalidSecret> {
    if value.is_empty() {
        return Err(InvalidSecret::Empty(name.to_string()));
    }
    if value.contains('\0') {
        return Err(InvalidSecret::Nul(name.to_string()));
    }
    if value.len() > MAX_SECRET_BYTES {
        return Err(InvalidSecret::TooLong {
            name: name.to_string(),
            len: value.len(),
        });
    }
    Ok(())
}

/// Credentials written into a URL: the password of `user:password@`, and the values of
/// query parameters with credential-like names (`?api_key=…`, `&token=…`).
pub fn url_credentials(url: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let Some((_, rest)) = url.split_once("://") else {
        return found;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if let Some((userinfo, _)) = authority.rsplit_once('@')
        && let Some((_, password)) = userinfo.split_once(':')
        && !password.is_empty()
    {
        found.push(("url password".to_string(), password.to_string()));
    }
    if let Some((_, query)) = rest.split_once('?') {
        let query = query.split('#').next().unwrap_or("");
        for pair in query.split('&') {
            if let Some((name, value)) = pair.split_once('=')
                && looks_like_credential(name)
                && !value.is_empty()
            {
                found.push((format!("url parameter {name}"), value.to_string()));
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_names_and_limits() {
        assert!(looks_like_credential("GITHUB_TOKEN"));
        assert!(looks_like_credential("x-api-key"));
        assert!(looks_like_credential("Authorization"));
        assert!(!looks_like_credential("NODE_ENV"));
        assert!(validate_secret("A", " spaced ").is_ok());
        assert!(validate_secret("A", "").is_err());
        assert!(validate_secret("A", "a\0b").is_err());
        assert!(validate_secret("A", &"x".repeat(2561)).is_err());
        assert!(validate_secret("A", &"x".repeat(2560)).is_ok());
    }

    #[test]
    fn credentials_written_into_urls_are_known() {
        let found = url_credentials("https://u:pa55@h.example/mcp?api_key=k123&x=1&token=t9#f");
        let values: Vec<&str> = found.iter().map(|(_, v)| v.as_str()).collect();
        assert_eq!(values, ["pa55", "k123", "t9"]);
        assert!(url_credentials("https://h.example/mcp?page=2").is_empty());
        assert!(url_credentials("not a url").is_empty());
    }
}
