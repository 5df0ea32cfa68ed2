//! `[serve.auth]`: the gateway as an OAuth 2.1 resource server (the MCP authorization
//! specification). Access tokens issued by the configured identity provider are JWTs
//! checked against its published keys ([`keys`]): signature, issuer, audience (this
//! gateway's resource URL, RFC 8707), expiry and not-before within the allowed clock
//! skew, and the required scopes. The agent is read from a configured claim, and the
//! caller's groups grant the services configured for them.
//!
//! A token once verified is kept (by its SHA-256, never in clear) until it expires, so a
//! session's later requests cost a hash and a lookup. Unauthenticated requests are
//! answered 401 with `WWW-Authenticate: Bearer resource_metadata="…"` naming the
//! protected resource metadata (RFC 9728) that [`Identity::metadata`] serves, which is
//! how a standard MCP client finds where to sign in.

mod introspect;
mod keys;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jsonwebtoken::{Algorithm, Validation};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::config::ServeAuth;
use keys::Keys;

/// The most verified tokens kept at once.
const KEPT_MAX: usize = 16_384;
/// The longest an agent name read from a claim may be.
const AGENT_MAX: usize = 256;

/// Who a verified token names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Caller {
    /// The agent (the configured prefix and claim's value).
    pub(crate) agent: String,
    /// The services the caller's groups are granted.
    pub(crate) group_services: Arc<BTreeSet<String>>,
    /// When the token expires (seconds since the epoch).
    pub(crate) expires: u64,
}

/// Why a token was refused. The messages name what is wrong, never the token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// 401 `invalid_token`: not a token of this provider for this gateway, or expired.
    Invalid(String),
    /// 403 `insufficient_scope`: valid, without the scopes named.
    Scope(Vec<String>),
    /// 503: the provider's keys cannot be read now.
    Unavailable(String),
}

/// A verified token, kept until it expires (an introspected one, a shorter while).
struct Kept {
    caller: Caller,
    until: u64,
}

/// The configured identity provider, and the tokens it issued that were verified.
pub(crate) struct Identity {
    settings: ServeAuth,
    keys: Keys,
    kept: Mutex<HashMap<[u8; 32], Kept>>,
    metadata_url: String,
    metadata_path: String,
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The algorithms a provider's token may be signed with: asymmetric ones only (a
/// symmetric key cannot be published, and `none` is never accepted).
const ASYMMETRIC: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

impl Identity {
    /// The verifier of `settings`' tokens. Nothing is fetched until the first token.
    pub(crate) fn new(settings: ServeAuth) -> Identity {
        let (origin, path) = split_url(&settings.audience);
        let path = path.trim_end_matches('/');
        let metadata_path = format!("{BARE_METADATA_PATH}{path}");
        Identity {
            keys: Keys::new(&settings.issuer, settings.jwks_uri.clone()),
            metadata_url: format!("{origin}{metadata_path}"),
            metadata_path,
            settings,
            kept: Mutex::default(),
        }
    }

    /// Whether opaque tokens are asked about at the provider (`introspection`).
    pub(crate) fn introspects(&self) -> bool {
        self.settings.introspection.is_some()
    }

    /// Whether Airlock's own bearer tokens are accepted beside the provider's.
    pub(crate) fn own_tokens(&self) -> bool {
        self.settings.own_tokens
    }

    /// Where the protected resource metadata is served on this gateway (the
    /// audience's path after `/.well-known/oauth-protected-resource`, RFC 9728 §3.1).
    pub(crate) fn metadata_path(&self) -> &str {
        &self.metadata_path
    }

    /// The protected resource metadata (RFC 9728) of this gateway.
    pub(crate) fn metadata(&self) -> Value {
        let mut metadata = json!({
            "resource": self.settings.audience,
            "authorization_servers": [self.settings.issuer],
            "bearer_methods_supported": ["header"],
            "resource_name": "Airlock MCP gateway",
        });
        if !self.settings.required_scopes.is_empty() {
            metadata["scopes_supported"] = json!(self.settings.required_scopes);
        }
        metadata
    }

