//! The secret store: where secret values (env vars and headers marked secret, OAuth
//! tokens) live. The registry keeps only a reference (`secret:<uuid>`).
//!
//! Two backends:
//! - the OS credential store through the `keyring` crate (macOS Keychain, Windows
//!   Credential Manager; on Linux the kernel keyring, which does not survive a reboot, so
//!   it is used there only when asked for);
//! - a file, `secrets/secrets.json` in the data directory, mode 0600 inside a 0700
//!   folder, replaced atomically on every write — the fallback for headless machines.
//!
//! `AIRLOCK_SECRET_STORE=keyring|file` chooses; the default is the keyring on macOS and
//! Windows when it answers a probe (else the file), and the file elsewhere.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The folder (inside the data directory) holding the file backend.
pub const SECRETS_DIR: &str = "secrets";
/// The file backend's file name.
pub const SECRETS_FILE: &str = "secrets.json";

/// A secret-store failure. Messages name the key and the backend, never the value.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SecretError {
    /// The secrets file could not be read or written.
    #[error("secret store file \"{path}\": {message}")]
    File {
        /// The file or folder.
        path: PathBuf,
        /// What failed.
        message: String,
    },
    /// The OS credential store refused.
    #[error("OS credential store, entry \"{key}\": {message}")]
    Keyring {
        /// The entry.
        key: String,
        /// What failed.
        message: String,
    },
    /// `AIRLOCK_SECRET_STORE` names no backend.
    #[error("AIRLOCK_SECRET_STORE is \"{0}\"; expected \"keyring\" or \"file\"")]
    UnknownBackend(String),
    /// The store replicas share (the registry) failed, or holds an entry that does not
    /// open with this host's key.
    #[error("shared secret store ({store}), entry \"{key}\": {message}")]
    Shared {
        /// Where (the registry, never its password).
        store: String,
        /// The entry.
        key: String,
        /// What failed.
        message: String,
    },
    /// A setting names a secret-store entry that is not there.
    #[error(
        "{setting} names the secret-store entry \"{name}\", which is not there; add it with `airlock secrets set {name}`"
    )]
    Missing {
        /// The setting (e.g. `[results] secret_access_key`).
        setting: String,
        /// The entry's name.
        name: String,
    },
    /// Reading the entry a setting names failed.
    #[error("{setting}: {cause}")]
    Setting {
        /// The setting.
        setting: String,
        /// What failed.
        cause: Box<SecretError>,
    },
}

/// Which backend a store uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BackendKind {
    /// The OS credential store.
    Keyring,
    /// The 0600 file in the data directory.
    File,
}

enum Backend {
    Keyring { service: String },
    File { path: PathBuf, lock: Mutex<()> },
}

/// Held while a cross-process critical section runs (see [`SecretStore::exclusive`]);
/// the lock is released when it is dropped.
#[derive(Debug)]
pub struct ExclusiveGuard {
    _file: std::fs::File,
}

/// The file remembering which backend a data directory uses.
const BACKEND_FILE: &str = "backend";

/// A handle on the secret store. Cheap to clone.
#[derive(Clone)]
pub struct SecretStore {
    backend: Arc<Backend>,
    /// Where lock files live (`<data>/secrets`).
    locks: PathBuf,
    /// Where the entries replicas share live instead (see [`super::shared`]).
    shared: Option<Arc<dyn super::SharedSecrets>>,
}

impl std::fmt::Debug for SecretStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretStore")
            .field("backend", &self.kind())
            .finish()
    }
}

