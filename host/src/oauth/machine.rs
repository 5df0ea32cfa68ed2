//! Machine-to-machine tokens (`auth = { type = "client_credentials", … }`): the OAuth
//! client-credentials grant, with a client secret (rmcp's exchange) or a private key
//! signing a short-lived, single-use JWT assertion (RFC 7523, signed here with the
//! OpenSSL already linked for TLS). No browser and no `airlock servers auth` step: a
//! token is obtained when a session connects, kept in the secret store like every other
//! OAuth record, and obtained again when it is due or the server refuses it.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use openssl::hash::MessageDigest;
use openssl::pkey::{Id, PKey, Private};
use rmcp::transport::auth::{
    AuthError, ClientCredentialsConfig, CredentialStore, OAuthTokenResponse, StoredCredentials,
};
use serde_json::{Value, json};

use super::flow::{discover, scopes_for, service_lock};
use super::store::{ClientRegistration, StoreAdapter, now_secs, stored_fresh_token, token_fields};
use super::{OAuthError, StepFailure, auth_flow, flow};
use crate::config::{ClientCredentials, ClientKey};
use crate::secrets::SecretStore;

/// How long a signed client assertion is valid, in seconds.
const ASSERTION_LIFETIME_SECS: u64 = 60;

/// The `client_assertion_type` of a JWT client assertion (RFC 7523 §2.2).
const JWT_BEARER: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// An access token for `service` at `url` from client credentials: the stored one while
/// it is fresh (unless `fresh` asks for a new one, after a refusal), else a new grant.
/// A refusal names the credential's config field, never its value.
pub async fn client_credentials_token(
    store: &SecretStore,
    service: &str,
    url: &str,
    client: &ClientCredentials,
    fresh: bool,
) -> Result<String, OAuthError> {
    let lock = service_lock(service);
    let _guard = lock.lock().await;
    if !fresh
        && let Some(token) =
            stored_fresh_token(store, service, url, &client.client_id, None).await?
    {
        return Ok(token);
    }

    let (mut manager, metadata) = discover(service, url, None).await?;
    let scopes = scopes_for(&manager, &client.scopes).await;
    let adapter = StoreAdapter::new(
        store,
        service,
        url,
        ClientRegistration {
            client_id: client.client_id.clone(),
            // The secret stays in the config (or its secret-store reference): the token
            // record never holds a second copy.
            client_secret: None,
            redirect_uri: String::new(),
            subject: None,
        },
    );
    tracing::info!(service = %service, "OAuth: requesting a client-credentials token");
    let response = match &client.key {
        ClientKey::Secret(secret) => {
            let config = ClientCredentialsConfig::ClientSecret {
                client_id: client.client_id.clone(),
                client_secret: secret.clone(),
                scopes: scopes.clone(),
                resource: Some(url.to_string()),
            };
            manager.set_credential_store(adapter.clone());
            manager
                .validate_client_credentials_metadata(&config)
                .map_err(|e| refused(service, client, &e.to_string()))?;
            manager
                .configure_client_credentials(&config)
                .map_err(|e| auth_flow(service, "client configuration", &e))?;
            manager
                .exchange_client_credentials(&config)
                .await
                .map_err(|e| match e {
                    AuthError::TokenExchangeFailed(m) | AuthError::ClientCredentialsError(m) => {
                        refused(service, client, &m)
                    }
                    other => auth_flow(service, "token request", &other),
                })?
        }
        ClientKey::PrivateKey(pem) => {
            let audience = metadata
                .issuer
                .clone()
                .unwrap_or_else(|| metadata.token_endpoint.clone());
            let assertion = sign_assertion(pem, &client.client_id, &audience)
                .map_err(|m| refused(service, client, &m.0))?;
            let response = request_token(
                service,
                client,
                &metadata.token_endpoint,
                &assertion,
                url,
                &scopes,
            )
            .await?;
            let mut credentials = StoredCredentials::new(
                client.client_id.clone(),
                Some(response.clone()),
                scopes.clone(),
                Some(now_secs()),
            );
            credentials.issuer = metadata.issuer.clone();
            adapter
                .save(credentials)
                .await
                .map_err(|e| auth_flow(service, "saving the token", &e))?;
            response
        }
    };
    token_fields(&response)
        .map(|t| t.access_token)
        .ok_or_else(|| {
            flow(
                service,
                "token request",
                "the token response carries no access token",
            )
        })
}

