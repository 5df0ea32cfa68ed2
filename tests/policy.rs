//! The policy stage (contract 0.2) through a real server (tests/peers/python/policy_server.py,
//! which logs every call that reaches it): `builtin:policy` allowing, denying by tool
//! glob and argument pattern, confining paths to the agent's roots and asking before a
//! destructive tool (answered yes, no, or by no one); audit mode; a plugin that rewrites
//! arguments, traps (closed and open), withholds or replaces a result; and a plugin built
//! against the frozen contract 0.1 running beside them.

mod support;

use std::sync::Arc;

use airlock_host::{Airlock, ApprovalRequest, ErrorCode, Event};
use serde_json::{Value, json};
use support::{Workspace, fixture_wasm, python, python_server, toml_str};

const TOKEN: &str = "policy-token-5b9e2c71";

/// A workspace with one policy-peer service per `(name, extra config)`, each logging
/// the calls that reach it to `<workspace>/<name>.log`.
fn workspace(services: &[(&str, &str)]) -> Workspace {
    let ws = Workspace::new("");
    let mut config = String::new();
    for (name, extra) in services {
        let log = ws.dir.path().join(format!("{name}.log"));
        config.push_str(&format!(
            "[mcp_servers.{name}]\ncommand = {}\nargs = [{}]\nenv = {{ SERVICE_TOKEN = \"{TOKEN}\", POLICY_CALL_LOG = {} }}\n{extra}\n\n",
            toml_str(python().display().to_string()),
            toml_str(python_server("policy_server.py").display().to_string()),
            toml_str(log.display().to_string()),
        ));
    }
    std::fs::write(ws.config(), config).unwrap();
    ws
}

/// What reached `service`'s server, one JSON object per call.
fn arrived(ws: &Workspace, service: &str) -> Vec<Value> {
    let log =
        std::fs::read_to_string(ws.dir.path().join(format!("{service}.log"))).unwrap_or_default();
    log.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

async fn start(ws: &Workspace, approver: Option<Arc<dyn airlock_host::Approver>>) -> Airlock {
    let mut options = ws.options();
    options.approver = approver;
    Airlock::start(ws.load(), options).await.unwrap()
}

#[tokio::test]
async fn builtin_policy_allows_denies_confines_and_asks() {
    let rules = r#"adapters = { policy = "builtin:policy" }
adapter_config = { policy = { deny = ["ru?"], deny_arguments = [{ name = "wipe_root", regex = "^/$" }], confine_paths = true, ask_destructive = true } }"#;
    let ws = workspace(&[("p", rules)]);
    let airlock = start(&ws, None).await;
    airlock
        .set_roots("default", vec!["/srv/notes".into()])
        .await;
    let mut events = airlock.events();

    // Allowed: inside the roots.
    let out = airlock
        .call(
            "mcp__p__read_note",
            json!({"path": "/srv/notes/a.md"}),
            None,
        )
        .await
        .unwrap();
    assert!(out.preview.contains("/srv/notes/a.md"), "{}", out.preview);

    // Denied by tool glob, by path, by argument pattern: none reaches the server.
    for (tool, args, says) in [
        ("mcp__p__run", json!({"command": "ls"}), "rule deny:ru?"),
        (
            "mcp__p__read_note",
            json!({"path": "/srv/notes/../../etc/passwd"}),
            "rule confine_paths",
        ),
        (
            "mcp__p__read_note",
            json!({"path": "file:///etc/passwd"}),
            "outside the agent's roots",
        ),
        (
            "mcp__p__wipe_notes",
            json!({"folder": "/"}),
            "rule deny_arguments:wipe_root",
        ),
    ] {
        let err = airlock.call(tool, args, None).await.unwrap_err();
        assert_eq!(err.code, ErrorCode::PolicyDenied, "{tool}: {err}");
        assert!(err.message.contains(says), "{tool}: {err}");
    }
    // A destructive tool needs a person; with no one to ask, it is denied and the
    // question is in the message.
    let err = airlock
        .call(
            "mcp__p__wipe_notes",
            json!({"folder": "/srv/notes/old"}),
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::PolicyDenied);
    assert!(
        err.message.contains("none can be asked") && err.message.contains("destructive"),
        "{err}"
    );
    let reached: Vec<String> = arrived(&ws, "p")
        .iter()
        .map(|c| c["tool"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        reached,
        ["read_note"],
        "only the allowed call reached the server"
    );

    // Every decision was an event naming the plugin and the rule.
    let mut decided = Vec::new();
    while let Ok(event) = events.try_recv() {
        if let Event::PolicyDecided {
            plugin,
            rule,
            decision,
            ..
        } = event
        {
            decided.push(format!("{plugin} {rule} {decision}"));
        }
    }
    for expected in [
        "builtin:policy default allow",
        "builtin:policy deny:ru? deny",
        "builtin:policy ask_destructive ask",
    ] {
        assert!(
            decided.iter().any(|d| d == expected),
            "{expected}: {decided:?}"
        );
    }
    airlock.close().await;
}

#[tokio::test]
async fn a_person_answers_what_a_policy_asks() {
    let rules = r#"adapters = { policy = "builtin:policy" }
adapter_config = { policy = { ask_destructive = true } }"#;
    let ws = workspace(&[("p", rules)]);
    let asked: Arc<std::sync::Mutex<Vec<ApprovalRequest>>> = Arc::default();
    let answer = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let approver = {
        let (asked, answer) = (asked.clone(), answer.clone());
        move |request: &ApprovalRequest| {
            asked.lock().unwrap().push(request.clone());
            answer.load(std::sync::atomic::Ordering::SeqCst)
        }
    };
    let airlock = start(&ws, Some(Arc::new(approver))).await;
    let out = airlock
        .call("mcp__p__wipe_notes", json!({"folder": "/tmp/old"}), None)
        .await
        .unwrap();
    assert!(out.preview.contains("wipe_notes"), "yes: it ran");
    answer.store(false, std::sync::atomic::Ordering::SeqCst);
    let err = airlock
        .call("mcp__p__wipe_notes", json!({"folder": "/tmp/new"}), None)
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::PolicyDenied);
    assert!(err.message.contains("a person declined"), "{err}");
    let asked = asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 2);
    assert_eq!(asked[0].raw_tool, "wipe_notes");
    assert_eq!(asked[0].arguments, json!({"folder": "/tmp/old"}));
    assert_eq!(asked[0].rule, "ask_destructive");
    assert_eq!(
        arrived(&ws, "p").len(),
        1,
        "no: it never reached the server"
    );
    airlock.close().await;
}

