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
