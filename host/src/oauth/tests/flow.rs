//! Tests of the flows: when a token is refreshed, and an expired token without a refresh
//! token.

use super::*;
use crate::oauth::flow::needs_refresh;
use crate::oauth::store::now_secs;

#[test]
fn expiry_decision() {
    let now = 1_000_000;
    let long_ago = now - 7200;
    assert!(
        !needs_refresh(long_ago, None, now),
        "no lifetime: used as is"
    );
    assert!(!needs_refresh(long_ago, Some(now + 3600), now));
    assert!(!needs_refresh(
        long_ago,
        Some(now + REFRESH_MARGIN_SECS + 1),
        now
    ));
    assert!(needs_refresh(
        long_ago,
        Some(now + REFRESH_MARGIN_SECS),
        now
    ));
    assert!(needs_refresh(long_ago, Some(now + 30), now));
    assert!(
        needs_refresh(long_ago, Some(now - 10), now),
        "already expired"
    );
    // A 4-second token just obtained is used, not refreshed at once.
    assert!(!needs_refresh(now, Some(now + 4), now));
    assert!(needs_refresh(now - 2, Some(now + 2), now));
}

#[tokio::test]
async fn expired_without_refresh_token_needs_authorization() {
    let dir = tempfile::tempdir().unwrap();
    let store = SecretStore::open_file(dir.path()).unwrap();
    let url = "https://mcp.example/mcp";
    save(
        &store,
        "svc",
        url,
        serde_json::json!({"access_token": "at-old", "token_type": "bearer", "expires_in": 3600}),
        now_secs() - 4000,
    )
    .await;
    let e = access_token(&store, "svc", url).await.unwrap_err();
    assert!(matches!(e, OAuthError::NotAuthorized { .. }), "{e}");
    assert!(!e.to_string().contains("at-old"), "{e}");

    // No lifetime given: the token is used as is.
    save(
        &store,
        "svc",
        url,
        serde_json::json!({"access_token": "at-forever", "token_type": "bearer"}),
        now_secs() - 1_000_000,
    )
    .await;
    assert_eq!(
        access_token(&store, "svc", url).await.unwrap(),
        "at-forever"
    );
}
