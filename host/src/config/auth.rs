//! [`Auth`]: how an HTTP server authenticates Airlock beyond its configured headers — the
//! authorization-code flow, client credentials, token exchange and identity assertions —
//! with the checks every form of it passes, and `Debug`/`Serialize` forms that never
//! show a secret.

use std::fmt;

use serde::Serialize;

use super::SettingError;
use crate::secrets::MASK;

/// How an HTTP server authenticates Airlock beyond its configured headers.
///
/// The config form is absent (headers only), the string `"oauth"`, or a table:
/// `{ type = "oauth", client_id, client_secret, client_metadata_url, scopes }` for the
/// authorization-code flow with a pre-registered or metadata-document client, or
/// `{ type = "client_credentials", client_id, client_secret | private_key, scopes }` for
/// a machine-to-machine grant, or `{ type = "token_exchange", token_endpoint, client_id,
/// client_secret, audience, scopes }` to exchange the calling agent's access token for
/// one for this server (RFC 8693), or `{ type = "identity_assertion", idp_token_endpoint,
/// id_token, idp_client_id, client_id, client_secret, scopes }` for enterprise-managed
/// authorization (SEP-990). `Debug` and `Serialize` never show a secret.
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub enum Auth {
    /// Headers only.
    #[default]
    None,
    /// OAuth 2.1 authorization code with PKCE (tokens in the secret store); the client
    /// is pre-registered, a client ID metadata document, or registered dynamically.
    OAuth(OAuthClient),
    /// OAuth 2.1 client credentials: tokens without a browser or a person.
    ClientCredentials(ClientCredentials),
    /// The calling agent's access token (presented to `airlock serve --http` under
    /// `[serve.auth]`) exchanged for a token for this server (RFC 8693).
    TokenExchange(TokenExchange),
    /// Enterprise-managed authorization (SEP-990, cross-app access): an ID token from the
    /// enterprise identity provider exchanged there for an identity assertion (ID-JAG),
    /// which the server's authorization server exchanges for an access token.
    IdentityAssertion(IdentityAssertion),
}

/// The kind of an [`Auth`], as the string form and `--auth` name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthKind {
    /// Headers only (`none`).
    None,
    /// The authorization-code flow (`oauth`).
    OAuth,
    /// Client credentials (`client_credentials`).
    ClientCredentials,
    /// Token exchange (`token_exchange`).
    TokenExchange,
    /// Identity assertion (`identity_assertion`).
    IdentityAssertion,
}

impl AuthKind {
    /// Parses `none`, `oauth` or `client_credentials`.
    pub fn parse(text: &str) -> Option<AuthKind> {
        match text {
            "none" => Some(AuthKind::None),
            "oauth" => Some(AuthKind::OAuth),
            "client_credentials" => Some(AuthKind::ClientCredentials),
            "token_exchange" => Some(AuthKind::TokenExchange),
            "identity_assertion" => Some(AuthKind::IdentityAssertion),
            _ => None,
        }
    }
}

/// Which client the authorization-code flow uses. All empty: dynamic registration.
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct OAuthClient {
    /// A client registered beforehand with the authorization server.
    pub client_id: Option<String>,
    /// Its secret (confidential clients only).
    pub client_secret: Option<String>,
    /// An `https://` URL of this client's metadata document (CIMD), used as the client
    /// id when the authorization server supports it.
    pub client_metadata_url: Option<String>,
    /// Scopes to ask for instead of those the server suggests.
    pub scopes: Vec<String>,
    /// Whether each agent authorizes the service itself and calls it with its own
    /// tokens (`per_agent = true`), rather than every agent sharing one authorization.
    pub per_agent: bool,
}

/// A machine-to-machine client.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ClientCredentials {
    /// The client's id.
    pub client_id: String,
    /// How it proves who it is.
    pub key: ClientKey,
    /// Scopes to ask for.
    pub scopes: Vec<String>,
}

/// How the calling agent's access token is exchanged for one for the server.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct TokenExchange {
    /// The identity provider's token endpoint.
    pub token_endpoint: String,
    /// The client Airlock exchanges as.
    pub client_id: String,
    /// Its secret.
    pub client_secret: String,
    /// The audience asked for (default: the server's URL).
    pub audience: Option<String>,
    /// Scopes to ask for.
    pub scopes: Vec<String>,
}

/// How an identity assertion is obtained and spent (SEP-990).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct IdentityAssertion {
    /// The enterprise identity provider's token endpoint.
    pub idp_token_endpoint: String,
    /// The user's ID token from that provider (a secret, e.g. `${VAR}`).
    pub id_token: String,
    /// Airlock's client id at the identity provider, if it wants one.
    pub idp_client_id: Option<String>,
    /// Airlock's client at the server's authorization server.
    pub client_id: String,
    /// Its secret.
    pub client_secret: String,
    /// Scopes to ask for.
    pub scopes: Vec<String>,
}

