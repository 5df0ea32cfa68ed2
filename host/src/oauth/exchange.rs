//! Token exchange (RFC 8693) for services with `auth = { type = "token_exchange", … }`:
//! the calling agent's access token (the one it presented to `airlock serve --http`) is
//! exchanged at the identity provider for a token for the service's audience, so the
//! service sees the user, not a shared account.
//!
//! Exchanged tokens are kept in memory only, keyed by a SHA-256 of everything that
//! decides them (endpoint, client, audience, scopes and the subject token), until a
//! minute before they expire; never written anywhere, never logged.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::form::{FormFailure, post_form};
use super::{OAuthError, REFRESH_MARGIN_SECS, flow};
use crate::config::TokenExchange;

const GRANT: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";
/// The most exchanged tokens kept at once.
const KEPT_MAX: usize = 4_096;
/// How long an exchanged token without `expires_in` is kept.
const UNSTATED_LIFETIME: Duration = Duration::from_secs(300);

/// Exchanged tokens and until when each is used, by the digest of what it was exchanged
/// for.
type Kept = HashMap<[u8; 32], (String, Instant)>;

static KEPT: Mutex<Option<Kept>> = Mutex::new(None);

fn digest(exchange: &TokenExchange, audience: &str, subject: &str) -> [u8; 32] {
    let mut hash = Sha256::new();
    for part in [
        exchange.token_endpoint.as_str(),
        exchange.client_id.as_str(),
        audience,
        &exchange.scopes.join(" "),
        subject,
    ] {
        hash.update((part.len() as u64).to_be_bytes());
        hash.update(part.as_bytes());
    }
    hash.finalize().into()
}

/// A token for service `service` (at `url`) standing for the agent whose access token
/// is `subject`: the kept one unless `fresh`, else a new exchange.
pub async fn exchanged_token(
    service: &str,
    url: &str,
    exchange: &TokenExchange,
    subject: &str,
    fresh: bool,
) -> Result<String, OAuthError> {
    let audience = exchange.audience.as_deref().unwrap_or(url);
    let key = digest(exchange, audience, subject);
    if !fresh {
        let kept = KEPT.lock().expect("exchanged tokens poisoned");
        if let Some((token, until)) = kept.as_ref().and_then(|k| k.get(&key))
            && Instant::now() < *until
        {
            return Ok(token.clone());
        }
    }
    let (token, lifetime) = exchange_once(service, exchange, audience, subject).await?;
    let margin = Duration::from_secs(REFRESH_MARGIN_SECS);
    let until = Instant::now() + lifetime.saturating_sub(margin.min(lifetime / 2));
    let mut kept = KEPT.lock().expect("exchanged tokens poisoned");
    let kept = kept.get_or_insert_with(HashMap::new);
    if kept.len() >= KEPT_MAX {
        let now = Instant::now();
        kept.retain(|_, (_, until)| *until > now);
        if kept.len() >= KEPT_MAX {
            kept.clear();
        }
    }
    kept.insert(key, (token.clone(), until));
    Ok(token)
}

/// One exchange at the token endpoint: the token and how long it lives.
async fn exchange_once(
    service: &str,
    exchange: &TokenExchange,
    audience: &str,
    subject: &str,
) -> Result<(String, Duration), OAuthError> {
    let mut form = vec![
        ("grant_type", GRANT),
        ("subject_token", subject),
        ("subject_token_type", ACCESS_TOKEN_TYPE),
        ("requested_token_type", ACCESS_TOKEN_TYPE),
        ("audience", audience),
    ];
    // An audience that is a URL is also the resource (RFC 8707), as MCP servers expect.
    if audience.starts_with("https://") || audience.starts_with("http://") {
        form.push(("resource", audience));
    }
    let scopes = exchange.scopes.join(" ");
    if !scopes.is_empty() {
        form.push(("scope", &scopes));
    }
    let step = "token exchange";
    let basic = Some((exchange.client_id.as_str(), exchange.client_secret.as_str()));
    let answer = match post_form(&exchange.token_endpoint, &form, basic).await {
        Ok(answer) => answer,
        Err(FormFailure::Transport(e)) => return Err(flow(service, step, e)),
        Err(FormFailure::Refused(reason)) => {
            return Err(flow(
                service,
                step,
                format!(
                    "the identity provider refused to exchange the agent's token for one for {audience} (client \"{}\"): {reason}",
                    exchange.client_id
                ),
            ));
        }
    };
    let token = answer
        .get("access_token")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| flow(service, step, "the answer carries no access_token"))?;
    let lifetime = answer
        .get("expires_in")
        .and_then(Value::as_u64)
        .map_or(UNSTATED_LIFETIME, Duration::from_secs);
    Ok((token.to_string(), lifetime))
}
