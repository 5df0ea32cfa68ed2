//! The OAuth client settings other clients keep for remote servers, as an Airlock auth
//! table: Gemini's and Muse Code's `oauth` (`enabled`, `clientId`, `clientSecret`,
//! `scopes`, …), Claude Code's `oauth` (`clientId`, `callbackPort`) and Cursor's `auth`
//! (`CLIENT_ID`, `CLIENT_SECRET`, `scopes`).
//!
//! The client id and the scopes are carried over. A client secret is a remote
//! credential, so like a secret header it is not imported: the entry arrives disabled,
//! marked for repair with the flag that sets it.

use serde_json::{Map, Value};

use super::EntryError;
use super::parse::kind;
use super::references::Resolver;
use crate::config::{Auth, OAuthClient};

/// Source fields Airlock has no use for: it discovers the authorization server from the
/// MCP server's metadata and listens for the redirect on a port of its own.
const DISCOVERED: &[&str] = &[
    "authorizationUrl",
    "tokenUrl",
    "redirectUri",
    "tokenParamName",
    "audiences",
    "callbackPort",
];

/// The auth of a remote entry, and whether a credential was withheld. `Err` is a
/// malformed `oauth` or `auth` field (the message never quotes a secret).
pub(super) fn imported_auth(
    r: &mut Resolver<'_>,
    name: &str,
    map: &Map<String, Value>,
) -> Result<(Auth, bool), EntryError> {
    let (field, id_key, secret_key, table) = match (map.get("oauth"), map.get("auth")) {
        (Some(oauth), other) => {
            if other.is_some() {
                r.notes
                    .push("both \"oauth\" and \"auth\" are set; \"oauth\" was used".into());
            }
            ("oauth", "clientId", "clientSecret", oauth)
        }
        (None, Some(auth)) => ("auth", "CLIENT_ID", "CLIENT_SECRET", auth),
        (None, None) => return Ok((Auth::None, false)),
    };
    let Value::Object(table) = table else {
        return Err(format!("\"{field}\" must be an object, got {}", kind(table)).into());
    };
    let text = |key: &str| match table.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(format!(
            "\"{field}.{key}\" must be a string, got {}",
            kind(other)
        )),
    };
    match table.get("enabled") {
        None | Some(Value::Null) | Some(Value::Bool(true)) => {}
        Some(Value::Bool(false)) => {
            r.notes.push(format!(
                "\"{field}\" is disabled in the source; not imported"
            ));
            return Ok((Auth::None, false));
        }
        Some(other) => {
            return Err(
                format!("\"{field}.enabled\" must be a boolean, got {}", kind(other)).into(),
            );
        }
    }
    let scopes = match table.get("scopes") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|s| match s {
                Value::String(s) => Ok(s.clone()),
                other => Err(format!(
                    "\"{field}.scopes\" must hold strings, got {}",
                    kind(other)
                )),
            })
            .collect::<Result<_, _>>()?,
        Some(other) => {
            return Err(format!(
                "\"{field}.scopes\" must be an array of strings, got {}",
                kind(other)
            )
            .into());
        }
    };
    let client_id = text(id_key)?
        .map(|raw| r.template(&format!("{field}.{id_key}"), &raw))
        .filter(|id| !id.is_empty());
    let withheld = text(secret_key)?.is_some_and(|s| !s.is_empty());
    if withheld {
        r.repair.push(format!(
            "credentials not imported: {field}.{secret_key}; set it with `airlock servers edit {name} --client-secret-env VAR`"
        ));
    }
    let skipped: Vec<&str> = DISCOVERED
        .iter()
        .copied()
        .filter(|k| table.contains_key(*k))
        .collect();
    if !skipped.is_empty() {
        r.notes.push(format!(
            "{field}: {} not imported; Airlock discovers the authorization server from the server's metadata",
            skipped.join(", ")
        ));
    }
    Ok((
        Auth::OAuth(OAuthClient {
            client_id,
            client_secret: None,
            client_metadata_url: None,
            scopes,
            per_agent: false,
        }),
        withheld,
    ))
}