impl SecretStore {
    /// Opens the store for `data_dir`, choosing the backend from `AIRLOCK_SECRET_STORE`
    /// (default: keyring on macOS and Windows, file elsewhere).
    pub fn open(data_dir: &Path) -> Result<SecretStore, SecretError> {
        let dir = data_dir.join(SECRETS_DIR);
        let remembered = std::fs::read_to_string(dir.join(BACKEND_FILE)).ok();
        let choice = std::env::var("AIRLOCK_SECRET_STORE")
            .ok()
            .or_else(|| remembered.clone().map(|r| r.trim().to_string()));
        let kind = match choice.as_deref() {
            Some("keyring") => BackendKind::Keyring,
            Some("file") => BackendKind::File,
            Some(other) => return Err(SecretError::UnknownBackend(other.to_string())),
            None if cfg!(all(
                feature = "keyring",
                any(target_os = "macos", target_os = "windows")
            )) =>
            {
                BackendKind::Keyring
            }
            None => BackendKind::File,
        };
        let store = match kind {
            BackendKind::File => SecretStore::open_file(&dir)?,
            BackendKind::Keyring if choice.is_some() => SecretStore::open_keyring(data_dir),
            BackendKind::Keyring => {
                // The default: use the OS store when it answers (a headless session may
                // have none), else fall back to the file.
                let store = SecretStore::open_keyring(data_dir);
                match store.probe() {
                    Ok(()) => store,
                    Err(e) => {
                        tracing::info!(
                            "OS credential store unavailable ({e}); using the secrets file"
                        );
                        SecretStore::open_file(&dir)?
                    }
                }
            }
        };
        // The first choice sticks to the data directory, so a later session (a headless
        // one, say) does not look for secrets in another store.
        if remembered.is_none() {
            let name = match store.kind() {
                BackendKind::Keyring => "keyring",
                BackendKind::File => "file",
            };
            ensure_private_dir(&dir)?;
            std::fs::write(dir.join(BACKEND_FILE), name).map_err(|e| SecretError::File {
                path: dir.join(BACKEND_FILE),
                message: e.to_string(),
            })?;
        }
        Ok(store)
    }

    /// The file backend in `dir` (created 0700 if missing; the file is 0600).
    pub fn open_file(dir: &Path) -> Result<SecretStore, SecretError> {
        ensure_private_dir(dir)?;
        Ok(SecretStore {
            backend: Arc::new(Backend::File {
                path: dir.join(SECRETS_FILE),
                lock: Mutex::new(()),
            }),
            locks: dir.to_path_buf(),
            shared: None,
        })
    }

