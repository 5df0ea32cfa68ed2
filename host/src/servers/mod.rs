//! The operator's side: services managed with `airlock servers` (and `airlock import`),
//! kept in the registry with secret values in the secret store, merged with the config
//! files into the configuration Airlock runs.
//!
//! Every change is validated in full — the definition as Airlock would load it, every
//! secret value — before anything is written, so a bad change leaves the registry and the
//! store as they were.
//!
//! Layer 6 (operator). May import: `config`, `registry`, `secrets`, `oauth`.

mod auth;
mod draft;
mod records;
mod resolve;
#[cfg(feature = "http")]
mod sign_in;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

pub use crate::registry::{ImportPreview, ServiceRecord, StoredCatalog, StoredValue};
pub use auth::AuthChanges;
pub use draft::{
    Draft, DraftTransport, Edit, GivenValue, Listing, parse_env_arg, parse_header_arg,
};
pub use records::{PREVIEW_TTL_SECS, TestedCatalog};

use crate::config::{Config, ConfigError, ConfigSources, ExtraServers, Scope, Transport};
use crate::registry::{Registry, RegistryError, ServiceKey};
use crate::secrets::{InvalidSecret, SecretError, SecretStore, validate_secret};

/// A failure of an `airlock servers` operation. Nothing was changed when one is returned.
#[derive(Debug, thiserror::Error)]
pub enum ServersError {
    /// The registry failed (or the name is taken: [`RegistryError::Exists`]).
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// The secret store failed.
    #[error(transparent)]
    Secrets(#[from] SecretError),
    /// The definition would not load.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A secret value cannot be stored.
    #[error(transparent)]
    Secret(#[from] InvalidSecret),
    /// The request itself is wrong (the message names the item).
    #[error("{0}")]
    Invalid(String),
}

pub(crate) fn invalid(message: impl Into<String>) -> ServersError {
    ServersError::Invalid(message.into())
}

/// Checks a service name: 1 to 64 of `A-Z a-z 0-9 _ -`.
pub fn validate_name(name: &str) -> Result<(), ServersError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if ok {
        Ok(())
    } else {
        Err(invalid(format!(
            "invalid server name {name:?}: use 1 to 64 letters, digits, '_' or '-'"
        )))
    }
}

/// The registry-backed service manager for one project folder.
pub struct Servers {
    registry: std::sync::Arc<Registry>,
    store: SecretStore,
    project: String,
}

impl Servers {
    /// Opens the registry and secret store of `data_dir`, for commands run in `project`
    /// (an absolute folder; project-scope services belong to it).
    pub fn open(data_dir: &Path, project: &Path) -> Result<Servers, ServersError> {
        Self::open_at(data_dir, project, &crate::config::RegistryLocation::Local)
    }

    /// [`Servers::open`] with the registry `location` names (PostgreSQL, when the config
    /// says so).
    pub fn open_at(
        data_dir: &Path,
        project: &Path,
        location: &crate::config::RegistryLocation,
    ) -> Result<Servers, ServersError> {
        std::fs::create_dir_all(data_dir)
            .map_err(|e| invalid(format!("data directory \"{}\": {e}", data_dir.display())))?;
        let registry = std::sync::Arc::new(Registry::open_at(data_dir, location)?);
        Ok(Servers {
            store: crate::registry::vault::sharing(
                SecretStore::open(data_dir)?,
                location,
                &registry,
            ),
            registry,
            project: project.display().to_string(),
        })
    }

    /// The registry.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The secret store.
    pub fn store(&self) -> &SecretStore {
        &self.store
    }

    pub(super) fn key(&self, scope: Scope, name: &str) -> ServiceKey {
        ServiceKey {
            scope,
            project: match scope {
                Scope::User => String::new(),
                Scope::Project => self.project.clone(),
            },
            name: name.to_string(),
        }
    }

