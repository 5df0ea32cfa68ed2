//! `[serve.auth]`: the gateway as an OAuth 2.1 resource server that accepts access
//! tokens from an identity provider.
//!
//! ```toml
//! [serve.auth]
//! issuer = "https://idp.example.com"             # its metadata names the JWKS
//! audience = "https://airlock.example.com/mcp"   # this gateway's resource URL (RFC 8707)
//! required_scopes = ["mcp:tools"]                # default: none
//! agent_claim = "sub"                            # the claim naming the agent (default)
//! agent_prefix = "idp:"                          # put before it (default: none)
//! groups_claim = "groups"                        # the claim listing groups (default)
//! groups = { eng = ["github", "linear"] }        # group -> services its members may use
//! leeway_secs = 60                               # clock skew allowed on exp/nbf (max 300)
//! own_tokens = true                              # `airlock serve tokens` keep working
//! introspection = { client_id = "airlock", client_secret = "${IDP_SECRET}" }
//!                                                # opaque tokens asked about (RFC 7662)
//! ```
//!
//! Later files win, key by key. Values expand `${VAR}`.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use super::SettingError;
use super::fields::kind;
use super::parse::read_documents;
use super::storage::{string, table};
use super::{ConfigError, ConfigSources};

/// The most clock skew `leeway_secs` may allow.
const MAX_LEEWAY: Duration = Duration::from_secs(300);

/// How the gateway checks access tokens from an identity provider (`[serve.auth]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeAuth {
    /// The authorization server's issuer identifier: tokens' `iss` must equal it, and its
    /// metadata (`/.well-known/openid-configuration` or `oauth-authorization-server`)
    /// names the JWKS.
    pub issuer: String,
    /// This gateway's resource URL: tokens' `aud` must contain it (RFC 8707), and the
    /// protected resource metadata (RFC 9728) is published for it.
    pub audience: String,
    /// Scopes every token must carry (`scope` or `scp`); a token without one is refused
    /// with 403 `insufficient_scope`.
    pub required_scopes: Vec<String>,
    /// The claim whose value names the agent.
    pub agent_claim: String,
    /// Put before the claim's value to make the agent's name (keeps the provider's users
    /// apart from agents with Airlock's own tokens).
    pub agent_prefix: String,
    /// The claim listing the caller's groups.
    pub groups_claim: String,
    /// Services granted to each group's members (in grants mode).
    pub groups: BTreeMap<String, Vec<String>>,
    /// Clock skew allowed when checking `exp` and `nbf`.
    pub leeway: Duration,
    /// Whether Airlock's own bearer tokens (`airlock serve tokens`) are accepted too.
    pub own_tokens: bool,
    /// The JWKS address, when the issuer's metadata is not to be asked for it.
    pub jwks_uri: Option<String>,
    /// How opaque (non-JWT) access tokens are checked: by the provider's introspection
    /// endpoint (RFC 7662). None: only JWTs are accepted.
    pub introspection: Option<Introspection>,
}

/// The client the gateway asks the provider about opaque tokens as (RFC 7662).
#[derive(Clone, PartialEq, Eq)]
pub struct Introspection {
    /// The introspection endpoint (default: the issuer's metadata names it).
    pub endpoint: Option<String>,
    /// The client id.
    pub client_id: String,
    /// Its secret (never shown by `Debug`).
    pub client_secret: String,
}

impl std::fmt::Debug for Introspection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Introspection")
            .field("endpoint", &self.endpoint)
            .field("client_id", &self.client_id)
            .field("client_secret", &crate::secrets::MASK)
            .finish()
    }
}

#[derive(Default)]
struct Partial {
    issuer: Option<String>,
    audience: Option<String>,
    required_scopes: Option<Vec<String>>,
    agent_claim: Option<String>,
    agent_prefix: Option<String>,
    groups_claim: Option<String>,
    groups: BTreeMap<String, Vec<String>>,
    leeway: Option<Duration>,
    own_tokens: Option<bool>,
    jwks_uri: Option<String>,
    introspection: Option<Introspection>,
}