    /// Takes the cross-process lock named `name` (blocking until it is free): for
    /// read-modify-write sequences that two Airlock processes on the same data directory
    /// could otherwise interleave (the secrets file, an OAuth refresh).
    pub fn exclusive(&self, name: &str) -> Result<ExclusiveGuard, SecretError> {
        let safe: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let path = self.locks.join(format!(".{safe}.lock"));
        let err = |message: String| SecretError::File {
            path: path.clone(),
            message,
        };
        ensure_private_dir(&self.locks)?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| err(e.to_string()))?;
        file.lock().map_err(|e| err(e.to_string()))?;
        Ok(ExclusiveGuard { _file: file })
    }

    /// The OS credential store, with entries scoped to `data_dir` (so two data
    /// directories never share secrets).
    pub fn open_keyring(data_dir: &Path) -> SecretStore {
        let scope = crate::digest::sha256(data_dir.to_string_lossy().as_bytes());
        SecretStore {
            backend: Arc::new(Backend::Keyring {
                service: format!("airlock:{}", &scope[7..19]),
            }),
            locks: data_dir.join(SECRETS_DIR),
            shared: None,
        }
    }

    /// Writes, reads back and deletes a probe entry.
    fn probe(&self) -> Result<(), SecretError> {
        const PROBE: &str = "airlock-probe";
        self.put(PROBE, "probe")?;
        let read = self.get(PROBE)?;
        self.delete(PROBE)?;
        match read.as_deref() {
            Some("probe") => Ok(()),
            _ => Err(SecretError::Keyring {
                key: PROBE.into(),
                message: "the value read back differs from the one written".into(),
            }),
        }
    }

    /// Which backend this store uses.
    pub fn kind(&self) -> BackendKind {
        match &*self.backend {
            Backend::Keyring { .. } => BackendKind::Keyring,
            Backend::File { .. } => BackendKind::File,
        }
    }

    /// This store, keeping the entries replicas share ([`super::is_shared_key`]) in
    /// `shared` instead of this host's backend.
    pub fn with_shared(mut self, shared: Arc<dyn super::SharedSecrets>) -> SecretStore {
        self.shared = Some(shared);
        self
    }

    /// Deletes `key` and returns its value, if this call deleted it: in a shared store,
    /// exactly one of several hosts taking it at once gets it.
    pub fn take(&self, key: &str) -> Result<Option<String>, SecretError> {
        if let Some(shared) = self.shared_for(key) {
            return shared.take(key);
        }
        let value = self.get(key)?;
        Ok(match value {
            Some(value) if self.delete(key)? => Some(value),
            _ => None,
        })
    }

    /// Deletes the shared entries whose key starts with `prefix` and that were last
    /// written more than `age` ago (abandoned sign-ins); 0 without a shared store.
    pub fn sweep_shared(
        &self,
        prefix: &str,
        age: std::time::Duration,
    ) -> Result<usize, SecretError> {
        match &self.shared {
            Some(shared) if super::is_shared_key(prefix) => shared.sweep(prefix, age),
            _ => Ok(0),
        }
    }

    /// Whether `key` lives in the store replicas share.
    pub fn shares(&self, key: &str) -> bool {
        self.shared.is_some() && super::is_shared_key(key)
    }

    /// The shared store, when `key` lives there.
    fn shared_for(&self, key: &str) -> Option<&Arc<dyn super::SharedSecrets>> {
        self.shared.as_ref().filter(|_| super::is_shared_key(key))
    }

    /// The value stored under `key`, if any.
    pub fn get(&self, key: &str) -> Result<Option<String>, SecretError> {
        if let Some(shared) = self.shared_for(key) {
            return shared.get(key);
        }
        match &*self.backend {
            Backend::Keyring { service } => os_store::get(service, key),
            Backend::File { path, lock } => {
                let _guard = lock.lock().expect("secret store lock poisoned");
                Ok(read_file(path)?.remove(key))
            }
        }
    }

    /// Stores `value` under `key`, replacing any earlier value. (Callers validate values
    /// a user typed with [`super::validate_secret`]; tokens may be longer.)
    pub fn put(&self, key: &str, value: &str) -> Result<(), SecretError> {
        if let Some(shared) = self.shared_for(key) {
            return shared.put(key, value);
        }
        match &*self.backend {
            Backend::Keyring { service } => os_store::set(service, key, value),
            Backend::File { path, lock } => {
                let _guard = lock.lock().expect("secret store lock poisoned");
                let _file = self.exclusive("secrets-file")?;
                let mut all = read_file(path)?;
                all.insert(key.to_string(), value.to_string());
                write_file(path, &all)
            }
        }
    }

    /// Deletes `key`. Returns whether it existed.
    pub fn delete(&self, key: &str) -> Result<bool, SecretError> {
        if let Some(shared) = self.shared_for(key) {
            return shared.delete(key);
        }
        match &*self.backend {
            Backend::Keyring { service } => os_store::delete(service, key),
            Backend::File { path, lock } => {
                let _guard = lock.lock().expect("secret store lock poisoned");
                let _file = self.exclusive("secrets-file")?;
                let mut all = read_file(path)?;
                let existed = all.remove(key).is_some();
                if existed {
                    write_file(path, &all)?;
                }
                Ok(existed)
            }
        }
    }
}

/// Creates `dir` if needed and makes it private (0700).
fn ensure_private_dir(dir: &Path) -> Result<(), SecretError> {
    let err = |message: String| SecretError::File {
        path: dir.to_path_buf(),
        message,
    };
    std::fs::create_dir_all(dir).map_err(|e| err(e.to_string()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| err(e.to_string()))?;
    }
    Ok(())
}

fn keyring_err(key: &str, message: String) -> SecretError {
    SecretError::Keyring {
        key: key.to_string(),
        message,
    }
}

/// The OS credential store through the `keyring` crate (feature `keyring`). Failures
/// name the entry (`key`), never the value.
#[cfg(feature = "keyring")]
mod os_store {
    use super::{SecretError, keyring_err};