    /// The full configuration: config files merged with the registry's services.
    pub fn load_config(
        &self,
        sources: &ConfigSources,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ServersError> {
        let mut extra = ExtraServers::default();
        for record in self.registry.services(&self.project)? {
            let server = self.loadable(&record, env)?;
            match record.key.scope {
                Scope::User => extra.user.push(server),
                Scope::Project => extra.project.push(server),
            }
        }
        Ok(Config::load_with(sources, extra, env)?)
    }

    /// Adds a service. Refuses a name already used in the same scope; validates the
    /// definition and every secret before writing anything.
    pub fn add(
        &self,
        draft: Draft,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ServiceRecord, ServersError> {
        validate_name(&draft.name)?;
        let key = self.key(draft.scope, &draft.name);
        if self.registry.service(&key)?.is_some() {
            return Err(RegistryError::Exists {
                name: draft.name,
                scope: draft.scope,
            }
            .into());
        }
        let mut pending = BTreeMap::new();
        let mut store_values = |kind: &str, k: &str, given: GivenValue| {
            if given.secret {
                validate_secret(
                    &format!("{kind} {k} of server \"{}\"", draft.name),
                    &given.value,
                )?;
                let reference = crate::secrets::new_reference();
                pending.insert(reference.clone(), given.value);
                Ok::<_, ServersError>(StoredValue::Secret(reference))
            } else {
                Ok(StoredValue::Plain(given.value))
            }
        };
        let kind = if draft.transport.is_stdio() {
            "env"
        } else {
            "header"
        };
        let mut transport = draft
            .transport
            .try_map_values(|k, given| store_values(kind, k, given))?;
        let mut auth_secrets = BTreeMap::new();
        if let Transport::Http { auth, .. } = &mut transport {
            let stashed = auth::stash_auth_secrets(
                &draft.name,
                std::mem::take(auth),
                &BTreeMap::new(),
                &mut pending,
            )?;
            *auth = stashed.auth;
            auth_secrets = stashed.secrets;
        }
        let record = ServiceRecord {
            key,
            label: draft.label.filter(|l| !l.is_empty()),
            description: draft.description.filter(|d| !d.is_empty()),
            transport,
            cwd: draft.cwd,
            enabled: draft.enabled,
            startup_timeout_secs: draft.startup_timeout_secs,
            tool_timeout_secs: draft.tool_timeout_secs,
            auth_secrets,
            adapters: None,
            adapter_config: None,
            repair: draft.repair,
            origin: Some(draft.origin),
        };
        self.to_config(&record, &pending, env)?;
        self.commit(&pending, || self.registry.insert_service(&record))?;
        Ok(record)
    }

    /// Stores `pending` secrets, then runs `write`; when `write` fails the secrets just
    /// stored are deleted again, so nothing is left behind.
    fn commit(
        &self,
        pending: &BTreeMap<String, String>,
        write: impl FnOnce() -> Result<(), RegistryError>,
    ) -> Result<(), ServersError> {
        let mut stored: Vec<String> = Vec::new();
        for (reference, value) in pending {
            if let Err(e) = self.store.put(reference, value) {
                for r in &stored {
                    let _ = self.store.delete(r);
                }
                return Err(e.into());
            }
            stored.push(reference.clone());
        }
        if let Err(e) = write() {
            for r in &stored {
                let _ = self.store.delete(r);
            }
            return Err(e.into());
        }
        Ok(())
    }

    /// Finds the registry service `name`. With no scope given, a name present in both
    /// scopes is an error (the caller must choose), and a name defined only in a config
    /// file is an error naming the file.
    pub fn locate(
        &self,
        name: &str,
        scope: Option<Scope>,
        sources: &ConfigSources,
    ) -> Result<ServiceRecord, ServersError> {
        let scopes: Vec<Scope> = match scope {
            Some(s) => vec![s],
            None => vec![Scope::User, Scope::Project],
        };
        let mut found = Vec::new();
        for s in scopes {
            if let Some(record) = self.registry.service(&self.key(s, name))? {
                found.push(record);
            }
        }
        match found.len() {
            1 => Ok(found.pop().expect("one")),
            0 => {
                let in_file = Config::load(sources, &|_| Some(String::new()))
                    .ok()
                    .and_then(|c| c.servers.get(name).map(|s| s.source.clone()));
                Err(invalid(match (in_file, scope) {
                    (Some(file), _) => format!(
                        "server \"{name}\" is defined in \"{file}\", not by `airlock servers`; change it in that file"
                    ),
                    (None, Some(s)) => format!("no server named \"{name}\" in the {s} scope"),
                    (None, None) => format!("no server named \"{name}\""),
                }))
            }
            _ => Err(invalid(format!(
                "server \"{name}\" exists in both the user and the project scope; say which with --scope user or --scope project"
            ))),
        }
    }

    /// Removes a service, then its tested catalog, its OAuth tokens and its secrets.
    /// The row goes first (it is what Airlock loads); what follows is cleanup, and a
    /// failure there is logged rather than undoing the removal.
    pub fn remove(
        &self,
        record: &ServiceRecord,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(), ServersError> {
        let digest = self.digest_of(record, env);
        self.registry.delete_service(&record.key)?;
        let name = &record.key.name;
        if let Some(digest) = digest
            && let Err(e) = self.registry.delete_catalog(name, &digest)
        {
            tracing::warn!(service = %name, "cannot delete the tested catalog: {e}");
        }
        // OAuth tokens exist only in builds that speak HTTP.
        #[cfg(feature = "http")]
        {
            let still_named = self
                .registry
                .services(&self.project)
                .map(|all| all.iter().any(|r| &r.key.name == name))
                .unwrap_or(true);
            if !still_named && let Err(e) = crate::oauth::logout(&self.store, name) {
                tracing::warn!(service = %name, "cannot delete the OAuth tokens: {e}");
            }
        }
        self.forget_secrets(name, record.secret_refs());
        Ok(())
    }

    fn forget_secrets(&self, name: &str, references: Vec<String>) {
        for reference in references {
            if let Err(e) = self.store.delete(&reference) {
                tracing::warn!(service = %name, "cannot delete a secret no longer used: {e}");
            }
        }
    }

    /// Enables or disables a service. Disabling makes its tested catalog stale: agents
    /// lose its tools until it is tested again. (The catalog goes first: if the row
    /// update then fails, the service is still enabled and merely needs a new test.)
    pub fn set_enabled(
        &self,
        record: &ServiceRecord,
        enabled: bool,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(), ServersError> {
        if !enabled && let Some(digest) = self.digest_of(record, env) {
            self.registry.delete_catalog(&record.key.name, &digest)?;
        }
        let mut changed = record.clone();
        changed.enabled = enabled;
        self.registry.update_service(&changed)?;
        Ok(())
    }

    /// Applies `edit` to `record`. Returns the new record and whether its launch
    /// changed (which makes a tested catalog stale).
    pub fn edit(
        &self,
        record: &ServiceRecord,
        edit: Edit,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(ServiceRecord, bool), ServersError> {
        let name = record.key.name.clone();
        let before = self.digest_of(record, env);
        let mut next = record.clone();
        let mut pending = BTreeMap::new();
        let mut dropped_refs = Vec::new();
        let text = |v: String| if v.is_empty() { None } else { Some(v) };
        if let Some(label) = edit.label {
            next.label = text(label);
        }
        if let Some(description) = edit.description {
            next.description = text(description);
        }
        if let Some(cwd) = edit.cwd {
            next.cwd = text(cwd);
        }
        if edit.tool_timeout_secs.is_some() {
            next.tool_timeout_secs = edit.tool_timeout_secs;
        }
        if edit.startup_timeout_secs.is_some() {
            next.startup_timeout_secs = edit.startup_timeout_secs;
        }
        if edit.clear_repair {
            next.repair.clear();
        }
        let (map, given, kind) = match &mut next.transport {
            Transport::Stdio { command, args, env } => {
                if edit.url.is_some() || !edit.auth.is_empty() {
                    return Err(invalid(format!(
                        "server \"{name}\" is a stdio server; --url and the auth flags apply to http servers"
                    )));
                }
                if !edit.headers.is_empty() {
                    return Err(invalid(format!(
                        "server \"{name}\" is a stdio server; --header applies to http servers"
                    )));
                }
                if let Some(mut line) = edit.command {
                    if line.is_empty() {
                        return Err(invalid("the new command is empty"));
                    }
                    *command = line.remove(0);
                    *args = line;
                }
                (env, edit.env, "env")
            }
            Transport::Http { url, headers, auth } => {
                if edit.command.is_some() || !edit.env.is_empty() {
                    return Err(invalid(format!(
                        "server \"{name}\" is an http server; a command and --env apply to stdio servers"
                    )));
                }
                if let Some(u) = edit.url {
                    *url = u;
                }
                if !edit.auth.is_empty() {
                    let changed = edit.auth.apply(auth)?;
                    let stashed =
                        auth::stash_auth_secrets(&name, changed, &next.auth_secrets, &mut pending)?;
                    *auth = stashed.auth;
                    next.auth_secrets = stashed.secrets;
                    dropped_refs.extend(stashed.dropped);
                }
                (headers, edit.headers, "header")
            }
        };
        for key in &edit.unset {
            match map.remove(key) {
                Some(StoredValue::Secret(r)) => dropped_refs.push(r),
                Some(StoredValue::Plain(_)) => {}
                None => {
                    return Err(invalid(format!(
                        "server \"{name}\" has no {kind} \"{key}\" to remove"
                    )));
                }
            }
        }
        for (key, value) in given {
            let existing = map.get(&key).cloned();
            match existing {
                Some(StoredValue::Secret(reference)) => {
                    // A blank value keeps the stored secret. A new value goes under a
                    // new reference, so the old one survives until the row is updated.
                    if !value.value.is_empty() {
                        validate_secret(
                            &format!("{kind} {key} of server \"{name}\""),
                            &value.value,
                        )?;
                        let fresh = crate::secrets::new_reference();
                        pending.insert(fresh.clone(), value.value);
                        map.insert(key, StoredValue::Secret(fresh));
                        dropped_refs.push(reference);
                    }
                }
                _ if value.secret => {
                    validate_secret(&format!("{kind} {key} of server \"{name}\""), &value.value)?;
                    let reference = crate::secrets::new_reference();
                    pending.insert(reference.clone(), value.value);
                    map.insert(key, StoredValue::Secret(reference));
                }
                _ => {
                    map.insert(key, StoredValue::Plain(value.value));
                }
            }
        }
        let after = self.to_config(&next, &pending, env)?.launch_digest();
        self.commit(&pending, || self.registry.update_service(&next))?;
        self.forget_secrets(&name, dropped_refs);
        Ok((next, before.as_deref() != Some(after.as_str())))
    }

    /// `airlock servers list`: every effective server with its source, catalog state and
    /// what it overrides.
    pub fn list(&self, config: &Config) -> Result<Vec<Listing>, ServersError> {
        let mut out = Vec::new();
        for (name, server) in &config.servers {
            let source = server.source.to_string();
            let stored = self.registry.catalog(name, &server.launch_digest())?;
            let (catalog, tools) = match stored {
                Some(c) if server.enabled => ("tested", Some(c.tools.len())),
                _ if self.registry.has_catalog(name)? => ("stale", None),
                _ => ("untested", None),
            };
            // The same file can be read twice (as the project file and by --config).
            let overrides = config
                .definitions
                .get(name)
                .map(|all| {
                    all.iter()
                        .map(|s| s.to_string())
                        .filter(|s| *s != source)
                        .collect::<BTreeSet<_>>()
                })
                .unwrap_or_default()
                .into_iter()
                .collect();
            out.push(Listing {
                name: name.clone(),
                source,
                transport: server.transport.kind(),
                enabled: server.enabled,
                catalog,
                tools,
                repair: server.repair.clone(),
                overrides,
            });
        }
        Ok(out)
    }
}