/// The proof a client-credentials client presents.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum ClientKey {
    /// A client secret (`client_secret_basic` or `client_secret_post`).
    Secret(String),
    /// A PEM private key (RSA or EC P-256) signing a short-lived, single-use JWT
    /// assertion (`private_key_jwt`).
    PrivateKey(String),
}

impl ClientKey {
    /// The config field holding it: `client_secret` or `private_key`.
    pub fn field(&self) -> &'static str {
        match self {
            ClientKey::Secret(_) => "client_secret",
            ClientKey::PrivateKey(_) => "private_key",
        }
    }

    /// The secret value.
    pub fn value(&self) -> &str {
        match self {
            ClientKey::Secret(v) | ClientKey::PrivateKey(v) => v,
        }
    }
}

impl Auth {
    /// Parses the string form: absent, or `"oauth"` (dynamic registration).
    pub fn parse(text: Option<&str>) -> Result<Auth, SettingError> {
        match text {
            None => Ok(Auth::None),
            Some("oauth") => Ok(Auth::OAuth(OAuthClient::default())),
            Some(other) => Err(format!(
                "\"auth\" must be \"oauth\" or a table with \"type\" = \"oauth\" | \"client_credentials\", got \"{other}\""
            ).into()),
        }
    }

    /// The kind, as the string form names it: `None`, `"oauth"` or `"client_credentials"`.
    pub fn as_config(&self) -> Option<&'static str> {
        match self {
            Auth::None => None,
            Auth::OAuth(_) => Some("oauth"),
            Auth::ClientCredentials(_) => Some("client_credentials"),
            Auth::TokenExchange(_) => Some("token_exchange"),
            Auth::IdentityAssertion(_) => Some("identity_assertion"),
        }
    }

    /// Whether the server is reached as each calling user rather than as Airlock (token
    /// exchange): no session is opened for it without a signed-in user's token, so its
    /// tools are listed through the first such user's own session.
    pub fn acts_as_caller(&self) -> bool {
        match self {
            Auth::TokenExchange(_) => true,
            Auth::OAuth(client) => client.per_agent,
            Auth::None | Auth::ClientCredentials(_) | Auth::IdentityAssertion(_) => false,
        }
    }

    /// Whether the authorization-code flow is on (tokens from `airlock servers auth`).
    pub fn is_oauth(&self) -> bool {
        matches!(self, Auth::OAuth(_))
    }

    /// The secret values the table holds, by config field name.
    pub fn secrets(&self) -> Vec<(String, String)> {
        let mut found = Vec::new();
        match self {
            Auth::None => {}
            Auth::OAuth(client) => {
                if let Some(s) = client.client_secret.as_ref().filter(|s| !s.is_empty()) {
                    found.push(("auth.client_secret".to_string(), s.clone()));
                }
            }
            Auth::ClientCredentials(cc) => {
                if !cc.key.value().is_empty() {
                    found.push((
                        format!("auth.{}", cc.key.field()),
                        cc.key.value().to_string(),
                    ));
                }
            }
            Auth::TokenExchange(te) => {
                if !te.client_secret.is_empty() {
                    found.push(("auth.client_secret".to_string(), te.client_secret.clone()));
                }
            }
            Auth::IdentityAssertion(ia) => {
                for (field, value) in [
                    ("id_token", &ia.id_token),
                    ("client_secret", &ia.client_secret),
                ] {
                    if !value.is_empty() {
                        found.push((format!("auth.{field}"), value.clone()));
                    }
                }
            }
        }
        found
    }

    /// Which kind of auth this is.
    pub fn kind(&self) -> AuthKind {
        match self {
            Auth::None => AuthKind::None,
            Auth::OAuth(_) => AuthKind::OAuth,
            Auth::ClientCredentials(_) => AuthKind::ClientCredentials,
            Auth::TokenExchange(_) => AuthKind::TokenExchange,
            Auth::IdentityAssertion(_) => AuthKind::IdentityAssertion,
        }
    }

    /// The same auth with each secret field (`client_secret`, `private_key`; given by
    /// bare field name) passed through `f`. Other fields are kept as they are.
    pub fn try_map_secrets<E>(
        self,
        mut f: impl FnMut(&'static str, String) -> Result<String, E>,
    ) -> Result<Auth, E> {
        Ok(match self {
            Auth::None => Auth::None,
            Auth::OAuth(mut c) => {
                c.client_secret = c.client_secret.map(|v| f("client_secret", v)).transpose()?;
                Auth::OAuth(c)
            }
            Auth::ClientCredentials(mut cc) => {
                cc.key = match cc.key {
                    ClientKey::Secret(v) => ClientKey::Secret(f("client_secret", v)?),
                    ClientKey::PrivateKey(v) => ClientKey::PrivateKey(f("private_key", v)?),
                };
                Auth::ClientCredentials(cc)
            }
            Auth::TokenExchange(mut te) => {
                te.client_secret = f("client_secret", te.client_secret)?;
                Auth::TokenExchange(te)
            }
            Auth::IdentityAssertion(mut ia) => {
                ia.id_token = f("id_token", ia.id_token)?;
                ia.client_secret = f("client_secret", ia.client_secret)?;
                Auth::IdentityAssertion(ia)
            }
        })
    }

    /// Checks the rules a table must follow wherever it comes from (a config file, the
    /// CLI, an import): a client secret needs a client id, a metadata document URL is
    /// `https://` (or a `${VAR}` still to be expanded), a client-credentials client has
    /// an id and a key. The message names the config field.
    pub fn validate(&self) -> Result<(), SettingError> {
        match self {
            Auth::None => Ok(()),
            Auth::OAuth(client) => {
                if client.client_secret.is_some() && client.client_id.is_none() {
                    return Err("\"auth.client_secret\" needs \"auth.client_id\"".into());
                }
                if let Some(url) = &client.client_metadata_url
                    && !url.starts_with("https://")
                    && !url.starts_with("${")
                {
                    return Err(format!(
                        "\"auth.client_metadata_url\" must be an https:// URL (the client ID metadata document), got {url:?}"
                    ).into());
                }
                Ok(())
            }
            Auth::ClientCredentials(cc) => {
                if cc.client_id.is_empty() {
                    return Err("\"auth.client_id\" is required for client credentials".into());
                }
                if cc.key.value().is_empty() {
                    return Err(format!("\"auth.{}\" is empty", cc.key.field()).into());
                }
                Ok(())
            }
            Auth::TokenExchange(te) => {
                for (field, value) in [
                    ("token_endpoint", &te.token_endpoint),
                    ("client_id", &te.client_id),
                    ("client_secret", &te.client_secret),
                ] {
                    if value.is_empty() {
                        return Err(
                            format!("\"auth.{field}\" is required for token exchange").into()
                        );
                    }
                }
                endpoint("token_endpoint", &te.token_endpoint)
            }
            Auth::IdentityAssertion(ia) => {
                for (field, value) in [
                    ("idp_token_endpoint", &ia.idp_token_endpoint),
                    ("id_token", &ia.id_token),
                    ("client_id", &ia.client_id),
                    ("client_secret", &ia.client_secret),
                ] {
                    if value.is_empty() {
                        return Err(format!(
                            "\"auth.{field}\" is required for an identity assertion"
                        )
                        .into());
                    }
                }
                endpoint("idp_token_endpoint", &ia.idp_token_endpoint)
            }
        }
    }

    /// The same auth with every string field passed through `f` (given its field name).
    pub fn try_map_strings<E>(
        self,
        mut f: impl FnMut(&str, String) -> Result<String, E>,
    ) -> Result<Auth, E> {
        let mut opt = |name: &str, v: Option<String>| v.map(|v| f(name, v)).transpose();
        Ok(match self {
            Auth::None => Auth::None,
            Auth::OAuth(c) => Auth::OAuth(OAuthClient {
                client_id: opt("auth.client_id", c.client_id)?,
                client_secret: opt("auth.client_secret", c.client_secret)?,
                client_metadata_url: opt("auth.client_metadata_url", c.client_metadata_url)?,
                scopes: c.scopes,
                per_agent: c.per_agent,
            }),
            Auth::ClientCredentials(cc) => {
                let client_id = f("auth.client_id", cc.client_id)?;
                let key = match cc.key {
                    ClientKey::Secret(v) => ClientKey::Secret(f("auth.client_secret", v)?),
                    ClientKey::PrivateKey(v) => ClientKey::PrivateKey(f("auth.private_key", v)?),
                };
                Auth::ClientCredentials(ClientCredentials {
                    client_id,
                    key,
                    scopes: cc.scopes,
                })
            }
            Auth::IdentityAssertion(ia) => Auth::IdentityAssertion(IdentityAssertion {
                idp_token_endpoint: f("auth.idp_token_endpoint", ia.idp_token_endpoint)?,
                id_token: f("auth.id_token", ia.id_token)?,
                idp_client_id: ia
                    .idp_client_id
                    .map(|v| f("auth.idp_client_id", v))
                    .transpose()?,
                client_id: f("auth.client_id", ia.client_id)?,
                client_secret: f("auth.client_secret", ia.client_secret)?,
                scopes: ia.scopes,
            }),
            Auth::TokenExchange(te) => Auth::TokenExchange(TokenExchange {
                token_endpoint: f("auth.token_endpoint", te.token_endpoint)?,
                client_id: f("auth.client_id", te.client_id)?,
                client_secret: f("auth.client_secret", te.client_secret)?,
                audience: te.audience.map(|v| f("auth.audience", v)).transpose()?,
                scopes: te.scopes,
            }),
        })
    }
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let masked = |v: &Option<String>| v.as_ref().map(|_| MASK);
        match self {
            Auth::None => f.write_str("None"),
            Auth::OAuth(c) => f
                .debug_struct("OAuth")
                .field("client_id", &c.client_id)
                .field("client_secret", &masked(&c.client_secret))
                .field("client_metadata_url", &c.client_metadata_url)
                .field("scopes", &c.scopes)
                .field("per_agent", &c.per_agent)
                .finish(),
            Auth::ClientCredentials(cc) => f
                .debug_struct("ClientCredentials")
                .field("client_id", &cc.client_id)
                .field(cc.key.field(), &MASK)
                .field("scopes", &cc.scopes)
                .finish(),
            Auth::IdentityAssertion(ia) => f
                .debug_struct("IdentityAssertion")
                .field("idp_token_endpoint", &ia.idp_token_endpoint)
                .field("id_token", &MASK)
                .field("idp_client_id", &ia.idp_client_id)
                .field("client_id", &ia.client_id)
                .field("client_secret", &MASK)
                .field("scopes", &ia.scopes)
                .finish(),
            Auth::TokenExchange(te) => f
                .debug_struct("TokenExchange")
                .field("token_endpoint", &te.token_endpoint)
                .field("client_id", &te.client_id)
                .field("client_secret", &MASK)
                .field("audience", &te.audience)
                .field("scopes", &te.scopes)
                .finish(),
        }
    }
}

