//! Tests of the public API and its errors: the header, messages, futures that can be spawned.

use std::time::Duration;

use super::*;

#[test]
fn header_and_messages() {
    assert_eq!(
        authorization_header("t0k"),
        ("Authorization".to_string(), "Bearer t0k".to_string())
    );
    let e = not_authorized("github", "no stored authorization");
    assert!(
        e.to_string()
            .contains("service \"github\" needs authorization: run `airlock servers auth github`"),
        "{e}"
    );
    let scrubbed = scrub(
        "bad code c0de-123 for state st4te-9",
        Some("c0de-123"),
        "st4te-9",
    );
    assert!(
        !scrubbed.contains("c0de-123") && !scrubbed.contains("st4te-9"),
        "{scrubbed}"
    );
    assert_eq!(clip("abcdef", 3), "abc…");
}

/// The public futures can be spawned (compile-time check).
#[allow(dead_code)]
fn futures_are_send(store: &SecretStore, open: OpenUrl<'_>) {
    fn send<T: Send>(_: T) {}
    let client = crate::config::OAuthClient::default();
    send(authorize(
        store,
        "s",
        "u",
        &client,
        open,
        Duration::from_secs(1),
    ));
    send(access_token(store, "s", "u"));
}