    fn entry(service: &str, key: &str) -> Result<keyring::Entry, SecretError> {
        keyring::Entry::new(service, key).map_err(|e| keyring_err(key, e.to_string()))
    }

    pub fn get(service: &str, key: &str) -> Result<Option<String>, SecretError> {
        match entry(service, key)?.get_password() {
            Ok(v) => Ok(Some(v)),
            Err(keyring::Error::NoEntry) => Ok(None),
            Err(e) => Err(keyring_err(key, e.to_string())),
        }
    }

    pub fn set(service: &str, key: &str, value: &str) -> Result<(), SecretError> {
        entry(service, key)?
            .set_password(value)
            .map_err(|e| keyring_err(key, e.to_string()))
    }

    pub fn delete(service: &str, key: &str) -> Result<bool, SecretError> {
        match entry(service, key)?.delete_credential() {
            Ok(()) => Ok(true),
            Err(keyring::Error::NoEntry) => Ok(false),
            Err(e) => Err(keyring_err(key, e.to_string())),
        }
    }
}

/// Built without the `keyring` feature: there is no OS credential store.
#[cfg(not(feature = "keyring"))]
mod os_store {
    use super::{SecretError, keyring_err};

    const MISSING: &str = "this build of Airlock has no OS credential store (feature `keyring`)";

    pub fn get(_service: &str, key: &str) -> Result<Option<String>, SecretError> {
        Err(keyring_err(key, MISSING.into()))
    }

    pub fn set(_service: &str, key: &str, _value: &str) -> Result<(), SecretError> {
        Err(keyring_err(key, MISSING.into()))
    }

    pub fn delete(_service: &str, key: &str) -> Result<bool, SecretError> {
        Err(keyring_err(key, MISSING.into()))
    }
}

fn read_file(path: &Path) -> Result<BTreeMap<String, String>, SecretError> {
    let err = |message: String| SecretError::File {
        path: path.to_path_buf(),
        message,
    };
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
            err(format!(
                "not a valid secrets file ({e}); it was left as it is"
            ))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
        Err(e) => Err(err(e.to_string())),
    }
}

fn write_file(path: &Path, all: &BTreeMap<String, String>) -> Result<(), SecretError> {
    use std::io::Write;
    let err = |message: String| SecretError::File {
        path: path.to_path_buf(),
        message,
    };
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let bytes = serde_json::to_vec(all).expect("a string map serializes");
    let written = options.open(&tmp).and_then(|mut f| {
        f.write_all(&bytes)?;
        f.sync_all()
    });
    if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, path)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(err(e.to_string()));
    }
    Ok(())
}

/// A new reference for a secret value (what the registry stores instead of it).
pub fn new_reference() -> String {
    format!("secret:{}", uuid::Uuid::new_v4())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_backend_round_trip_with_private_permissions() {
        let dir = tempfile::tempdir().unwrap();
        let store = SecretStore::open_file(&dir.path().join("secrets")).unwrap();
        assert_eq!(store.get("a").unwrap(), None);
        store.put("a", " spaced value ").unwrap();
        store.put("b", "two").unwrap();
        assert_eq!(store.get("a").unwrap().as_deref(), Some(" spaced value "));
        assert!(store.delete("b").unwrap());
        assert!(!store.delete("b").unwrap());
        let reopened = SecretStore::open_file(&dir.path().join("secrets")).unwrap();
        assert_eq!(
            reopened.get("a").unwrap().as_deref(),
            Some(" spaced value ")
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&dir.path().join("secrets")), 0o700);
            assert_eq!(mode(&dir.path().join("secrets").join(SECRETS_FILE)), 0o600);
        }
    }

    #[test]
    fn a_corrupt_file_is_an_error_and_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let store = SecretStore::open_file(dir.path()).unwrap();
        std::fs::write(dir.path().join(SECRETS_FILE), "{not json").unwrap();
        let e = store.put("a", "b").unwrap_err().to_string();
        assert!(e.contains("not a valid secrets file"), "{e}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join(SECRETS_FILE)).unwrap(),
            "{not json"
        );
    }
}
