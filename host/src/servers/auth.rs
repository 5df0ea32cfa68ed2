//! The auth settings of registry services: changes asked for with `airlock servers
//! add/edit` flags ([`AuthChanges`]), and moving the secret fields (`client_secret`,
//! `private_key`) into the secret store so the registry keeps only references.

use std::collections::BTreeMap;
use std::fmt;

use super::{ServersError, invalid};
use crate::config::{Auth, AuthKind, ClientCredentials, ClientKey, OAuthClient};
use crate::registry::{STORED_SECRET, StoredValue};
use crate::secrets::validate_secret;

/// Auth settings given as flags. In an edit, what is not given is kept when the kind
/// stays the same; a new kind starts from nothing. An empty string clears an optional
/// field. `Debug` never shows the secret values.
#[derive(Clone, Default)]
pub struct AuthChanges {
    /// `--auth`: the kind.
    pub kind: Option<AuthKind>,
    /// `--client-id`.
    pub client_id: Option<String>,
    /// The client secret (`--client-secret-env VAR` reads it from the environment).
    pub client_secret: Option<String>,
    /// A PEM private key (`--private-key-file PATH` reads it).
    pub private_key: Option<String>,
    /// `--client-metadata-url`: a client ID metadata document.
    pub client_metadata_url: Option<String>,
    /// `--auth-scope`, repeatable: the scopes to ask for.
    pub scopes: Option<Vec<String>>,
}

impl fmt::Debug for AuthChanges {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let given = |v: &Option<String>| v.as_ref().map(|_| crate::secrets::MASK);
        f.debug_struct("AuthChanges")
            .field("kind", &self.kind)
            .field("client_id", &self.client_id)
            .field("client_secret", &given(&self.client_secret))
            .field("private_key", &given(&self.private_key))
            .field("client_metadata_url", &self.client_metadata_url)
            .field("scopes", &self.scopes)
            .finish()
    }
}

impl AuthChanges {
    /// Whether no auth flag was given.
    pub fn is_empty(&self) -> bool {
        self.kind.is_none()
            && self.client_id.is_none()
            && self.client_secret.is_none()
            && self.private_key.is_none()
            && self.client_metadata_url.is_none()
            && self.scopes.is_none()
    }

