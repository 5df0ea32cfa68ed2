//! The secret store replicas share: with a PostgreSQL registry and `[registry]
//! token_key`, the entries every replica must see (each agent's own authorization of a
//! service, sign-ins under way: [`crate::secrets::is_shared_key`]) live in the
//! registry's `shared_secrets` table (`shared_secrets.rs`), sealed with that key,
//! instead of in each host's own secret store. The database holds only sealed values.

use std::sync::Arc;

use super::Registry;
use crate::config::RegistryLocation;
use crate::secrets::SecretStore;

/// `store`, keeping what replicas share in `registry` when `location` is a shared
/// registry with a `token_key`; else `store` as it is.
pub fn sharing(
    store: SecretStore,
    location: &RegistryLocation,
    registry: &Arc<Registry>,
) -> SecretStore {
    match location {
        #[cfg(feature = "postgres")]
        RegistryLocation::Postgres {
            token_key: Some(key),
            ..
        } => match crate::secrets::Sealer::new(&key.bytes) {
            Ok(sealer) => store.with_shared(Arc::new(sealed::RegistryVault {
                registry: registry.clone(),
                sealer,
            })),
            Err(e) => {
                tracing::warn!(
                    "[registry] token_key cannot seal ({e}); agents' tokens stay in each host's secret store"
                );
                store
            }
        },
        _ => {
            let _ = registry;
            store
        }
    }
}

#[cfg(feature = "postgres")]
mod sealed {
    use std::sync::Arc;

    use super::super::Registry;
    use crate::secrets::{Sealer, SecretError, SharedSecrets};

    /// The registry's `shared_secrets`, sealed and opened with the replicas' key.
    pub(super) struct RegistryVault {
        pub(super) registry: Arc<Registry>,
        pub(super) sealer: Sealer,
    }

    impl RegistryVault {
        fn failed(&self, key: &str, message: impl std::fmt::Display) -> SecretError {
            SecretError::Shared {
                store: self.registry.describe(),
                key: key.to_string(),
                message: message.to_string(),
            }
        }
    }

    impl RegistryVault {
        /// The value of entry `key` from what the registry answered (sealed, if any).
        fn opened(
            &self,
            key: &str,
            sealed: Result<Option<String>, crate::registry::RegistryError>,
        ) -> Result<Option<String>, SecretError> {
            sealed
                .map_err(|e| self.failed(key, e))?
                .map(|sealed| {
                    self.sealer
                        .open(key, &sealed)
                        .map_err(|e| self.failed(key, e))
                })
                .transpose()
        }
    }

    impl SharedSecrets for RegistryVault {
        fn get(&self, key: &str) -> Result<Option<String>, SecretError> {
            let sealed = self.registry.shared_secret(key);
            self.opened(key, sealed)
        }

        fn put(&self, key: &str, value: &str) -> Result<(), SecretError> {
            let sealed = self
                .sealer
                .seal(key, value)
                .map_err(|e| self.failed(key, e))?;
            self.registry
                .put_shared_secret(key, &sealed)
                .map_err(|e| self.failed(key, e))
        }

        fn delete(&self, key: &str) -> Result<bool, SecretError> {
            self.registry
                .delete_shared_secret(key)
                .map_err(|e| self.failed(key, e))
        }

        fn take(&self, key: &str) -> Result<Option<String>, SecretError> {
            let sealed = self.registry.take_shared_secret(key);
            self.opened(key, sealed)
        }

        fn sweep(&self, prefix: &str, age: std::time::Duration) -> Result<usize, SecretError> {
            let cutoff = std::time::SystemTime::now()
                .checked_sub(age)
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_millis() as i64);
            self.registry
                .sweep_shared_secrets(prefix, cutoff)
                .map_err(|e| self.failed(&format!("{prefix}*"), e))
        }
    }
}