    /// The `WWW-Authenticate` challenge of a refusal (RFC 6750 §3, RFC 9728 §5.1).
    pub(crate) fn challenge(&self, refusal: Option<&Refusal>) -> String {
        let mut challenge = format!("Bearer resource_metadata=\"{}\"", self.metadata_url);
        if !self.settings.required_scopes.is_empty() {
            challenge.push_str(&format!(
                ", scope=\"{}\"",
                self.settings.required_scopes.join(" ")
            ));
        }
        match refusal {
            Some(Refusal::Invalid(why)) => challenge.push_str(&format!(
                ", error=\"invalid_token\", error_description=\"{}\"",
                quoted(why)
            )),
            Some(Refusal::Scope(_)) => challenge.push_str(", error=\"insufficient_scope\""),
            Some(Refusal::Unavailable(_)) | None => {}
        }
        challenge
    }

    /// Whether `token` is shaped like a JWT (three base64url parts), so it is the
    /// provider's to judge rather than one of Airlock's own tokens.
    pub(crate) fn is_jwt(token: &str) -> bool {
        let parts: Vec<&str> = token.split('.').collect();
        parts.len() == 3
            && parts[..2].iter().all(|p| {
                !p.is_empty()
                    && p.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            })
    }

    /// Verifies `token` and names its caller. `reserved` says whether an agent name
    /// belongs to Airlock's own tokens (asked once per token, when it is first
    /// verified): a token naming such an agent is refused, so a provider's user can never
    /// act as an agent of Airlock's own tokens.
    pub(crate) async fn verify(
        &self,
        token: &str,
        reserved: impl Fn(&str) -> Result<bool, String>,
    ) -> Result<Caller, Refusal> {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(caller) = self.kept(&digest) {
            return Ok(caller);
        }
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| Refusal::Invalid(format!("the token is not a readable JWT: {e}")))?;
        if !ASYMMETRIC.contains(&header.alg) {
            return Err(Refusal::Invalid(format!(
                "tokens signed with {:?} are not accepted",
                header.alg
            )));
        }
        let key = match self.keys.key(header.kid.as_deref()).await {
            Ok(Some(key)) => key,
            Ok(None) => {
                return Err(Refusal::Invalid(
                    "the token is signed by a key the identity provider does not publish".into(),
                ));
            }
            Err(e) => return Err(Refusal::Unavailable(e)),
        };
        if key.algorithm.is_some_and(|a| a != header.alg) {
            return Err(Refusal::Invalid(format!(
                "the token's algorithm {:?} is not its key's",
                header.alg
            )));
        }
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.settings.issuer]);
        validation.set_audience(&[&self.settings.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation.validate_nbf = true;
        validation.leeway = self.settings.leeway.as_secs();
        let claims = jsonwebtoken::decode::<Value>(token, &key.decoding, &validation)
            .map_err(|e| Refusal::Invalid(refusal_of(&e)))?
            .claims;
        let caller = self.accept(&claims, reserved)?;
        self.keep(digest, &caller, caller.expires);
        Ok(caller)
    }

    /// The caller of a token whose `claims` are genuine and current (a verified JWT's, or
    /// an introspection's answer): every required scope held, the agent named and not one
    /// of `reserved`.
    fn accept(
        &self,
        claims: &Value,
        reserved: impl Fn(&str) -> Result<bool, String>,
    ) -> Result<Caller, Refusal> {
        let missing: Vec<String> = {
            let held = scopes(claims);
            let required = &self.settings.required_scopes;
            required
                .iter()
                .filter(|s| !held.contains(s.as_str()))
                .cloned()
                .collect()
        };
        if !missing.is_empty() {
            return Err(Refusal::Scope(missing));
        }
        let caller = self.caller_of(claims)?;
        match reserved(&caller.agent) {
            Ok(false) => Ok(caller),
            Ok(true) => Err(Refusal::Invalid(format!(
                "the token names agent \"{}\", which acts with Airlock's own tokens (set serve.auth.agent_prefix to keep the provider's users apart)",
                caller.agent
            ))),
            Err(e) => Err(Refusal::Unavailable(e)),
        }
    }

    /// The agent and group grants `claims` name.
    fn caller_of(&self, claims: &Value) -> Result<Caller, Refusal> {
        let claim = &self.settings.agent_claim;
        let named = match claims.get(claim) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => {
                return Err(Refusal::Invalid(format!(
                    "the token has no \"{claim}\" claim naming the agent"
                )));
            }
        };
        let agent = format!("{}{named}", self.settings.agent_prefix);
        if named.trim().is_empty() || agent.len() > AGENT_MAX || agent.chars().any(char::is_control)
        {
            return Err(Refusal::Invalid(format!(
                "the token's \"{claim}\" claim is not a usable agent name (1 to {AGENT_MAX} bytes, no control characters)"
            )));
        }
        let groups: Vec<&str> = match claims.get(&self.settings.groups_claim) {
            Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
            Some(Value::String(s)) => s.split_whitespace().collect(),
            _ => Vec::new(),
        };
        let group_services = groups
            .iter()
            .filter_map(|g| self.settings.groups.get(*g))
            .flatten()
            .cloned()
            .collect();
        Ok(Caller {
            agent,
            group_services: Arc::new(group_services),
            expires: claims.get("exp").and_then(Value::as_u64).unwrap_or(0),
        })
    }

    fn kept(&self, digest: &[u8; 32]) -> Option<Caller> {
        let kept = self.kept.lock().expect("kept tokens poisoned");
        let entry = kept.get(digest)?;
        // Kept no longer than it is valid (the leeway is for clocks, not for keeping).
        (now_secs() < entry.until).then(|| entry.caller.clone())
    }

    fn keep(&self, digest: [u8; 32], caller: &Caller, until: u64) {
        let mut kept = self.kept.lock().expect("kept tokens poisoned");
        if kept.len() >= KEPT_MAX {
            let now = now_secs();
            kept.retain(|_, entry| entry.until > now);
            if kept.len() >= KEPT_MAX {
                kept.clear();
            }
        }
        kept.insert(
            digest,
            Kept {
                caller: caller.clone(),
                until,
            },
        );
    }
}

