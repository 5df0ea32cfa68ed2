//! The policy stage (contract 0.2) through a real server (tests/peers/python/policy_server.py,
//! which logs every call that reaches it): `builtin:policy` allowing, denying by tool
//! glob and argument pattern, confining paths to the agent's roots and asking before a
//! destructive tool (answered yes, no, or by no one); audit mode; a plugin that rewrites
//! arguments, traps (closed and open), withholds or replaces a result; and a plugin built
//! against the frozen contract 0.1 running beside them.

mod support;

use std::sync::Arc;

use airlock_host::{Approval, ApprovalRequest, ErrorCode, Event, RememberArguments};
use serde_json::{Value, json};
use support::{
    Workspace, arrived, fixture_wasm, policy_workspace as workspace, python, python_server,
    start_with, toml_str,
};

const TOKEN: &str = support::POLICY_TOKEN;

#[tokio::test]
async fn builtin_policy_allows_denies_confines_and_asks() {
    let rules = r#"adapters = { policy = "builtin:policy" }
adapter_config = { policy = { deny = ["ru?"], deny_arguments = [{ name = "wipe_root", regex = "^/$" }], confine_paths = true, ask_destructive = true } }"#;
    let ws = workspace(&[("p", rules)]);
    let airlock = start_with(&ws, None).await;
    airlock
        .services()
        .set_roots("default", vec!["/srv/notes".into()])
        .await;
    let mut events = airlock.events();

    // Allowed: inside the roots.
    let out = airlock
        .calls()
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
        let err = airlock.calls().call(tool, args, None).await.unwrap_err();
        assert_eq!(err.code, ErrorCode::PolicyDenied, "{tool}: {err}");
        assert!(err.message.contains(says), "{tool}: {err}");
    }
    // A destructive tool needs a person; with no one to ask, it is denied and the
    // question is in the message.
    let err = airlock
        .calls()
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
    let airlock = start_with(&ws, Some(Arc::new(approver))).await;
    let out = airlock
        .calls()
        .call("mcp__p__wipe_notes", json!({"folder": "/tmp/old"}), None)
        .await
        .unwrap();
    assert!(out.preview.contains("wipe_notes"), "yes: it ran");
    answer.store(false, std::sync::atomic::Ordering::SeqCst);
    let err = airlock
        .calls()
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
    let airlock = start_with(&ws, None).await;
    let mut events = airlock.events();
    let out = airlock
        .calls()
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
    let airlock = start_with(&ws, None).await;

    // Rewrite: the server sees the policy's arguments.
    let out = airlock
        .calls()
        .call("mcp__rewrite__run", json!({"command": "deploy"}), None)
        .await
        .unwrap();
    assert!(out.preview.contains("\"dry_run\": true"), "{}", out.preview);
    assert_eq!(arrived(&ws, "rewrite")[0]["arguments"]["dry_run"], true);

    // A trapping policy: closed denies (naming the trap), open lets the call through.
    let err = airlock
        .calls()
        .call("mcp__closed__run", json!({"command": "ls"}), None)
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::PolicyDenied);
    assert!(err.message.contains("fails closed"), "{err}");
    assert!(arrived(&ws, "closed").is_empty());
    airlock
        .calls()
        .call("mcp__open__run", json!({"command": "ls"}), None)
        .await
        .unwrap();
    assert_eq!(arrived(&ws, "open").len(), 1);

    // Withheld: the call ran, its result does not leave.
    let err = airlock
        .calls()
        .call("mcp__withhold__secret_report", json!({}), None)
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::PolicyDenied);
    assert!(err.message.contains("stay inside"), "{err}");
    assert_eq!(arrived(&ws, "withhold").len(), 1);

    // Replaced: the replacement is redacted like any result.
    let out = airlock
        .calls()
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
    let airlock = start_with(&ws, None).await;
    let out = airlock
        .calls()
        .call("mcp__p__read_note", json!({"path": "/a"}), None)
        .await
        .unwrap();
    assert!(
        out.preview.contains("READ_NOTE"),
        "0.1 content ran: {}",
        out.preview
    );
    let err = airlock
        .calls()
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
    let airlock = start_with(&ws, None).await;
    let err = airlock
        .calls()
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

    // Answered yes and remembered for any arguments, for an hour: the second call runs
    // without a question, and the grant is listed with its expiry.
    let report = through_the_gateway(&ws, "remember");
    let calls = report["calls"].as_array().unwrap();
    assert!(calls.iter().all(|c| c["is_error"] == false), "{report}");
    let questions = report["questions"].as_array().unwrap();
    assert_eq!(questions.len(), 1, "{report}");
    assert!(
        questions[0]["schema"]["properties"]["remember"].is_object(),
        "{report}"
    );
    assert_eq!(arrived(&ws, "p").len(), 3);
    let (listed, _) = ws.json(&["grants", "list"], &[]);
    let approvals = listed["approvals"].as_array().unwrap();
    assert_eq!(approvals.len(), 1, "{listed}");
    assert_eq!(approvals[0]["arguments"], json!("*"), "{listed}");
    let hour_from_now = approvals[0]["expires_at"].as_i64().unwrap() / 1000
        - std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
    assert!((3500..=3600).contains(&hour_from_now), "{listed}");
}

