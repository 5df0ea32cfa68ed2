//! Enterprise-managed authorization (SEP-990, "cross-app access") for services with
//! `auth = { type = "identity_assertion", … }`: no browser and no consent screen. The
//! user's ID token from the enterprise identity provider is exchanged there (RFC 8693)
//! for an Identity Assertion JWT Authorization Grant (ID-JAG) naming the server's
//! authorization server and the MCP resource; the authorization server exchanges that
//! assertion (the JWT bearer grant, RFC 7523) for an access token. The token is kept in
//! the secret store like every OAuth record and obtained again when it is due or the
//! server refuses it.

use rmcp::transport::auth::{CredentialStore, OAuthTokenResponse, StoredCredentials};

use super::flow::{discover, scopes_for, service_lock};
use super::form::{FormFailure, post_form};
use super::store::{ClientRegistration, StoreAdapter, now_secs, stored_fresh_token, token_fields};
use super::{OAuthError, auth_flow, flow};
use crate::config::IdentityAssertion;
use crate::secrets::SecretStore;

const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ID_TOKEN: &str = "urn:ietf:params:oauth:token-type:id_token";
const ID_JAG: &str = "urn:ietf:params:oauth:token-type:id-jag";
const JWT_BEARER_GRANT: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/// An access token for `service` at `url` by an identity assertion: the stored one
/// while it is fresh (unless `fresh` asks for a new one, after a refusal), else the two
/// exchanges again.
pub async fn identity_assertion_token(
    store: &SecretStore,
    service: &str,
    url: &str,
    assertion: &IdentityAssertion,
    fresh: bool,
) -> Result<String, OAuthError> {
    let lock = service_lock(service);
    let _guard = lock.lock().await;
    // Tokens obtained with another ID token (another user, or a rotated one) are not
    // this one's.
    let subject = {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(assertion.id_token.as_bytes()))
    };
    if !fresh
        && let Some(token) =
            stored_fresh_token(store, service, url, &assertion.client_id, Some(&subject)).await?
    {
        return Ok(token);
    }
    let (manager, metadata) = discover(service, url, None).await?;
    let scopes = scopes_for(&manager, &assertion.scopes).await;
    let scope = scopes.join(" ");
    // The authorization server the assertion is for: its issuer identifier.
    let audience = metadata
        .issuer
        .clone()
        .unwrap_or_else(|| metadata.token_endpoint.clone());
    tracing::info!(service = %service, "OAuth: requesting an identity assertion");
    let mut form = vec![
        ("grant_type", TOKEN_EXCHANGE),
        ("subject_token", assertion.id_token.as_str()),
        ("subject_token_type", ID_TOKEN),
        ("requested_token_type", ID_JAG),
        ("audience", audience.as_str()),
        ("resource", url),
    ];
    if let Some(id) = &assertion.idp_client_id {
        form.push(("client_id", id));
    }
    if !scope.is_empty() {
        form.push(("scope", &scope));
    }
    let step = "identity assertion";
    let answer = post_form(&assertion.idp_token_endpoint, &form, None)
        .await
        .map_err(|e| failed(service, step, "the identity provider", e))?;
    let grant = answer
        .get("access_token")
        .and_then(serde_json::Value::as_str)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| flow(service, step, "the answer carries no assertion"))?;
    let issued = answer
        .get("issued_token_type")
        .and_then(serde_json::Value::as_str);
    if issued.is_some_and(|t| t != ID_JAG) {
        return Err(flow(
            service,
            step,
            format!("the identity provider issued a {issued:?}, not an identity assertion"),
        ));
    }

    tracing::info!(service = %service, "OAuth: exchanging the identity assertion");
    let mut form = vec![("grant_type", JWT_BEARER_GRANT), ("assertion", grant)];
    if !scope.is_empty() {
        form.push(("scope", &scope));
    }
    let step = "assertion grant";
    let basic = Some((
        assertion.client_id.as_str(),
        assertion.client_secret.as_str(),
    ));
    let answer = post_form(&metadata.token_endpoint, &form, basic)
        .await
        .map_err(|e| failed(service, step, "the authorization server", e))?;
    let response: OAuthTokenResponse = serde_json::from_value(answer).map_err(|e| {
        flow(
            service,
            step,
            format!("the token response is not a valid OAuth token response: {e}"),
        )
    })?;
    let token = token_fields(&response)
        .map(|t| t.access_token)
        .ok_or_else(|| flow(service, step, "the token response carries no access token"))?;
    let adapter = StoreAdapter::new(
        store,
        service,
        url,
        ClientRegistration {
            client_id: assertion.client_id.clone(),
            client_secret: None,
            redirect_uri: String::new(),
            subject: Some(subject),
        },
    );
    let mut credentials = StoredCredentials::new(
        assertion.client_id.clone(),
        Some(response),
        scopes,
        Some(now_secs()),
    );
    credentials.issuer = metadata.issuer.clone();
    adapter
        .save(credentials)
        .await
        .map_err(|e| auth_flow(service, "saving the token", &e))?;
    Ok(token)
}

/// A failed request to `whom` in `step`, in words that carry no token.
fn failed(service: &str, step: &'static str, whom: &str, failure: FormFailure) -> OAuthError {
    match failure {
        FormFailure::Transport(e) => flow(service, step, format!("cannot reach {whom}: {e}")),
        FormFailure::Refused(reason) => flow(service, step, format!("{whom} refused: {reason}")),
    }
}
