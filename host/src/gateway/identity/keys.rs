//! The identity provider's signing keys: its metadata read once for the JWKS address,
//! the key set fetched and kept, and fetched again when a token names a key not in it
//! (the provider rotated its keys), at most once per [`REFETCH_EVERY`].

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde_json::Value;

/// The least time between two fetches of the key set caused by unknown key ids (so a
/// stream of tokens naming made-up keys cannot make the gateway hammer the provider).
const REFETCH_EVERY: Duration = Duration::from_secs(10);
/// How soon a failed fetch is tried again.
const RETRY_FAILED: Duration = Duration::from_secs(1);
/// How long a key set is trusted before it is fetched again.
const MAX_AGE: Duration = Duration::from_secs(3600);
/// How soon a failed refresh of a stale (still used) key set is tried again.
const RETRY_STALE: Duration = Duration::from_secs(60);
/// How long one request to the provider may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest metadata or key set document read.
const MAX_DOCUMENT: usize = 1 << 20;

/// One signing key of the provider.
pub(super) struct Key {
    pub(super) decoding: DecodingKey,
    /// The algorithm the key set names for it, if it names one.
    pub(super) algorithm: Option<Algorithm>,
}

/// What the key set holds now.
#[derive(Default)]
struct KeySet {
    by_id: HashMap<String, Arc<Key>>,
    /// Keys without an id (usable only by tokens without one, when it is the only key).
    anonymous: Vec<Arc<Key>>,
    /// The earliest the provider may be asked again.
    next_fetch: Option<Instant>,
    /// When the set was last fetched successfully.
    refreshed: Option<Instant>,
    /// Why the last fetch failed, if it did.
    failure: Option<String>,
}

/// The provider's keys, as the gateway knows them.
pub(super) struct Keys {
    issuer: String,
    /// The configured JWKS address, or the one the metadata named.
    jwks_uri: tokio::sync::OnceCell<String>,
    configured_jwks: Option<String>,
    /// The issuer's metadata, read once.
    metadata: tokio::sync::OnceCell<Value>,
    http: reqwest::Client,
    set: RwLock<KeySet>,
    /// One fetch at a time; the others wait for its keys.
    fetching: tokio::sync::Mutex<()>,
}

impl Keys {
    pub(super) fn new(issuer: &str, jwks_uri: Option<String>) -> Keys {
        let http = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        Keys {
            issuer: issuer.to_string(),
            jwks_uri: tokio::sync::OnceCell::new(),
            configured_jwks: jwks_uri,
            metadata: tokio::sync::OnceCell::new(),
            http,
            set: RwLock::default(),
            fetching: tokio::sync::Mutex::new(()),
        }
    }

    /// The key a token names (`kid`), fetching the key set when it is not known yet or
    /// the id is unknown (and the last fetch is old enough), or when the set is older
    /// than [`MAX_AGE`] (so a key the provider withdrew stops verifying within that
    /// time). `Ok(None)`: no such key.
    pub(super) async fn key(&self, kid: Option<&str>) -> Result<Option<Arc<Key>>, String> {
        if let Some(key) = self.known(kid) {
            if !self.due_for_refresh() {
                return Ok(Some(key));
            }
            // Stale: one request fetches the set again while the others use what is
            // known; a failed fetch keeps the known keys and is tried again later.
            let Ok(_one) = self.fetching.try_lock() else {
                return Ok(Some(key));
            };
            if !self.due_for_refresh() {
                return Ok(self.known(kid));
            }
            return match self.fetch().await {
                Ok(fresh) => {
                    *self.set.write().expect("key set poisoned") = KeySet {
                        next_fetch: Some(Instant::now() + REFETCH_EVERY),
                        refreshed: Some(Instant::now()),
                        ..fresh
                    };
                    Ok(self.known(kid))
                }
                Err(e) => {
                    tracing::warn!(
                        "cannot refresh the identity provider's keys ({e}); the known ones stay in use"
                    );
                    self.set.write().expect("key set poisoned").next_fetch =
                        Some(Instant::now() + RETRY_STALE);
                    Ok(Some(key))
                }
            };
        }
        let _one = self.fetching.lock().await;
        // Another request may have fetched meanwhile.
        if let Some(key) = self.known(kid) {
            return Ok(Some(key));
        }
        let waiting = {
            let set = self.set.read().expect("key set poisoned");
            match set.next_fetch {
                Some(at) if Instant::now() < at => Some(set.failure.clone()),
                _ => None,
            }
        };
        if let Some(failure) = waiting {
            // Fetched (or failed) too recently to ask again: a failure stands until then.
            return failure.map_or(Ok(None), Err);
        }
        let fetched = self.fetch().await;
        let mut set = self.set.write().expect("key set poisoned");
        match fetched {
            Ok(fresh) => {
                *set = KeySet {
                    next_fetch: Some(Instant::now() + REFETCH_EVERY),
                    refreshed: Some(Instant::now()),
                    ..fresh
                }
            }
            Err(e) => {
                // The keys known before stay; the provider is asked again soon.
                set.next_fetch = Some(Instant::now() + RETRY_FAILED);
                set.failure = Some(e.clone());
                return Err(e);
            }
        }
        drop(set);
        Ok(self.known(kid))
    }

