//! Opaque access tokens (`[serve.auth] introspection`): the provider is asked about each
//! (RFC 7662) as the configured client, and its answer is held to the same rules as a
//! JWT's claims: active, this issuer, this gateway's audience, not expired or not yet
//! valid (within the leeway), the required scopes. An answer is kept for at most
//! [`KEPT_FOR`], so a token the provider revokes is refused within that time.

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::keys::without_url;
use super::{Caller, Identity, Refusal, now_secs};

/// The longest an introspection's answer is kept, in seconds.
const KEPT_FOR: u64 = 60;
/// The largest answer read.
const MAX_ANSWER: usize = 1 << 20;

impl Identity {
    /// Asks the provider about the opaque `token` and names its caller (see
    /// [`Identity::verify`] for `reserved`).
    pub(crate) async fn introspect(
        &self,
        token: &str,
        reserved: impl Fn(&str) -> Result<bool, String>,
    ) -> Result<Caller, Refusal> {
        let Some(client) = &self.settings.introspection else {
            return Err(Refusal::Invalid(
                "the token is not a JWT, and this gateway checks no opaque tokens".into(),
            ));
        };
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(caller) = self.kept(&digest) {
            return Ok(caller);
        }
        let endpoint = match &client.endpoint {
            Some(endpoint) => endpoint.clone(),
            None => self
                .keys
                .metadata()
                .await
                .map_err(Refusal::Unavailable)?
                .get("introspection_endpoint")
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| {
                    Refusal::Unavailable(
                        "the issuer's metadata names no introspection_endpoint".into(),
                    )
                })?,
        };
        let answer = self.ask(&endpoint, client, token).await?;
        if answer.get("active").and_then(Value::as_bool) != Some(true) {
            return Err(Refusal::Invalid(
                "the identity provider says the token is not active (expired, revoked or unknown)"
                    .into(),
            ));
        }
        self.check_answer(&answer)?;
        let caller = self.accept(&answer, reserved)?;
        let until = caller.expires.min(now_secs() + KEPT_FOR);
        self.keep(digest, &caller, until);
        Ok(caller)
    }

    /// One introspection request, as the configured client (HTTP Basic).
    async fn ask(
        &self,
        endpoint: &str,
        client: &crate::config::Introspection,
        token: &str,
    ) -> Result<Value, Refusal> {
        let unavailable =
            |e: reqwest::Error| Refusal::Unavailable(format!("introspection: {}", without_url(&e)));
        let body = format!("token={}&token_type_hint=access_token", encoded(token));
        let response = self
            .keys
            .http()
            .post(endpoint)
            .basic_auth(
                encoded(&client.client_id),
                Some(encoded(&client.client_secret)),
            )
            .header("content-type", "application/x-www-form-urlencoded")
            .header("accept", "application/json")
            .body(body)
            .send()
            .await
            .map_err(unavailable)?;
        let status = response.status();
        let body = response.bytes().await.map_err(unavailable)?;
        if !status.is_success() {
            return Err(Refusal::Unavailable(format!(
                "the introspection endpoint answered {status} (check serve.auth.introspection's client)"
            )));
        }
        if body.len() > MAX_ANSWER {
            return Err(Refusal::Unavailable(
                "the introspection answer is too large".into(),
            ));
        }
        serde_json::from_slice(&body)
            .map_err(|e| Refusal::Unavailable(format!("the introspection answer is not JSON: {e}")))
    }

    /// The issuer, audience and time rules a JWT's claims are held to, on an answer.
    fn check_answer(&self, answer: &Value) -> Result<(), Refusal> {
        let invalid = |why: &str| Err(Refusal::Invalid(why.to_string()));
        if let Some(issuer) = answer.get("iss").and_then(Value::as_str)
            && issuer != self.settings.issuer
        {
            return invalid("the token was issued by another issuer");
        }
        let audience = &self.settings.audience;
        let for_us = match answer.get("aud") {
            Some(Value::String(aud)) => aud == audience,
            Some(Value::Array(auds)) => auds.iter().any(|a| a.as_str() == Some(audience)),
            _ => false,
        };
        if !for_us {
            return invalid(
                "the token is for another audience (its aud does not name this gateway)",
            );
        }
        let (now, leeway) = (now_secs(), self.settings.leeway.as_secs());
        match answer.get("exp").and_then(Value::as_u64) {
            None => return invalid("the token has no \"exp\" claim"),
            Some(exp) if exp + leeway <= now => return invalid("the token has expired"),
            Some(_) => {}
        }
        if let Some(nbf) = answer.get("nbf").and_then(Value::as_u64)
            && nbf > now + leeway
        {
            return invalid("the token is not valid yet (nbf)");
        }
        Ok(())
    }
}

/// `text` form-encoded.
fn encoded(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}