/// The scopes a token holds: `scope` (space-separated, RFC 8693 §4.2) or `scp` (a list
/// or a string, as some providers write it).
fn scopes(claims: &Value) -> BTreeSet<&str> {
    let mut held = BTreeSet::new();
    for name in ["scope", "scp"] {
        match claims.get(name) {
            Some(Value::String(s)) => held.extend(s.split_whitespace()),
            Some(Value::Array(items)) => held.extend(items.iter().filter_map(Value::as_str)),
            _ => {}
        }
    }
    held
}

/// What is wrong with a token, in words that name no part of it.
fn refusal_of(e: &jsonwebtoken::errors::Error) -> String {
    use jsonwebtoken::errors::ErrorKind;
    match e.kind() {
        ErrorKind::ExpiredSignature => "the token has expired".into(),
        ErrorKind::ImmatureSignature => "the token is not valid yet (nbf)".into(),
        ErrorKind::InvalidAudience => {
            "the token is for another audience (its aud does not name this gateway)".into()
        }
        ErrorKind::InvalidIssuer => "the token was issued by another issuer".into(),
        ErrorKind::InvalidSignature => "the token's signature does not verify".into(),
        ErrorKind::MissingRequiredClaim(claim) => format!("the token has no \"{claim}\" claim"),
        ErrorKind::InvalidAlgorithm => "the token's algorithm is not its key's".into(),
        _ => "the token is malformed".into(),
    }
}