/// The `[serve.auth]` settings of `sources` (later files win, key by key), or `None`
/// when no file has the table.
pub fn load_serve_auth(
    sources: &ConfigSources,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<ServeAuth>, ConfigError> {
    let mut partial = Partial::default();
    let mut seen = None;
    for (file, document) in read_documents(sources)? {
        let Some(serve) = &document.serve else {
            continue;
        };
        let named = |e: SettingError| ConfigError::File {
            file: file.clone(),
            message: e.message,
        };
        for (key, value) in table("serve", serve).map_err(named)? {
            match key.as_str() {
                "auth" => parse(value, env, &mut partial).map_err(named)?,
                other => {
                    return Err(named(
                        format!("unknown key \"serve.{other}\" (expected auth)").into(),
                    ));
                }
            }
        }
        seen = Some(file);
    }
    let Some(file) = seen else {
        return Ok(None);
    };
    let missing = |key: &str| ConfigError::File {
        file: file.clone(),
        message: format!("\"serve.auth.{key}\" is required when [serve.auth] is set"),
    };
    let issuer = partial.issuer.ok_or_else(|| missing("issuer"))?;
    let audience = partial.audience.ok_or_else(|| missing("audience"))?;
    Ok(Some(ServeAuth {
        issuer,
        audience,
        required_scopes: partial.required_scopes.unwrap_or_default(),
        agent_claim: partial.agent_claim.unwrap_or_else(|| "sub".into()),
        agent_prefix: partial.agent_prefix.unwrap_or_default(),
        groups_claim: partial.groups_claim.unwrap_or_else(|| "groups".into()),
        groups: partial.groups,
        leeway: partial.leeway.unwrap_or(Duration::from_secs(60)),
        own_tokens: partial.own_tokens.unwrap_or(true),
        jwks_uri: partial.jwks_uri,
        introspection: partial.introspection,
    }))
}

/// An absolute http(s) URL with a host, for `serve.auth.KEY`.
fn url(
    key: &str,
    value: &Value,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<String, SettingError> {
    let text = string("serve.auth", key, value, env)?;
    let rest = text
        .strip_prefix("https://")
        .or_else(|| text.strip_prefix("http://"));
    match rest {
        Some(rest) if !rest.is_empty() && !rest.starts_with('/') => Ok(text),
        _ => Err(format!(
            "\"serve.auth.{key}\" must be an absolute http:// or https:// URL, got {text:?}"
        )
        .into()),
    }
}

/// A list of non-empty strings, for `serve.auth.KEY`.
fn names(
    key: &str,
    value: &Value,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<String>, SettingError> {
    let Value::Array(items) = value else {
        return Err(format!("\"{key}\" must be a list of strings, got {}", kind(value)).into());
    };
    items
        .iter()
        .map(|item| {
            let text = string("serve.auth", key, item, env)?;
            if text.trim().is_empty() {
                return Err(format!("\"{key}\" must not hold an empty string").into());
            }
            Ok(text)
        })
        .collect()
}

fn parse(
    value: &Value,
    env: &dyn Fn(&str) -> Option<String>,
    into: &mut Partial,
) -> Result<(), SettingError> {
    for (key, v) in table("serve.auth", value)? {
        match key.as_str() {
            // Kept as written: tokens' `iss` must equal it byte for byte.
            "issuer" => into.issuer = Some(url(key, v, env)?),
            "agent_prefix" => into.agent_prefix = Some(string("serve.auth", key, v, env)?),
            "audience" => into.audience = Some(url(key, v, env)?),
            "jwks_uri" => into.jwks_uri = Some(url(key, v, env)?),
            "required_scopes" => {
                into.required_scopes = Some(names("serve.auth.required_scopes", v, env)?)
            }
            "agent_claim" | "groups_claim" => {
                let claim = string("serve.auth", key, v, env)?;
                if claim.trim().is_empty() {
                    return Err(format!("\"serve.auth.{key}\" must name a claim").into());
                }
                if key == "agent_claim" {
                    into.agent_claim = Some(claim);
                } else {
                    into.groups_claim = Some(claim);
                }
            }
            "groups" => {
                for (group, services) in table("serve.auth.groups", v)? {
                    let services = names(&format!("serve.auth.groups.{group}"), services, env)?;
                    into.groups.insert(group.clone(), services);
                }
            }
            "leeway_secs" => match v.as_u64() {
                Some(secs) if Duration::from_secs(secs) <= MAX_LEEWAY => {
                    into.leeway = Some(Duration::from_secs(secs))
                }
                _ => {
                    return Err(format!(
                        "\"serve.auth.leeway_secs\" must be a whole number of seconds from 0 to {}, got {v}",
                        MAX_LEEWAY.as_secs()
                    )
                    .into());
                }
            },
            "introspection" => {
                let mut found = (None, None, None);
                for (field, value) in table("serve.auth.introspection", v)? {
                    match field.as_str() {
                        "endpoint" => found.0 = Some(url("introspection.endpoint", value, env)?),
                        "client_id" => {
                            found.1 = Some(string("serve.auth.introspection", field, value, env)?)
                        }
                        "client_secret" => {
                            found.2 = Some(string("serve.auth.introspection", field, value, env)?)
                        }
                        other => {
                            return Err(format!(
                                "unknown key \"serve.auth.introspection.{other}\" (expected endpoint, client_id, client_secret)"
                            )
                            .into());
                        }
                    }
                }
                let (Some(client_id), Some(client_secret)) = (found.1, found.2) else {
                    return Err("\"serve.auth.introspection\" needs client_id and client_secret (the client the gateway asks the provider as)".to_string().into());
                };
                into.introspection = Some(Introspection {
                    endpoint: found.0,
                    client_id,
                    client_secret,
                });
            }
            "own_tokens" => match v {
                Value::Bool(b) => into.own_tokens = Some(*b),
                other => {
                    return Err(format!(
                        "\"serve.auth.own_tokens\" must be true or false, got {}",
                        kind(other)
                    )
                    .into());
                }
            },
            other => {
                return Err(format!(
                    "unknown key \"serve.auth.{other}\" (expected issuer, audience, required_scopes, agent_claim, agent_prefix, groups_claim, groups, leeway_secs, own_tokens, jwks_uri, introspection)"
                )
                .into());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Option<ServeAuth>, String> {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("airlock.toml");
        std::fs::write(&file, text).unwrap();
        let sources = ConfigSources {
            explicit: vec![file],
            ..Default::default()
        };
        let env = |name: &str| (name == "IDP").then(|| "https://idp.example.com/".to_string());
        load_serve_auth(&sources, &env).map_err(|e| e.to_string())
    }

    #[test]
    fn the_table_is_read_with_its_defaults() {
        assert_eq!(load("").unwrap(), None);
        let auth = load(
            "[serve.auth]\nissuer = \"${IDP}\"\naudience = \"https://gw.example.com/mcp\"\ngroups = { eng = [\"github\"] }\n",
        )
        .unwrap()
        .unwrap();
        assert_eq!(auth.issuer, "https://idp.example.com/", "kept as written");
        assert_eq!(auth.agent_claim, "sub");
        assert_eq!(auth.groups_claim, "groups");
        assert_eq!(auth.groups["eng"], vec!["github".to_string()]);
        assert_eq!(auth.leeway, Duration::from_secs(60));
        assert!(auth.own_tokens);
    }

    #[test]
    fn a_bad_table_names_the_key_and_the_file() {
        for (text, says) in [
            (
                "[serve.auth]\naudience = \"https://gw/mcp\"\n",
                "\"serve.auth.issuer\" is required",
            ),
            (
                "[serve.auth]\nissuer = \"idp.example.com\"\naudience = \"https://gw/mcp\"\n",
                "\"serve.auth.issuer\" must be an absolute",
            ),
            (
                "[serve.auth]\nissuer = \"https://i\"\naudience = \"https://gw/mcp\"\nleeway_secs = 9000\n",
                "serve.auth.leeway_secs",
            ),
            (
                "[serve.auth]\nissuer = \"https://i\"\naudience = \"https://gw/mcp\"\ngroups = { eng = \"github\" }\n",
                "\"serve.auth.groups.eng\" must be a list",
            ),
            (
                "[serve.auth]\nissuer = \"https://i\"\nsecret = 1\n",
                "unknown key \"serve.auth.secret\"",
            ),
            ("[serve]\nport = 1\n", "unknown key \"serve.port\""),
            (
                "[serve.auth]\nissuer = \"https://i\"\naudience = \"https://gw/mcp\"\nintrospection = { client_id = \"gw\" }\n",
                "\"serve.auth.introspection\" needs client_id and client_secret",
            ),
        ] {
            let message = load(text).unwrap_err();
            assert!(message.contains(says), "{text}: {message}");
            assert!(message.contains("airlock.toml"), "{message}");
        }
    }
}
