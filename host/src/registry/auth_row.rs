//! How an http service's `auth` is kept in the `services.auth` column: `NULL` (headers
//! only), `oauth` (dynamic registration, as rows written before auth tables had), or a
//! JSON table whose secret fields (`client_secret`, `private_key`) hold a
//! [`StoredValue`] — a `${VAR}` reference kept as written, or a secret-store reference.
//! The secret values themselves never reach the database.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::StoredValue;
use crate::config::{
    Auth, ClientCredentials, ClientKey, IdentityAssertion, OAuthClient, TokenExchange,
};

/// What a record's [`Auth`] holds in place of a secret field's value; the value (or its
/// reference) is in [`super::ServiceRecord::auth_secrets`]. It contains NUL characters,
/// so no value given on a command line, in an environment or in a file can equal it.
pub const STORED_SECRET: &str = "\0stored-secret\0";

#[derive(Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct AuthRow {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    client_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    client_metadata_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    token_endpoint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    audience: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    per_agent: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    idp_token_endpoint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    idp_client_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    id_token: Option<StoredValue>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    scopes: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    client_secret: Option<StoredValue>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    private_key: Option<StoredValue>,
}

/// The column text for `auth` and its secret fields.
pub(super) fn encode(auth: &Auth, secrets: &BTreeMap<String, StoredValue>) -> Option<String> {
    let field = |name: &str| secrets.get(name).cloned();
    let row = match auth {
        Auth::None => return None,
        Auth::OAuth(c) if *c == OAuthClient::default() => return Some("oauth".into()),
        Auth::OAuth(c) => AuthRow {
            kind: "oauth".into(),
            client_id: c.client_id.clone(),
            client_metadata_url: c.client_metadata_url.clone(),
            scopes: c.scopes.clone(),
            client_secret: c.client_secret.as_ref().and(field("client_secret")),
            private_key: None,
            per_agent: c.per_agent,
            ..AuthRow::default()
        },
        Auth::ClientCredentials(cc) => AuthRow {
            kind: "client_credentials".into(),
            client_id: Some(cc.client_id.clone()),
            client_metadata_url: None,
            scopes: cc.scopes.clone(),
            client_secret: matches!(cc.key, ClientKey::Secret(_))
                .then(|| field("client_secret"))
                .flatten(),
            private_key: matches!(cc.key, ClientKey::PrivateKey(_))
                .then(|| field("private_key"))
                .flatten(),
            ..AuthRow::default()
        },
        Auth::IdentityAssertion(ia) => AuthRow {
            kind: "identity_assertion".into(),
            client_id: Some(ia.client_id.clone()),
            idp_token_endpoint: Some(ia.idp_token_endpoint.clone()),
            idp_client_id: ia.idp_client_id.clone(),
            scopes: ia.scopes.clone(),
            client_secret: field("client_secret"),
            id_token: field("id_token"),
            ..AuthRow::default()
        },
        Auth::TokenExchange(te) => AuthRow {
            kind: "token_exchange".into(),
            client_id: Some(te.client_id.clone()),
            token_endpoint: Some(te.token_endpoint.clone()),
            audience: te.audience.clone(),
            scopes: te.scopes.clone(),
            client_secret: field("client_secret"),
            ..AuthRow::default()
        },
    };
    Some(serde_json::to_string(&row).expect("an auth row always serializes"))
}

/// What is wrong with an auth column's text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(super) struct BadAuthRow(String);

impl From<String> for BadAuthRow {
    fn from(message: String) -> Self {
        BadAuthRow(message)
    }
}

impl From<&str> for BadAuthRow {
    fn from(message: &str) -> Self {
        BadAuthRow(message.to_string())
    }
}