/// `text` made safe inside a quoted-string of a header.
fn quoted(text: &str) -> String {
    text.chars()
        .filter(|c| *c != '"' && *c != '\\' && !c.is_control())
        .collect()
}

/// `https://host:port/path` as (`https://host:port`, `/path`).
fn split_url(url: &str) -> (&str, &str) {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    match url[after_scheme..].find('/') {
        Some(slash) => url.split_at(after_scheme + slash),
        None => (url, ""),
    }
}

/// The routes of the protected resource metadata: under the audience's path (RFC 9728
/// §3.1) and at the bare well-known path, both public. None without `[serve.auth]`.
pub(crate) fn router(identity: Option<Arc<Identity>>) -> axum::Router {
    let Some(identity) = identity else {
        return axum::Router::new();
    };
    let document = axum::Json(identity.metadata());
    let serve = move || {
        let document = document.clone();
        async move { document }
    };
    let mut router =
        axum::Router::new().route(identity.metadata_path(), axum::routing::get(serve.clone()));
    if identity.metadata_path() != BARE_METADATA_PATH {
        router = router.route(BARE_METADATA_PATH, axum::routing::get(serve));
    }
    router
}

/// The protected resource metadata's well-known path.
const BARE_METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// How long the identity provider's refusals of unreachable keys ask clients to wait.
pub(crate) const RETRY_AFTER: Duration = Duration::from_secs(2);

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(audience: &str) -> Identity {
        Identity::new(ServeAuth {
            issuer: "https://idp.example.com".into(),
            audience: audience.into(),
            required_scopes: vec!["mcp:tools".into()],
            agent_claim: "sub".into(),
            agent_prefix: String::new(),
            groups_claim: "groups".into(),
            groups: [("eng".to_string(), vec!["github".to_string()])].into(),
            leeway: Duration::from_secs(60),
            own_tokens: true,
            jwks_uri: None,
            introspection: None,
        })
    }

    #[test]
    fn the_metadata_is_published_under_the_audiences_path() {
        let id = identity("https://gw.example.com:8443/mcp");
        assert_eq!(
            id.metadata_path(),
            "/.well-known/oauth-protected-resource/mcp"
        );
        let challenge = id.challenge(Some(&Refusal::Invalid("the \"token\" has expired".into())));
        assert!(challenge.starts_with(
            "Bearer resource_metadata=\"https://gw.example.com:8443/.well-known/oauth-protected-resource/mcp\""
        ));
        assert!(
            challenge.contains("error_description=\"the token has expired\""),
            "{challenge}"
        );
        assert_eq!(
            id.metadata()["authorization_servers"][0],
            "https://idp.example.com"
        );
        let bare = identity("https://gw.example.com");
        assert_eq!(
            bare.metadata_path(),
            "/.well-known/oauth-protected-resource"
        );
    }

    #[test]
    fn claims_name_the_agent_groups_and_scopes() {
        let id = identity("https://gw/mcp");
        let claims = json!({"sub": "alice", "groups": ["eng", "ops"], "scope": "mcp:tools openid"});
        let caller = id.caller_of(&claims).unwrap();
        assert_eq!(caller.agent, "alice");
        assert_eq!(caller.group_services.iter().collect::<Vec<_>>(), ["github"]);
        assert!(scopes(&claims).contains("mcp:tools"));
        assert!(scopes(&json!({"scp": ["a", "b"]})).contains("b"));
        assert!(matches!(
            id.caller_of(&json!({"sub": ""})),
            Err(Refusal::Invalid(_))
        ));
        assert!(matches!(id.caller_of(&json!({})), Err(Refusal::Invalid(_))));
        assert!(Identity::is_jwt("eyJh.eyJz.c2ln"));
        assert!(!Identity::is_jwt("alk_0123456789abcdef"));
    }
}