/// The refusal of `client`'s credentials, naming the field that holds them.
fn refused(service: &str, client: &ClientCredentials, detail: &str) -> OAuthError {
    OAuthError::CredentialsRefused {
        service: service.to_string(),
        client_id: client.client_id.clone(),
        field: client.key.field(),
        detail: super::clip(detail, 300),
    }
}

/// The token request of the `private_key_jwt` method: no `client_id` in the body (the
/// assertion's `sub` names the client), the MCP server as `resource`.
async fn request_token(
    service: &str,
    client: &ClientCredentials,
    token_endpoint: &str,
    assertion: &str,
    resource: &str,
    scopes: &[String],
) -> Result<OAuthTokenResponse, OAuthError> {
    let mut form = vec![
        ("grant_type", "client_credentials".to_string()),
        ("client_assertion_type", JWT_BEARER.to_string()),
        ("client_assertion", assertion.to_string()),
        ("resource", resource.to_string()),
    ];
    if !scopes.is_empty() {
        form.push(("scope", scopes.join(" ")));
    }
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(std::time::Duration::from_secs(30))
        .build()
        .map_err(|e| flow(service, "token request", e))?;
    let body = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form.iter().map(|(k, v)| (*k, v.as_str())))
        .finish();
    let answer = http
        .post(token_endpoint)
        .header(
            reqwest::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .header(reqwest::header::ACCEPT, "application/json")
        .body(body)
        .send()
        .await
        .map_err(|e| flow(service, "token request", e.without_url()))?;
    let status = answer.status();
    let body = answer
        .bytes()
        .await
        .map_err(|e| flow(service, "token request", e.without_url()))?;
    if !status.is_success() {
        let reason = serde_json::from_slice::<Value>(&body)
            .ok()
            .map(|v| {
                let code = v.get("error").and_then(Value::as_str).unwrap_or("");
                let text = v
                    .get("error_description")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                format!("{code} {text}").trim().to_string()
            })
            .filter(|r| !r.is_empty())
            .unwrap_or_else(|| format!("HTTP {status}"));
        return Err(refused(service, client, &reason));
    }
    serde_json::from_slice(&body).map_err(|e| {
        flow(
            service,
            "token request",
            format!("the token response is not a valid OAuth token response: {e}"),
        )
    })
}

/// A JWT client assertion for `client_id`, for `audience` (the authorization server's
/// issuer), signed with the PEM key `pem`: RS256 for an RSA key, ES256 for an EC P-256
/// key. Valid for [`ASSERTION_LIFETIME_SECS`], with a random `jti` so it is used once.
pub fn sign_assertion(pem: &str, client_id: &str, audience: &str) -> Result<String, StepFailure> {
    let key = PKey::private_key_from_pem(pem.as_bytes()).map_err(|_| {
        "the private key is not a PEM private key (PKCS#8, PKCS#1 or SEC1)".to_string()
    })?;
    let alg = match key.id() {
        Id::RSA => "RS256",
        Id::EC => {
            let curve = key
                .ec_key()
                .ok()
                .and_then(|k| k.group().curve_name())
                .ok_or("the EC key names no curve")?;
            if curve != openssl::nid::Nid::X9_62_PRIME256V1 {
                return Err("only EC keys on P-256 (ES256) are supported".into());
            }
            "ES256"
        }
        _ => return Err("only RSA (RS256) and EC P-256 (ES256) keys are supported".into()),
    };
    let now = now_secs();
    let header = json!({"alg": alg, "typ": "JWT"});
    let claims = json!({
        "iss": client_id,
        "sub": client_id,
        "aud": audience,
        "iat": now,
        "exp": now + ASSERTION_LIFETIME_SECS,
        "jti": uuid::Uuid::new_v4().to_string(),
    });
    let signing_input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let signature = sign(&key, alg, signing_input.as_bytes())?;
    Ok(format!(
        "{signing_input}.{}",
        URL_SAFE_NO_PAD.encode(signature)
    ))
}

