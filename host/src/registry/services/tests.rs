//! Unit tests of the `services` table: round trips, scopes, duplicates.

use std::collections::BTreeMap;

use super::*;

fn record(scope: Scope, name: &str) -> ServiceRecord {
    ServiceRecord {
        key: ServiceKey {
            scope,
            project: if scope == Scope::Project {
                "/p".into()
            } else {
                String::new()
            },
            name: name.into(),
        },
        label: Some("L".into()),
        description: None,
        transport: StoredTransport::Stdio {
            command: "node".into(),
            args: vec!["a b".into(), "--x".into()],
            env: BTreeMap::from([
                ("PLAIN".into(), StoredValue::Plain("1".into())),
                ("API_TOKEN".into(), StoredValue::Secret("secret:abc".into())),
            ]),
        },
        cwd: Some("/tmp".into()),
        enabled: true,
        startup_timeout_secs: None,
        tool_timeout_secs: Some(90.0),
        auth_secrets: BTreeMap::new(),
        adapters: None,
        adapter_config: None,
        repair: vec![],
        origin: Some("airlock servers add".into()),
    }
}

#[test]
fn services_round_trip_and_refuse_duplicates_per_scope() {
    let dir = tempfile::tempdir().unwrap();
    let reg = Registry::open(dir.path()).unwrap();
    let user = record(Scope::User, "fs");
    reg.insert_service(&user).unwrap();
    let e = reg.insert_service(&user).unwrap_err();
    assert!(matches!(e, RegistryError::Exists { .. }), "{e}");
    reg.insert_service(&record(Scope::Project, "fs")).unwrap();
    assert_eq!(reg.service(&user.key).unwrap().as_ref(), Some(&user));
    assert_eq!(user.secret_refs(), vec!["secret:abc".to_string()]);
    let visible = reg.services("/p").unwrap();
    assert_eq!(visible.len(), 2);
    assert_eq!(visible[0].key.scope, Scope::User);
    assert_eq!(reg.services("/other").unwrap().len(), 1);
    let mut changed = user.clone();
    changed.enabled = false;
    reg.update_service(&changed).unwrap();
    assert!(!reg.service(&user.key).unwrap().unwrap().enabled);
    assert!(reg.delete_service(&user.key).unwrap());
    assert!(!reg.delete_service(&user.key).unwrap());
}