    /// Whether the key set is older than [`MAX_AGE`] and may be fetched again now.
    fn due_for_refresh(&self) -> bool {
        let set = self.set.read().expect("key set poisoned");
        let now = Instant::now();
        set.refreshed
            .is_some_and(|at| now.duration_since(at) >= MAX_AGE)
            && set.next_fetch.is_none_or(|at| now >= at)
    }

    fn known(&self, kid: Option<&str>) -> Option<Arc<Key>> {
        let set = self.set.read().expect("key set poisoned");
        match kid {
            Some(kid) => set.by_id.get(kid).cloned(),
            None if set.by_id.len() + set.anonymous.len() == 1 => set
                .anonymous
                .first()
                .or_else(|| set.by_id.values().next())
                .cloned(),
            None => None,
        }
    }

    /// The key set, read from the provider (its address discovered first, once).
    async fn fetch(&self) -> Result<KeySet, String> {
        let uri = self
            .jwks_uri
            .get_or_try_init(|| async {
                match &self.configured_jwks {
                    Some(uri) => Ok(uri.clone()),
                    None => {
                        let metadata = self.metadata().await?;
                        metadata
                            .get("jwks_uri")
                            .and_then(Value::as_str)
                            .map(str::to_string)
                            .ok_or_else(|| "the issuer's metadata names no jwks_uri".to_string())
                    }
                }
            })
            .await?;
        let document = self.document(uri).await?;
        let keys = document
            .get("keys")
            .and_then(Value::as_array)
            .ok_or_else(|| format!("the key set at {uri} has no \"keys\" list"))?;
        let mut set = KeySet::default();
        for key in keys {
            // A key this gateway cannot use (encryption, a symmetric or unknown type) is
            // skipped: the others still verify tokens.
            let Ok(jwk) = serde_json::from_value::<Jwk>(key.clone()) else {
                continue;
            };
            if matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption)) {
                continue;
            }
            let Ok(decoding) = DecodingKey::from_jwk(&jwk) else {
                continue;
            };
            let algorithm = jwk
                .common
                .key_algorithm
                .and_then(|a| a.to_string().parse::<Algorithm>().ok());
            let key = Arc::new(Key {
                decoding,
                algorithm,
            });
            match jwk.common.key_id {
                Some(id) => {
                    set.by_id.insert(id, key);
                }
                None => set.anonymous.push(key),
            }
        }
        if set.by_id.is_empty() && set.anonymous.is_empty() {
            return Err(format!(
                "the key set at {uri} holds no signing key this gateway can use"
            ));
        }
        Ok(set)
    }

    /// The issuer's metadata: OpenID Connect discovery, then RFC 8414, read once. It
    /// must name this issuer (mix-up protection).
    pub(super) async fn metadata(&self) -> Result<&Value, String> {
        self.metadata
            .get_or_try_init(|| async {
                let mut last = String::new();
                for well_known in ["openid-configuration", "oauth-authorization-server"] {
                    let at = format!(
                        "{}/.well-known/{well_known}",
                        self.issuer.trim_end_matches('/')
                    );
                    match self.document(&at).await {
                        Ok(metadata) => {
                            let named = metadata.get("issuer").and_then(Value::as_str);
                            if named != Some(self.issuer.as_str()) {
                                return Err(format!(
                                    "the metadata at {at} names issuer {named:?}, not {:?}",
                                    self.issuer
                                ));
                            }
                            return Ok(metadata);
                        }
                        Err(e) => last = e,
                    }
                }
                Err(last)
            })
            .await
    }

    /// The client requests to the provider go through (bounded time, no redirects).
    pub(super) fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// A JSON document from the provider, bounded in size.
    async fn document(&self, at: &str) -> Result<Value, String> {
        let response = self
            .http
            .get(at)
            .header("accept", "application/json")
            .send()
            .await
            .map_err(|e| format!("cannot reach {at}: {}", without_url(&e)))?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("{at} answered {status}"));
        }
        let body = response
            .bytes()
            .await
            .map_err(|e| format!("cannot read {at}: {}", without_url(&e)))?;
        if body.len() > MAX_DOCUMENT {
            return Err(format!("{at} sent more than {MAX_DOCUMENT} bytes"));
        }
        serde_json::from_slice(&body).map_err(|e| format!("{at} is not JSON: {e}"))
    }
}

/// A reqwest error without the URL it repeats (the message names it already).
pub(super) fn without_url(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    if let Some(url) = e.url() {
        text = text.replace(&format!(" for url ({url})"), "");
    }
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
