//! The table form of an http server's `auth` setting: the authorization-code flow with a
//! given client, or client credentials.

use super::SettingError;
use serde_json::{Map, Value};

use super::fields::Fields;
use super::{Auth, ClientCredentials, ClientKey, OAuthClient};

/// An `auth` table: the authorization-code flow with a given client, or client
/// credentials. Unknown fields and missing or conflicting ones are named.
pub(super) fn parse_auth_table(table: &Map<String, Value>) -> Result<Auth, SettingError> {
    let f = Fields { map: table };
    let kind = f.string("type")?.unwrap_or_else(|| "oauth".to_string());
    let allowed: &[&str] = match kind.as_str() {
        "oauth" => &[
            "type",
            "client_id",
            "client_secret",
            "client_metadata_url",
            "scopes",
        ],
        "client_credentials" => &[
            "type",
            "client_id",
            "client_secret",
            "private_key",
            "scopes",
        ],
        other => {
            return Err(format!(
                "\"auth.type\" must be \"oauth\" or \"client_credentials\", got \"{other}\""
            )
            .into());
        }
    };
    if let Some(unknown) = table.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(format!(
            "\"auth.{unknown}\" is not a field of an auth table of type \"{kind}\" (expected one of: {})",
            allowed.join(", ")
        ).into());
    }
    let scopes = f
        .string_list("scopes")
        .map_err(|m| format!("in \"auth\": {m}"))?
        .unwrap_or_default();
    let field = |key: &str| f.string(key).map_err(|m| format!("in \"auth\": {m}"));
    if kind == "oauth" {
        let client = OAuthClient {
            client_id: field("client_id")?,
            client_secret: field("client_secret")?,
            client_metadata_url: field("client_metadata_url")?,
            scopes,
        };
        let auth = Auth::OAuth(client);
        auth.validate()?;
        return Ok(auth);
    }
    let client_id =
        field("client_id")?.ok_or("\"auth.client_id\" is required for client credentials")?;
    let key = match (field("client_secret")?, field("private_key")?) {
        (Some(secret), None) => ClientKey::Secret(secret),
        (None, Some(pem)) => ClientKey::PrivateKey(pem),
        (Some(_), Some(_)) => {
            return Err(
                "set one of \"auth.client_secret\" and \"auth.private_key\", not both".into(),
            );
        }
        (None, None) => {
            return Err(
                "client credentials need \"auth.client_secret\" or \"auth.private_key\" (a PEM key, e.g. \"${VAR}\")"
                    .into(),
            );
        }
    };
    let auth = Auth::ClientCredentials(ClientCredentials {
        client_id,
        key,
        scopes,
    });
    auth.validate()?;
    Ok(auth)
}
