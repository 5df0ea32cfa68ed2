//! Unit tests of the registry handle itself: namespaces frozen across reopening.

use super::*;

#[test]
fn namespaces_are_frozen_and_survive_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let reg = Registry::open(dir.path()).unwrap();
    assert_eq!(reg.namespace("rea").unwrap(), None);
    assert_eq!(reg.freeze_namespace("rea", "rea").unwrap(), "rea");
    assert_eq!(reg.freeze_namespace("rea", "other").unwrap(), "rea");
    reg.freeze_namespace("fs", "fs").unwrap();
    drop(reg);
    let reg = Registry::open(dir.path()).unwrap();
    assert_eq!(reg.namespace("rea").unwrap().as_deref(), Some("rea"));
    assert_eq!(
        reg.namespaces_except("rea").unwrap(),
        vec!["fs".to_string()]
    );
    assert!(
        reg.freeze_namespace("dup", "fs").is_err(),
        "a namespace is held by one service only"
    );
}

#[test]
fn shared_secrets_are_replaced_taken_once_and_swept_by_prefix_and_age() {
    let dir = tempfile::tempdir().unwrap();
    let reg = Registry::open(dir.path()).unwrap();
    reg.put_shared_secret("oauth-flow:a", "v1.first").unwrap();
    reg.put_shared_secret("oauth-flow:a", "v1.second").unwrap();
    reg.put_shared_secret("oauth:svc.agent-1", "v1.tokens")
        .unwrap();
    assert_eq!(
        reg.shared_secret("oauth-flow:a").unwrap().as_deref(),
        Some("v1.second")
    );
    // Nothing is older than an hour ago.
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    assert_eq!(
        reg.sweep_shared_secrets("oauth-flow:", now_ms - 3_600_000)
            .unwrap(),
        0
    );
    // Everything written before a minute from now, with the prefix, goes; nothing else.
    assert_eq!(
        reg.sweep_shared_secrets("oauth-flow:", now_ms + 60_000)
            .unwrap(),
        1
    );
    assert_eq!(reg.shared_secret("oauth-flow:a").unwrap(), None);
    assert!(reg.shared_secret("oauth:svc.agent-1").unwrap().is_some());
    assert!(reg.delete_shared_secret("oauth:svc.agent-1").unwrap());
    assert!(
        !reg.delete_shared_secret("oauth:svc.agent-1").unwrap(),
        "taken once"
    );
}
