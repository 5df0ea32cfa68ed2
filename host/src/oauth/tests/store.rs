//! Tests of the token store: the stored record round trip, logout, unreadable records.

use super::*;
use crate::oauth::store::{Stored, now_secs, read_record, token_fields};

#[tokio::test]
async fn stored_tokens_round_trip_without_extras() {
    let dir = tempfile::tempdir().unwrap();
    let store = SecretStore::open_file(dir.path()).unwrap();
    let url = "https://mcp.example/mcp";
    assert!(!is_authorized(&store, "svc").unwrap());
    let now = now_secs();
    save(
        &store,
        "svc",
        url,
        serde_json::json!({
            "access_token": "at-1", "token_type": "Bearer", "expires_in": 3600,
            "refresh_token": "rt-1", "scope": "a b", "id_token": "big-vendor-extra"
        }),
        now,
    )
    .await;
    assert!(is_authorized(&store, "svc").unwrap());

    let text = store.get("oauth:svc").unwrap().unwrap();
    assert!(!text.contains("big-vendor-extra"), "extras dropped: {text}");
    let Stored::Found(record) = read_record(&store, "svc").unwrap() else {
        panic!("record expected");
    };
    assert_eq!(record.resource, url);
    assert_eq!(record.client.client_id, "client-1");
    assert_eq!(
        record.client.client_secret.as_deref(),
        Some("client-secret")
    );
    assert_eq!(record.obtained_at, now);
    assert_eq!(record.expires_at, Some(now + 3600));

    let loaded = adapter(&store, "svc", url).load().await.unwrap().unwrap();
    let fields = token_fields(loaded.token_response.as_ref().unwrap()).unwrap();
    assert_eq!(fields.access_token, "at-1");
    assert_eq!(fields.refresh_token.as_deref(), Some("rt-1"));

    // Fresh: returned without touching the network.
    assert_eq!(access_token(&store, "svc", url).await.unwrap(), "at-1");
    // Another URL: never sent there.
    let other = access_token(&store, "svc", "https://elsewhere.example/mcp")
        .await
        .unwrap_err();
    assert!(matches!(other, OAuthError::NotAuthorized { .. }), "{other}");

    assert!(logout(&store, "svc").unwrap());
    assert!(!logout(&store, "svc").unwrap());
    assert!(!is_authorized(&store, "svc").unwrap());
    let none = access_token(&store, "svc", url).await.unwrap_err();
    assert!(
        none.to_string().contains("airlock servers auth svc"),
        "{none}"
    );
}

#[tokio::test]
async fn unreadable_record_needs_authorization() {
    let dir = tempfile::tempdir().unwrap();
    let store = SecretStore::open_file(dir.path()).unwrap();
    store.put("oauth:svc", "{not json").unwrap();
    assert!(!is_authorized(&store, "svc").unwrap());
    let e = access_token(&store, "svc", "https://x.example")
        .await
        .unwrap_err();
    assert!(matches!(e, OAuthError::NotAuthorized { .. }), "{e}");
}

/// Tokens obtained for one subject (an identity assertion's ID token) are never handed
/// out for another: a changed ID token gets its own.
#[tokio::test]
async fn stored_tokens_serve_only_the_subject_they_were_obtained_for() {
    use crate::oauth::store::stored_fresh_token;
    let dir = tempfile::tempdir().unwrap();
    let store = SecretStore::open_file(dir.path()).unwrap();
    let url = "https://mcp.example/mcp";
    let credentials = StoredCredentials::new(
        "client-1".into(),
        Some(token_response(serde_json::json!({
            "access_token": "at-alice", "token_type": "Bearer", "expires_in": 3600
        }))),
        vec![],
        Some(now_secs()),
    );
    StoreAdapter::new(
        &store,
        "svc",
        url,
        ClientRegistration {
            client_id: "client-1".into(),
            client_secret: None,
            redirect_uri: String::new(),
            subject: Some("digest-of-alices-id-token".into()),
        },
    )
    .save(credentials)
    .await
    .unwrap();
    let found = |subject: Option<&'static str>| {
        let store = store.clone();
        async move {
            stored_fresh_token(&store, "svc", url, "client-1", subject)
                .await
                .unwrap()
        }
    };
    assert_eq!(
        found(Some("digest-of-alices-id-token")).await.as_deref(),
        Some("at-alice")
    );
    assert_eq!(found(Some("digest-of-bobs-id-token")).await, None);
    assert_eq!(found(None).await, None);
}
