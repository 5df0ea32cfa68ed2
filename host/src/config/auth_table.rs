//! The table form of an http server's `auth` setting: the authorization-code flow with a
//! given client, client credentials, or token exchange.

use super::SettingError;
use serde_json::{Map, Value};

use super::fields::Fields;
use super::{Auth, ClientCredentials, ClientKey, IdentityAssertion, OAuthClient, TokenExchange};

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
            "per_agent",
        ],
        "client_credentials" => &[
            "type",
            "client_id",
            "client_secret",
            "private_key",
            "scopes",
        ],
        "identity_assertion" => &[
            "type",
            "idp_token_endpoint",
            "id_token",
            "idp_client_id",
            "client_id",
            "client_secret",
            "scopes",
        ],
        "token_exchange" => &[
            "type",
            "token_endpoint",
            "client_id",
            "client_secret",
            "audience",
            "scopes",
        ],
        other => {
            return Err(format!(
                "\"auth.type\" must be \"oauth\", \"client_credentials\", \"token_exchange\" or \"identity_assertion\", got \"{other}\""
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
            per_agent: f
                .bool("per_agent")
                .map_err(|m| format!("in \"auth\": {m}"))?
                .unwrap_or(false),
        };
        let auth = Auth::OAuth(client);
        auth.validate()?;
        return Ok(auth);
    }
    if kind == "identity_assertion" {
        let required = |key: &str| -> Result<String, SettingError> {
            field(key)?.ok_or_else(|| {
                format!("\"auth.{key}\" is required for an identity assertion").into()
            })
        };
        let auth = Auth::IdentityAssertion(IdentityAssertion {
            idp_token_endpoint: required("idp_token_endpoint")?,
            id_token: required("id_token")?,
            idp_client_id: field("idp_client_id")?,
            client_id: required("client_id")?,
            client_secret: required("client_secret")?,
            scopes,
        });
        auth.validate()?;
        return Ok(auth);
    }
    if kind == "token_exchange" {
        let required = |key: &str| -> Result<String, SettingError> {
            field(key)?
                .ok_or_else(|| format!("\"auth.{key}\" is required for token exchange").into())
        };
        let auth = Auth::TokenExchange(TokenExchange {
            token_endpoint: required("token_endpoint")?,
            client_id: required("client_id")?,
            client_secret: required("client_secret")?,
            audience: field("audience")?,
            scopes,
        });
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(value: serde_json::Value) -> Result<Auth, String> {
        parse_auth_table(value.as_object().unwrap()).map_err(|e| e.message)
    }

    #[test]
    fn a_token_exchange_table_is_read_and_its_mistakes_named() {
        let auth = parse(serde_json::json!({
            "type": "token_exchange", "token_endpoint": "https://idp/token",
            "client_id": "gw", "client_secret": "s3cret", "audience": "https://api",
        }))
        .unwrap();
        assert!(auth.acts_as_caller());
        assert_eq!(
            auth.secrets(),
            vec![("auth.client_secret".to_string(), "s3cret".to_string())]
        );
        assert!(!format!("{auth:?}").contains("s3cret"));
        for (table, says) in [
            (
                serde_json::json!({"type": "token_exchange", "client_id": "gw", "client_secret": "s"}),
                "\"auth.token_endpoint\" is required for token exchange",
            ),
            (
                serde_json::json!({"type": "token_exchange", "token_endpoint": "idp/token", "client_id": "gw", "client_secret": "s"}),
                "must be an http:// or https:// URL",
            ),
            (
                serde_json::json!({"type": "token_exchange", "token_endpoint": "https://i", "client_id": "gw", "client_secret": "s", "private_key": "k"}),
                "\"auth.private_key\" is not a field of an auth table of type \"token_exchange\"",
            ),
        ] {
            let message = parse(table).unwrap_err();
            assert!(message.contains(says), "{message}");
        }
    }
}