#[tokio::test]
async fn audit_mode_records_and_enforces_nothing() {
    let rules = r#"adapters = { policy = "builtin:policy" }
adapter_config = { policy = { deny = ["run"], mode = "audit" } }"#;
    let ws = workspace(&[("p", rules)]);
    let airlock = start(&ws, None).await;
    let mut events = airlock.events();
    let out = airlock
        .call("mcp__p__run", json!({"command": "ls"}), None)
        .await
        .unwrap();
    assert!(
        out.preview.contains("\"command\": \"ls\""),
        "{}",
        out.preview
    );
    let mut audited = None;
    while let Ok(event) = events.try_recv() {
        if let Event::PolicyDecided { ref decision, .. } = event
            && decision != "allow"
        {
            audited = Some(serde_json::to_value(&event).unwrap());
        }
    }
    let audited = audited.expect("a policy_decided event for the denial");
    assert_eq!(audited["event"], "policy_decided", "{audited}");
    assert_eq!(audited["decision"], "deny", "{audited}");
    assert_eq!(audited["rule"], "deny:run", "{audited}");
    assert_eq!(audited["mode"], "audit", "{audited}");
    airlock.close().await;
}

#[tokio::test]
async fn rewrites_traps_withholds_and_replacements() {
    let fixture = toml_str(fixture_wasm("policy").display().to_string());
    let chain = |tables: &str| {
        format!("adapters = {{ policy = [{fixture}] }}\nadapter_config = {{ policy = [{tables}] }}")
    };
    let ws = workspace(&[
        (
            "rewrite",
            &chain(r#"{ action = "rewrite", set = { dry_run = true } }"#),
        ),
        ("closed", &chain(r#"{ action = "trap" }"#)),
        (
            "open",
            &chain(r#"{ action = "trap", on_failure = "open" }"#),
        ),
        ("withhold", &chain(r#"{ action = "withhold" }"#)),
        (
            "replace",
            &chain(&format!(r#"{{ action = "replace", text = "{TOKEN}" }}"#)),
        ),
    ]);
    let airlock = start(&ws, None).await;

    // Rewrite: the server sees the policy's arguments.
    let out = airlock
        .call("mcp__rewrite__run", json!({"command": "deploy"}), None)
        .await
        .unwrap();
    assert!(out.preview.contains("\"dry_run\": true"), "{}", out.preview);
    assert_eq!(arrived(&ws, "rewrite")[0]["arguments"]["dry_run"], true);

    // A trapping policy: closed denies (naming the trap), open lets the call through.
    let err = airlock
        .call("mcp__closed__run", json!({"command": "ls"}), None)
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::PolicyDenied);
    assert!(err.message.contains("fails closed"), "{err}");
    assert!(arrived(&ws, "closed").is_empty());
    airlock
        .call("mcp__open__run", json!({"command": "ls"}), None)
        .await
        .unwrap();
    assert_eq!(arrived(&ws, "open").len(), 1);

    // Withheld: the call ran, its result does not leave.
    let err = airlock
        .call("mcp__withhold__secret_report", json!({}), None)
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::PolicyDenied);
    assert!(err.message.contains("stay inside"), "{err}");
    assert_eq!(arrived(&ws, "withhold").len(), 1);

    // Replaced: the replacement is redacted like any result.
    let out = airlock
        .call("mcp__replace__secret_report", json!({}), None)
        .await
        .unwrap();
    assert!(out.preview.starts_with("replaced: "), "{}", out.preview);
    assert!(!out.preview.contains(TOKEN), "{}", out.preview);
    assert!(out.preview.contains("[REDACTED:secret:SERVICE_TOKEN]"));
    airlock.close().await;
}

#[tokio::test]
async fn a_plugin_built_for_contract_0_1_runs_beside_0_2_plugins() {
    let v01 = toml_str(fixture_wasm("contract-v01").display().to_string());
    let ws = workspace(&[(
        "p",
        &format!(
            "adapters = {{ content = {v01}, policy = \"builtin:policy\" }}\nadapter_config = {{ policy = {{ deny = [\"run\"] }} }}"
        ),
    )]);
    let airlock = start(&ws, None).await;
    let out = airlock
        .call("mcp__p__read_note", json!({"path": "/a"}), None)
        .await
        .unwrap();
    assert!(
        out.preview.contains("READ_NOTE"),
        "0.1 content ran: {}",
        out.preview
    );
    let err = airlock
        .call("mcp__p__run", json!({"command": "ls"}), None)
        .await
        .unwrap_err();
    assert_eq!(
        err.code,
        ErrorCode::PolicyDenied,
        "0.2 policy ran beside it"
    );
    airlock.close().await;

    let rt = airlock_host::plugin::PluginRuntime::new(Default::default(), None).unwrap();
    let loaded = rt
        .load(&airlock_host::config::PluginRef::File(fixture_wasm(
            "contract-v01",
        )))
        .unwrap();
    assert_eq!(loaded.contract, "0.1.0");
    let current = rt
        .load(&airlock_host::config::PluginRef::Builtin("policy".into()))
        .unwrap();
    assert_eq!(current.contract, "0.2.0");
}

#[tokio::test]
async fn policy_settings_are_checked_at_load() {
    // Config errors name the field.
    for (extra, says) in [
        (
            "adapter_config = { policy = { deny = [\"x\"] } }",
            "the policy chain has 0 plugins",
        ),
        (
            "adapters = { policy = \"builtin:policy\" }\nadapter_config = { policy = { mode = \"loud\" } }",
            "adapter_config.policy[0].mode",
        ),
    ] {
        let ws = workspace(&[("p", extra)]);
        let out = ws.run(&["status"], &[]);
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(!out.status.success() && err.contains(says), "{err}");
    }
    // A rule the plugin rejects fails the service at start, naming plugin and rule.
    let ws = workspace(&[(
        "p",
        "adapters = { policy = \"builtin:policy\" }\nadapter_config = { policy = { deny_arguments = [\"(\"] } }",
    )]);
    let airlock = start(&ws, None).await;
    let err = airlock
        .call("mcp__p__run", json!({"command": "ls"}), None)
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::ServiceUnavailable, "{err}");
    assert!(err.message.contains("deny_arguments[0]"), "{err}");
    airlock.close().await;
}

/// Runs the Python SDK client (tests/peers/python/gateway_client.py) against
/// `airlock serve` over stdio and parses its report.
fn through_the_gateway(ws: &Workspace, scenario: &str) -> Value {
    let bin = support::airlock_bin().display().to_string();
    let mut args = vec![scenario.to_string(), "--stdio".into(), bin];
    args.extend(support::serve_args(ws, &["serve"]));
    let out = std::process::Command::new(python())
        .arg(python_server("gateway_client.py"))
        .args(&args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap()
}

/// Behind `airlock serve`, a policy's question goes to the agent's own MCP client as an
/// elicitation (a yes runs the call, a no denies it); a client that does not answer
/// elicitation gets the denial with the question.
#[test]
fn the_gateway_asks_the_agents_client_through_elicitation() {
    let rules = r#"adapters = { policy = "builtin:policy" }
adapter_config = { policy = { ask_destructive = true } }"#;
    let ws = workspace(&[("p", rules)]);
    let report = through_the_gateway(&ws, "approve");
    let calls = report["calls"].as_array().unwrap();
    assert_eq!(calls[0]["is_error"], false, "{report}");
    assert!(
        calls[0]["text"].as_str().unwrap().contains("/tmp/first"),
        "{report}"
    );
    assert_eq!(calls[1]["is_error"], true, "{report}");
    assert!(
        calls[1]["text"]
            .as_str()
            .unwrap()
            .contains("a person declined"),
        "{report}"
    );
    let questions = report["questions"].as_array().unwrap();
    assert_eq!(questions.len(), 2, "{report}");
    assert!(
        questions[0]["message"]
            .as_str()
            .unwrap()
            .contains("destructive"),
        "{report}"
    );
    let reached: Vec<Value> = arrived(&ws, "p");
    assert_eq!(reached.len(), 1, "only the approved call ran: {reached:?}");

    let report = through_the_gateway(&ws, "nobody");
    let call = &report["calls"][0];
    assert_eq!(call["is_error"], true, "{report}");
    assert!(
        call["text"].as_str().unwrap().contains("none can be asked"),
        "{report}"
    );
    assert_eq!(arrived(&ws, "p").len(), 1);
}
