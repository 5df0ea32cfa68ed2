//! Entries that replicas share. Gateway replicas each keep their own secret store, but
//! what an agent authorizes through one must work through every other: its own upstream
//! tokens, and a sign-in whose browser comes back to another replica. With a shared
//! registry and `[registry] token_key`, such entries live in the registry instead,
//! sealed with that key (see `registry/vault.rs`); everything else stays local.

use super::SecretError;

/// A store several hosts share, holding entries sealed with a key they share.
/// Blocking, like [`super::SecretStore`].
pub trait SharedSecrets: Send + Sync {
    /// The value stored under `key`, if any.
    fn get(&self, key: &str) -> Result<Option<String>, SecretError>;
    /// Stores `value` under `key`, replacing any earlier value.
    fn put(&self, key: &str, value: &str) -> Result<(), SecretError>;
    /// Deletes `key`; returns whether it existed (exactly one of several hosts deleting
    /// it at once is told it did).
    fn delete(&self, key: &str) -> Result<bool, SecretError>;
    /// Deletes `key` and returns its value, if this call deleted it (exactly one of
    /// several hosts taking it at once gets it).
    fn take(&self, key: &str) -> Result<Option<String>, SecretError>;
    /// Deletes the entries whose key starts with `prefix` and that were last written
    /// more than `age` ago; returns how many.
    fn sweep(&self, prefix: &str, age: std::time::Duration) -> Result<usize, SecretError>;
}

/// Whether `key` is one replicas share: an agent's own authorization of a service
/// (`oauth:NAME.agent-…`), or a sign-in under way (`oauth-flow:…`, `oauth-state:…`).
pub fn is_shared_key(key: &str) -> bool {
    key.starts_with("oauth-flow:")
        || key.starts_with("oauth-state:")
        || key
            .strip_prefix("oauth:")
            .is_some_and(|holder| holder.contains(".agent-"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_agents_own_authorizations_and_sign_ins_are_shared() {
        assert!(is_shared_key("oauth:jira.agent-0123456789abcdef"));
        assert!(is_shared_key("oauth-flow:abc"));
        assert!(is_shared_key("oauth-state:abc"));
        assert!(!is_shared_key("oauth:jira"));
        assert!(!is_shared_key("secret:0191"));
        assert!(!is_shared_key("gateway-token:x"));
    }
}
