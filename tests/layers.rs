//! The layering ARCHITECTURE.md states, checked against the code: every module of
//! `host/src` imports only the modules it may (its own layer's allowed neighbours and the
//! layers below). A `use crate::…` that reaches upward fails this test and names the
//! file.

mod support;

use std::collections::{BTreeMap, BTreeSet};

/// Each module and what it may import (besides itself), as ARCHITECTURE.md says.
fn allowed() -> BTreeMap<&'static str, &'static [&'static str]> {
    BTreeMap::from([
        ("error", &[][..]),
        ("digest", &[][..]),
        ("events", &["error"][..]),
        ("secrets", &["digest"][..]),
        ("telemetry", &["secrets"][..]),
        ("config", &["secrets", "digest", "telemetry"][..]),
        ("launch", &["secrets"][..]),
        ("transport", &[][..]),
        ("alloc", &[][..]),
        ("storage", &[][..]),
        ("mcp", &[][..]),
        ("oauth", &["config", "secrets"][..]),
        (
            "session",
            &[
                "launch",
                "transport",
                "oauth",
                "config",
                "secrets",
                "events",
                "error",
                "mcp",
                "telemetry",
            ][..],
        ),
        ("plugin", &["config", "secrets", "telemetry", "mcp"][..]),
        ("results", &["digest", "config", "storage", "telemetry"][..]),
        ("registry", &["config", "storage", "secrets"][..]),
        ("catalog", &["plugin", "registry", "digest"][..]),
        ("servers", &["config", "registry", "secrets", "oauth"][..]),
        ("import", &["config", "secrets"][..]),
        (
            "airlock",
            &[
                "catalog",
                "config",
                "error",
                "events",
                "plugin",
                "registry",
                "results",
                "secrets",
                "session",
                "digest",
                "telemetry",
                "mcp",
                "oauth",
            ][..],
        ),
        (
            "gateway",
            &[
                "airlock",
                "catalog",
                "config",
                "digest",
                "error",
                "events",
                "registry",
                "results",
                "secrets",
                "session",
                "telemetry",
                "mcp",
                "oauth",
            ][..],
        ),
        // The bundled demo drives the library as any embedder would.
        ("demo", &["airlock", "config", "error", "events", "mcp"][..]),
        // The command line: the facade (a running Airlock, or its `Stores` offline),
        // the gateway it serves, and the offline commands' own rooms: `servers` for the
        // service definitions (and their OAuth sign-in), `import`, `secrets`, and the
        // plugin runtime's public API for `airlock plugin`. It may not reach the
        // registry, the results store, the sessions or the call path around them.
        (
            "cli",
            &[
                "airlock",
                "config",
                "demo",
                "digest",
                "error",
                "events",
                "gateway",
                "import",
                "mcp",
                "secrets",
                "servers",
                "telemetry",
                "plugin",
            ][..],
        ),
    ])
}

/// The module a crate-root item belongs to (`crate::CallError` is `error`'s).
fn root_item_module(item: &str) -> &'static str {
    match item {
        "CallError" | "ErrorCode" => "error",
        "Event" => "events",
        _ => "airlock",
    }
}

#[test]
fn every_module_has_its_place_in_the_layering() {
    let src = support::root().join("host/src");
    let known = allowed();
    let exempt = ["lib.rs", "main.rs"];
    let mut unplaced = Vec::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if exempt.contains(&name.as_str()) {
            continue;
        }
        let module = name.trim_end_matches(".rs");
        if !known.contains_key(module) {
            unplaced.push(module.to_string());
        }
    }
    assert!(
        unplaced.is_empty(),
        "modules with no place in tests/layers.rs (and ARCHITECTURE.md): {unplaced:?}"
    );
}

/// Every module a source text reaches through `crate::`.
fn imports(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (i, _) in text.match_indices("crate::") {
        let rest = &text[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let inner = group.split('}').next().unwrap_or("");
            for item in inner.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                let head = item.split("::").next().unwrap_or(item);
                if head.chars().next().is_some_and(char::is_uppercase) {
                    found.insert(root_item_module(head).to_string());
                } else {
                    found.insert(head.to_string());
                }
            }
            continue;
        }
        let head: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if head.chars().next().is_some_and(char::is_uppercase) || head == "call_json" {
            found.insert(root_item_module(&head).to_string());
        } else if !head.is_empty() {
            found.insert(head);
        }
    }
    found
}

#[test]
fn no_module_imports_one_above_it() {
    let src = support::root().join("host/src");
    let mut violations = Vec::new();
    for (module, may) in allowed() {
        let files = if src.join(module).is_dir() {
            support::files_under(&src.join(module))
        } else {
            vec![src.join(format!("{module}.rs"))]
        };
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for reached in imports(&text) {
                if reached != module && !may.contains(&reached.as_str()) {
                    violations.push(format!(
                        "{} ({module}) imports `{reached}`",
                        file.strip_prefix(&src).unwrap().display()
                    ));
                }
            }
        }
    }
    assert!(
        violations.is_empty(),
        "imports that break the layering of ARCHITECTURE.md:\n{}",
        violations.join("\n")
    );
}

/// Every file in tests/ is a test target of host/Cargo.toml: the tests live outside the
/// package's folder, so cargo runs only the files the manifest lists.
#[test]
fn every_test_file_is_a_test_target() {
    let manifest = std::fs::read_to_string(support::root().join("host/Cargo.toml")).unwrap();
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(support::root().join("tests")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".rs") && !manifest.contains(&format!("path = \"../tests/{name}\"")) {
            missing.push(name);
        }
    }
    assert!(
        missing.is_empty(),
        "test files host/Cargo.toml does not list as a [[test]]: {missing:?}"
    );
}