/// The JWS signature of `input`: PKCS#1 v1.5 for RS256; for ES256 the raw `r‖s`
/// (32 bytes each) that JWS wants instead of OpenSSL's DER.
fn sign(key: &PKey<Private>, alg: &str, input: &[u8]) -> Result<Vec<u8>, StepFailure> {
    let failed =
        |e: openssl::error::ErrorStack| format!("signing the client assertion failed: {e}");
    let mut signer = openssl::sign::Signer::new(MessageDigest::sha256(), key).map_err(failed)?;
    signer.update(input).map_err(failed)?;
    let der = signer.sign_to_vec().map_err(failed)?;
    if alg != "ES256" {
        return Ok(der);
    }
    let sig = openssl::ecdsa::EcdsaSig::from_der(&der).map_err(failed)?;
    let mut raw = Vec::with_capacity(64);
    for part in [sig.r(), sig.s()] {
        let bytes = part.to_vec_padded(32).map_err(failed)?;
        raw.extend_from_slice(&bytes);
    }
    Ok(raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verify(pem_private: &str, token: &str) -> Value {
        let key = PKey::private_key_from_pem(pem_private.as_bytes()).unwrap();
        let parts: Vec<&str> = token.split('.').collect();
        assert_eq!(parts.len(), 3);
        let header: Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[0]).unwrap()).unwrap();
        let signature = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
        let input = format!("{}.{}", parts[0], parts[1]);
        let der = if header["alg"] == "ES256" {
            assert_eq!(signature.len(), 64);
            let r = openssl::bn::BigNum::from_slice(&signature[..32]).unwrap();
            let s = openssl::bn::BigNum::from_slice(&signature[32..]).unwrap();
            openssl::ecdsa::EcdsaSig::from_private_components(r, s)
                .unwrap()
                .to_der()
                .unwrap()
        } else {
            signature
        };
        let mut verifier = openssl::sign::Verifier::new(MessageDigest::sha256(), &key).unwrap();
        verifier.update(input.as_bytes()).unwrap();
        assert!(verifier.verify(&der).unwrap(), "the signature verifies");
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap()
    }

    #[test]
    fn assertions_are_signed_short_lived_and_single_use() {
        let ec = openssl::ec::EcKey::generate(
            &openssl::ec::EcGroup::from_curve_name(openssl::nid::Nid::X9_62_PRIME256V1).unwrap(),
        )
        .unwrap();
        let ec_pem = String::from_utf8(
            PKey::from_ec_key(ec)
                .unwrap()
                .private_key_to_pem_pkcs8()
                .unwrap(),
        )
        .unwrap();
        let rsa_pem = String::from_utf8(
            PKey::from_rsa(openssl::rsa::Rsa::generate(2048).unwrap())
                .unwrap()
                .private_key_to_pem_pkcs8()
                .unwrap(),
        )
        .unwrap();
        for pem in [&ec_pem, &rsa_pem] {
            let a = sign_assertion(pem, "agent-platform", "https://as.example").unwrap();
            let b = sign_assertion(pem, "agent-platform", "https://as.example").unwrap();
            let claims = verify(pem, &a);
            assert_eq!(claims["iss"], "agent-platform");
            assert_eq!(claims["sub"], "agent-platform");
            assert_eq!(claims["aud"], "https://as.example");
            let (iat, exp) = (
                claims["iat"].as_u64().unwrap(),
                claims["exp"].as_u64().unwrap(),
            );
            assert_eq!(exp - iat, ASSERTION_LIFETIME_SECS);
            assert_ne!(claims["jti"], verify(pem, &b)["jti"], "jti is never reused");
        }
        let err = sign_assertion("-----BEGIN NOTHING-----", "c", "a")
            .unwrap_err()
            .0;
        assert!(err.contains("not a PEM private key"), "{err}");
    }
}