#[tokio::test]
async fn a_remembered_approval_answers_later_calls_until_it_lapses_or_is_revoked() {
    let rules = r#"adapters = { policy = "builtin:policy" }
adapter_config = { policy = { ask_destructive = true } }"#;
    let ws = workspace(&[("p", rules)]);
    let asked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let answer: Arc<std::sync::Mutex<Approval>> =
        Arc::new(std::sync::Mutex::new(Approval::Remember {
            arguments: RememberArguments::Same,
            expires_in: None,
        }));
    let approver = {
        let (asked, answer) = (asked.clone(), answer.clone());
        move |_: &ApprovalRequest| {
            asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            *answer.lock().unwrap()
        }
    };
    let airlock = start_with(&ws, Some(Arc::new(approver))).await;
    let asked_so_far = || asked.load(std::sync::atomic::Ordering::SeqCst);
    let wipe = |args: Value| {
        let airlock = &airlock;
        async move { airlock.calls().call("mcp__p__wipe_notes", args, None).await }
    };

    // Approved and remembered for these arguments: the same arguments, in another key
    // order, run without asking.
    wipe(json!({"folder": "/tmp/a", "force": true}))
        .await
        .unwrap();
    wipe(json!({"force": true, "folder": "/tmp/a"}))
        .await
        .unwrap();
    assert_eq!(asked_so_far(), 1);
    // Other arguments ask again; this time the person declines.
    *answer.lock().unwrap() = Approval::Decline;
    let err = wipe(json!({"folder": "/tmp/b"})).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::PolicyDenied);
    assert_eq!(asked_so_far(), 2);

    // The grant is in the registry, and `airlock grants` lists and revokes it.
    let grants = airlock.access().approvals(Some("default")).unwrap();
    assert_eq!(grants.len(), 1, "{grants:?}");
    assert_eq!(
        (
            grants[0].tool.as_str(),
            grants[0].rule.as_str(),
            grants[0].expires_at
        ),
        ("wipe_notes", "ask_destructive", None)
    );
    let (listed, _) = ws.json(&["grants", "list"], &[]);
    assert_eq!(
        listed["approvals"][0]["id"],
        json!(grants[0].id),
        "{listed}"
    );
    assert_eq!(
        listed["approvals"][0]["arguments"],
        json!(r#"{"folder":"/tmp/a","force":true}"#)
    );
    let id = grants[0].id.to_string();
    let (revoked, _) = ws.json(&["grants", "revoke", &id], &[]);
    assert_eq!(revoked["revoked"], json!(true), "{revoked}");
    let again = ws.run(&["grants", "revoke", &id], &[]);
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr)
            .contains(&format!("no remembered approval with id {id}"))
    );
    let err = wipe(json!({"folder": "/tmp/a", "force": true}))
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::PolicyDenied, "revoked: it asks again");
    assert_eq!(asked_so_far(), 3);

    // Remembered for any arguments, for a moment: it covers other arguments until it lapses.
    *answer.lock().unwrap() = Approval::Remember {
        arguments: RememberArguments::Any,
        expires_in: Some(std::time::Duration::from_millis(800)),
    };
    wipe(json!({"folder": "/tmp/c"})).await.unwrap();
    wipe(json!({"folder": "/tmp/d"})).await.unwrap();
    assert_eq!(asked_so_far(), 4);
    tokio::time::sleep(std::time::Duration::from_millis(900)).await;
    *answer.lock().unwrap() = Approval::Decline;
    assert!(wipe(json!({"folder": "/tmp/e"})).await.is_err());
    assert_eq!(asked_so_far(), 5, "lapsed: it asks again");

    let folders: Vec<Value> = arrived(&ws, "p")
        .iter()
        .map(|c| c["arguments"]["folder"].clone())
        .collect();
    assert_eq!(
        folders,
        [
            json!("/tmp/a"),
            json!("/tmp/a"),
            json!("/tmp/c"),
            json!("/tmp/d")
        ]
    );
    airlock.close().await;
}
