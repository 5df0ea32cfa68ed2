//! Turning a registry row into the server Airlock runs: the definition resolved as a
//! config entry would be, then secret values filled in from the store (or values about
//! to be stored). A `${VAR}` that no longer resolves marks only that server for repair.

use std::collections::{BTreeMap, BTreeSet};

use super::{Servers, ServersError};
use crate::config::{ServerConfig, ServerEntry, Source, Transport};
use crate::registry::{RegistryError, ServiceRecord, StoredValue};

impl Servers {
    /// A record as Airlock runs it. A `${VAR}` that no longer resolves (the variable was
    /// set when the server was added or imported) does not stop everything else: that
    /// server alone is marked for repair, naming the variable.
    pub(super) fn loadable(
        &self,
        record: &ServiceRecord,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ServerConfig, ServersError> {
        match self.to_config(record, &BTreeMap::new(), env) {
            Ok(server) => Ok(server),
            Err(ServersError::Config(first)) => {
                let lenient = |name: &str| env(name).or(Some(String::new()));
                let mut server = self
                    .to_config(record, &BTreeMap::new(), &lenient)
                    .map_err(|_| ServersError::Config(first.clone()))?;
                server.repair.push(first.to_string());
                Ok(server)
            }
            Err(other) => Err(other),
        }
    }

    /// The launch digest of a record as it loads now (`None` when it does not load).
    pub(super) fn digest_of(
        &self,
        record: &ServiceRecord,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Option<String> {
        self.loadable(record, env).ok().map(|s| s.launch_digest())
    }

    /// Turns a record into the server definition Airlock runs, validating it like a
    /// config entry. Secret values come from `pending` (values about to be stored) or the
    /// store; a missing one becomes a repair reason.
    pub(super) fn to_config(
        &self,
        record: &ServiceRecord,
        pending: &BTreeMap<String, String>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ServerConfig, ServersError> {
        let name = &record.key.name;
        // Secret values are filled in after resolution: they are never `${VAR}`-expanded.
        let mut secret_env = BTreeSet::new();
        let mut secret_refs: Vec<(String, String)> = Vec::new();
        let transport = record
            .transport
            .clone()
            .map_values(|key, value| match value {
                StoredValue::Plain(plain) => plain,
                StoredValue::Secret(reference) => {
                    secret_env.insert(key.to_string());
                    secret_refs.push((key.to_string(), reference));
                    String::new()
                }
            });
        // Auth secret fields: a `${VAR}` reference goes in now (it is expanded like any
        // value); a stored secret is filled in after resolution.
        let mut auth_refs: Vec<(&'static str, String)> = Vec::new();
        let mut transport = transport;
        if let Transport::Http { auth, .. } = &mut transport {
            let stored = &record.auth_secrets;
            *auth = std::mem::take(auth).try_map_secrets(|field, kept| {
                Ok::<_, ServersError>(match stored.get(field) {
                    Some(StoredValue::Plain(plain)) => plain.clone(),
                    Some(StoredValue::Secret(reference)) => {
                        auth_refs.push((field, reference.clone()));
                        kept
                    }
                    None => {
                        return Err(ServersError::Registry(RegistryError::Corrupt(format!(
                            "service \"{name}\": auth.{field} has no stored value"
                        ))));
                    }
                })
            })?;
        }
        let entry = ServerEntry {
            transport,
            cwd: record.cwd.clone(),
            enabled: record.enabled,
            startup_timeout_secs: record.startup_timeout_secs,
            tool_timeout_secs: record.tool_timeout_secs,
            cancel_grace_secs: None,
            label: record.label.clone(),
            description: record.description.clone(),
            secret_env,
            adapters: record.adapters.clone(),
            adapter_config: record.adapter_config.clone(),
        };
        let mut server = entry.resolve(name, &Source::Registry(record.key.scope), env)?;
        server.repair = record.repair.clone();
        for (var, reference) in secret_refs {
            let value = match pending.get(&reference) {
                Some(v) => Some(v.clone()),
                None => self.store.get(&reference)?,
            };
            match value {
                Some(value) => {
                    server.transport.values_mut().insert(var, value);
                }
                None => server.repair.push(format!(
                    "the secret value of \"{var}\" is missing from the secret store; set it again with `airlock servers edit {name} --env {var}=VALUE` (or --header)"
                )),
            }
        }
        for (field, reference) in auth_refs {
            let value = match pending.get(&reference) {
                Some(v) => Some(v.clone()),
                None => self.store.get(&reference)?,
            };
            let Transport::Http { auth, .. } = &mut server.transport else {
                unreachable!("auth secrets belong to http servers");
            };
            match value {
                Some(value) => {
                    let filled = std::mem::take(auth).try_map_secrets(|f, v| {
                        Ok::<_, std::convert::Infallible>(if f == field { value.clone() } else { v })
                    });
                    *auth = match filled {
                        Ok(filled) => filled,
                        Err(never) => match never {},
                    };
                }
                None => server.repair.push(format!(
                    "the secret value of \"auth.{field}\" is missing from the secret store; set it again with `airlock servers edit {name} {}`",
                    if field == "private_key" { "--private-key-file PATH" } else { "--client-secret-env VAR" }
                )),
            }
        }
        Ok(server)
    }
}
