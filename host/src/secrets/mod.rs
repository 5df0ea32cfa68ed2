//! Known secrets: the values Airlock must never let out. For now these are the values of
//! a service's env vars and headers that are marked secret (`secret_env`) or whose names
//! look like credentials — and the store where secret values live ([`SecretStore`]).

mod store;

pub use store::{BackendKind, ExclusiveGuard, SecretError, SecretStore, new_reference};

use crate::config::{ServerConfig, TransportConfig};

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

/// Longest secret value accepted, in bytes.
pub const MAX_SECRET_BYTES: usize = 2560;

/// Whether `name` looks like it holds a credential.
pub fn looks_like_credential(name: &str) -> bool {
    let upper = name.to_ascii_uppercase().replace('-', "_");
    CREDENTIAL_MARKERS.iter().any(|m| upper.contains(m))
}

/// Checks a secret value: non-empty, no NUL, at most [`MAX_SECRET_BYTES`]. Whitespace is
/// kept as given.
pub fn validate_secret(name: &str, value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Err(format!("secret \"{name}\" is empty"));
    }
    if value.contains('\0') {
        return Err(format!("secret \"{name}\" contains a NUL character"));
    }
    if value.len() > MAX_SECRET_BYTES {
        return Err(format!(
            "secret \"{name}\" is {} bytes; the limit is {MAX_SECRET_BYTES}",
            value.len()
        ));
    }
    Ok(())
}

/// The known secrets of one service as `(name, value)`: env vars and headers marked in
/// `secret_env` or named like credentials, credentials in the URL, and credential-named
/// variables expanded anywhere in the definition. For a header like `Authorization: Bearer X`
/// both the whole value and the token after the scheme are known.
pub fn known_secrets(server: &ServerConfig) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let is_secret = |name: &str| server.secret_env.contains(name) || looks_like_credential(name);
    match &server.transport {
        TransportConfig::Stdio { env, .. } => {
            for (k, v) in env {
                if is_secret(k) && !v.is_empty() {
                    found.push((k.clone(), v.clone()));
                }
            }
        }
        TransportConfig::Http { headers, url, .. } => {
            found.extend(url_credentials(url));
            for (k, v) in headers {
                if is_secret(k) && !v.is_empty() {
                    found.push((k.clone(), v.clone()));
                    if let Some((_, token)) = v.split_once(' ')
                        && !token.trim().is_empty()
                    {
                        found.push((k.clone(), token.trim().to_string()));
                    }
                }
            }
        }
    }
    // Credential-named variables expanded elsewhere (args, url), unless the same value
    // is already known under its env or header name.
    for (name, value) in &server.referenced_secrets {
        if !found.iter().any(|(_, v)| v == value) {
            found.push((name.clone(), value.clone()));
        }
    }
    found
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