/// The string form for the plain cases; a table (secrets masked) otherwise.
impl Serialize for Auth {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self {
            Auth::None => serializer.serialize_none(),
            Auth::OAuth(c) if *c == OAuthClient::default() => serializer.serialize_str("oauth"),
            Auth::OAuth(c) => {
                let mut map = serializer.serialize_map(None)?;
                map.serialize_entry("type", "oauth")?;
                if let Some(id) = &c.client_id {
                    map.serialize_entry("client_id", id)?;
                }
                if c.client_secret.is_some() {
                    map.serialize_entry("client_secret", MASK)?;
                }
                if let Some(u) = &c.client_metadata_url {
                    map.serialize_entry("client_metadata_url", u)?;
                }
                if !c.scopes.is_empty() {
                    map.serialize_entry("scopes", &c.scopes)?;
                }
                if c.per_agent {
                    map.serialize_entry("per_agent", &true)?;
                }
                map.end()
            }
            Auth::ClientCredentials(cc) => {
                let mut map = serializer.serialize_map(None)?;
                map.serialize_entry("type", "client_credentials")?;
                map.serialize_entry("client_id", &cc.client_id)?;
                map.serialize_entry(cc.key.field(), MASK)?;
                if !cc.scopes.is_empty() {
                    map.serialize_entry("scopes", &cc.scopes)?;
                }
                map.end()
            }
            Auth::IdentityAssertion(ia) => {
                let mut map = serializer.serialize_map(None)?;
                map.serialize_entry("type", "identity_assertion")?;
                map.serialize_entry("idp_token_endpoint", &ia.idp_token_endpoint)?;
                map.serialize_entry("id_token", MASK)?;
                if let Some(id) = &ia.idp_client_id {
                    map.serialize_entry("idp_client_id", id)?;
                }
                map.serialize_entry("client_id", &ia.client_id)?;
                map.serialize_entry("client_secret", MASK)?;
                if !ia.scopes.is_empty() {
                    map.serialize_entry("scopes", &ia.scopes)?;
                }
                map.end()
            }
            Auth::TokenExchange(te) => {
                let mut map = serializer.serialize_map(None)?;
                map.serialize_entry("type", "token_exchange")?;
                map.serialize_entry("token_endpoint", &te.token_endpoint)?;
                map.serialize_entry("client_id", &te.client_id)?;
                map.serialize_entry("client_secret", MASK)?;
                if let Some(audience) = &te.audience {
                    map.serialize_entry("audience", audience)?;
                }
                if !te.scopes.is_empty() {
                    map.serialize_entry("scopes", &te.scopes)?;
                }
                map.end()
            }
        }
    }
}

/// `url` (config field `field`) must be an http(s) URL, or a `${VAR}` still to expand.
fn endpoint(field: &str, url: &str) -> Result<(), SettingError> {
    if url.starts_with("https://") || url.starts_with("http://") || url.starts_with("${") {
        return Ok(());
    }
    Err(format!("\"auth.{field}\" must be an http:// or https:// URL, got {url:?}").into())
}