/// The [`Auth`] (with [`STORED_SECRET`] in each secret field) and its secret fields, from
/// the column text. The error says what is wrong with the text.
pub(super) fn decode(
    text: Option<&str>,
) -> Result<(Auth, BTreeMap<String, StoredValue>), BadAuthRow> {
    let text = match text {
        None => return Ok((Auth::None, BTreeMap::new())),
        Some("oauth") => return Ok((Auth::OAuth(OAuthClient::default()), BTreeMap::new())),
        Some(text) => text,
    };
    let row: AuthRow = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let mut secrets = BTreeMap::new();
    let mut keep = |name: &str, value: Option<StoredValue>| {
        value.map(|v| {
            secrets.insert(name.to_string(), v);
            STORED_SECRET.to_string()
        })
    };
    let auth = match row.kind.as_str() {
        "oauth" => Auth::OAuth(OAuthClient {
            client_id: row.client_id,
            client_secret: keep("client_secret", row.client_secret),
            client_metadata_url: row.client_metadata_url,
            scopes: row.scopes,
            per_agent: row.per_agent,
        }),
        "client_credentials" => {
            let key = match (
                keep("client_secret", row.client_secret),
                keep("private_key", row.private_key),
            ) {
                (Some(s), None) => ClientKey::Secret(s),
                (None, Some(k)) => ClientKey::PrivateKey(k),
                _ => {
                    return Err(
                        "client credentials need exactly one of client_secret and private_key"
                            .into(),
                    );
                }
            };
            Auth::ClientCredentials(ClientCredentials {
                client_id: row
                    .client_id
                    .ok_or("client credentials without a client_id")?,
                key,
                scopes: row.scopes,
            })
        }
        "identity_assertion" => Auth::IdentityAssertion(IdentityAssertion {
            idp_token_endpoint: row
                .idp_token_endpoint
                .ok_or("an identity assertion without an idp_token_endpoint")?,
            id_token: keep("id_token", row.id_token)
                .ok_or("an identity assertion without an id_token")?,
            idp_client_id: row.idp_client_id,
            client_id: row
                .client_id
                .ok_or("an identity assertion without a client_id")?,
            client_secret: keep("client_secret", row.client_secret)
                .ok_or("an identity assertion without a client_secret")?,
            scopes: row.scopes,
        }),
        "token_exchange" => Auth::TokenExchange(TokenExchange {
            token_endpoint: row
                .token_endpoint
                .ok_or("token exchange without a token_endpoint")?,
            client_id: row.client_id.ok_or("token exchange without a client_id")?,
            client_secret: keep("client_secret", row.client_secret)
                .ok_or("token exchange without a client_secret")?,
            audience: row.audience,
            scopes: row.scopes,
        }),
        other => return Err(format!("unknown auth type {other:?}").into()),
    };
    Ok((auth, secrets))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_round_trip_without_their_secret_values() {
        let secrets = BTreeMap::from([(
            "private_key".to_string(),
            StoredValue::Secret("secret:1".into()),
        )]);
        let auth = Auth::ClientCredentials(ClientCredentials {
            client_id: "agent".into(),
            key: ClientKey::PrivateKey(STORED_SECRET.into()),
            scopes: vec!["read".into()],
        });
        let text = encode(&auth, &secrets).unwrap();
        assert!(!text.contains(STORED_SECRET), "{text}");
        assert_eq!(decode(Some(&text)).unwrap(), (auth, secrets));
        let plain = Auth::OAuth(OAuthClient::default());
        assert_eq!(encode(&plain, &BTreeMap::new()).as_deref(), Some("oauth"));
        assert_eq!(decode(None).unwrap().0, Auth::None);
        assert!(decode(Some(r#"{"type":"client_credentials","client_id":"a"}"#)).is_err());
        assert!(decode(Some(r#"{"type":"magic"}"#)).is_err());
        let secrets = BTreeMap::from([(
            "client_secret".to_string(),
            StoredValue::Secret("secret:2".into()),
        )]);
        let exchange = Auth::TokenExchange(TokenExchange {
            token_endpoint: "https://idp.example.com/token".into(),
            client_id: "gateway".into(),
            client_secret: STORED_SECRET.into(),
            audience: Some("https://api.example.com".into()),
            scopes: vec![],
        });
        let text = encode(&exchange, &secrets).unwrap();
        assert!(!text.contains(STORED_SECRET), "{text}");
        assert_eq!(decode(Some(&text)).unwrap(), (exchange, secrets));
        assert!(decode(Some(r#"{"type":"token_exchange","client_id":"a"}"#)).is_err());
    }
}