    /// The auth that results from applying these changes to `current`. Flags that do not
    /// fit the resulting kind are refused, naming the flag.
    pub fn apply(self, current: &Auth) -> Result<Auth, ServersError> {
        let kind = self.kind.unwrap_or(current.kind());
        let same = kind == current.kind();
        let text = |v: String| (!v.is_empty()).then_some(v);
        let auth = match kind {
            AuthKind::None => {
                let stray = [
                    ("--client-id", self.client_id.is_some()),
                    ("--client-secret-env", self.client_secret.is_some()),
                    ("--private-key-file", self.private_key.is_some()),
                    ("--client-metadata-url", self.client_metadata_url.is_some()),
                    ("--auth-scope", self.scopes.is_some()),
                ]
                .into_iter()
                .find(|(_, given)| *given);
                if let Some((flag, _)) = stray {
                    return Err(invalid(format!(
                        "{flag} applies to --auth oauth or --auth client_credentials"
                    )));
                }
                Auth::None
            }
            AuthKind::OAuth => {
                if self.private_key.is_some() {
                    return Err(invalid(
                        "--private-key-file applies to --auth client_credentials",
                    ));
                }
                let mut client = match current {
                    Auth::OAuth(c) if same => c.clone(),
                    _ => OAuthClient::default(),
                };
                if let Some(id) = self.client_id {
                    client.client_id = text(id);
                }
                if let Some(secret) = self.client_secret {
                    client.client_secret = text(secret);
                }
                if let Some(url) = self.client_metadata_url {
                    client.client_metadata_url = text(url);
                }
                if let Some(scopes) = self.scopes {
                    client.scopes = scopes;
                }
                Auth::OAuth(client)
            }
            AuthKind::ClientCredentials => {
                if self.client_metadata_url.is_some() {
                    return Err(invalid("--client-metadata-url applies to --auth oauth"));
                }
                let kept = match current {
                    Auth::ClientCredentials(cc) if same => Some(cc.clone()),
                    _ => None,
                };
                let client_id = self
                    .client_id
                    .and_then(text)
                    .or_else(|| kept.as_ref().map(|cc| cc.client_id.clone()))
                    .ok_or_else(|| invalid("--auth client_credentials needs --client-id"))?;
                let key = match (self.client_secret, self.private_key) {
                    (Some(_), Some(_)) => {
                        return Err(invalid(
                            "give one of --client-secret-env and --private-key-file, not both",
                        ));
                    }
                    (Some(secret), None) => ClientKey::Secret(secret),
                    (None, Some(pem)) => ClientKey::PrivateKey(pem),
                    (None, None) => kept.as_ref().map(|cc| cc.key.clone()).ok_or_else(|| {
                        invalid(
                            "--auth client_credentials needs --client-secret-env VAR or --private-key-file PATH",
                        )
                    })?,
                };
                let scopes = self
                    .scopes
                    .or_else(|| kept.map(|cc| cc.scopes))
                    .unwrap_or_default();
                Auth::ClientCredentials(ClientCredentials {
                    client_id,
                    key,
                    scopes,
                })
            }
            AuthKind::TokenExchange => {
                return Err(invalid(
                    "--auth token_exchange is set in a config file: auth = { type = \"token_exchange\", token_endpoint, client_id, client_secret, audience }",
                ));
            }
            AuthKind::IdentityAssertion => {
                return Err(invalid(
                    "--auth identity_assertion is set in a config file: auth = { type = \"identity_assertion\", idp_token_endpoint, id_token, client_id, client_secret }",
                ));
            }
        };
        auth.validate().map_err(|e| invalid(e.message))?;
        Ok(auth)
    }
}

/// The auth of a service about to be written, split for the registry.
pub(super) struct StashedAuth {
    /// The auth with [`STORED_SECRET`] in each secret field.
    pub auth: Auth,
    /// Its secret fields, by name.
    pub secrets: BTreeMap<String, StoredValue>,
    /// Secret-store references the service no longer uses.
    pub dropped: Vec<String>,
}

/// Moves the secret fields out of `auth`. A field still holding [`STORED_SECRET`] keeps
/// its entry in `before`; a `${VAR}` reference is kept as written (expanded when the
/// service loads); any other value is checked and goes to `pending` under a new
/// secret-store reference.
pub(super) fn stash_auth_secrets(
    server: &str,
    auth: Auth,
    before: &BTreeMap<String, StoredValue>,
    pending: &mut BTreeMap<String, String>,
) -> Result<StashedAuth, ServersError> {
    let mut secrets = BTreeMap::new();
    let auth = auth.try_map_secrets(|field, value| {
        let stored = if value == STORED_SECRET {
            before.get(field).cloned().ok_or_else(|| {
                invalid(format!(
                    "server \"{server}\" has no stored auth.{field} to keep; give a new one"
                ))
            })?
        } else if value.contains("${") {
            StoredValue::Plain(value)
        } else {
            validate_secret(&format!("auth.{field} of server \"{server}\""), &value)?;
            let reference = crate::secrets::new_reference();
            pending.insert(reference.clone(), value);
            StoredValue::Secret(reference)
        };
        secrets.insert(field.to_string(), stored);
        Ok::<_, ServersError>(STORED_SECRET.to_string())
    })?;
    let dropped = before
        .values()
        .filter(|old| !secrets.values().any(|new| new == *old))
        .filter_map(|old| match old {
            StoredValue::Secret(reference) => Some(reference.clone()),
            StoredValue::Plain(_) => None,
        })
        .collect();
    Ok(StashedAuth {
        auth,
        secrets,
        dropped,
    })
}
