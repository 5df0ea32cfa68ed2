//! Session lifecycle against real peers: one session per agent and reconnects as new
//! sessions, the session limit, timeouts, cancellation and its grace period, Python
//! servers that ignore cancellations, die mid-call or write garbage, progress,
//! list-change notifications, and server-filesystem following roots changed at runtime.

mod support;

use std::time::{Duration, Instant};

use airlock_host::{Airlock, AirlockOptions, CallOptions, ErrorCode, Event, ServiceStatus};
use serde_json::{Value, json};
use support::{Workspace, python, python_fixture_entry, python_server, secret_entry, toml_str};
use tokio_util::sync::CancellationToken;

fn raw_entry(name: &str, mode: &str, extra: &str) -> String {
    format!(
        "[mcp_servers.{name}]\ncommand = {}\nargs = [{}, {}]\n{extra}\n",
        toml_str(python().display().to_string()),
        toml_str(python_server("raw_server.py").display().to_string()),
        toml_str(mode)
    )
}

#[tokio::test]
async fn each_agent_gets_its_own_session_and_reconnects_are_new_sessions() {
    let ws = Workspace::new(&python_fixture_entry("fx", ""));
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let mut events = airlock.events();
    let a = CallOptions {
        agent: "agent-a".into(),
        ..Default::default()
    };
    let b = CallOptions {
        agent: "agent-b".into(),
        ..Default::default()
    };
    airlock
        .calls()
        .call_with("mcp__fx__echo", json!({"text": "a"}), a.clone())
        .await
        .unwrap();
    airlock
        .calls()
        .call_with("mcp__fx__echo", json!({"text": "b"}), b.clone())
        .await
        .unwrap();
    let pid_a = airlock
        .services()
        .session_pid("agent-a", "fx")
        .await
        .unwrap();
    let pid_b = airlock
        .services()
        .session_pid("agent-b", "fx")
        .await
        .unwrap();
    assert_ne!(pid_a, pid_b, "agents share no connection");
    assert!(
        matches!(
            airlock.services().status()[0].status,
            ServiceStatus::Connected { sessions: 3, .. }
        ),
        "{:?}",
        airlock.services().status()
    );

    // Disconnect keeps everything; the next call reconnects as a new session.
    airlock.services().disconnect("agent-a", "fx").await;
    assert!(
        airlock
            .services()
            .session_pid("agent-a", "fx")
            .await
            .is_none()
    );
    airlock
        .calls()
        .call_with("mcp__fx__echo", json!({"text": "again"}), a.clone())
        .await
        .unwrap();
    let pid_a2 = airlock
        .services()
        .session_pid("agent-a", "fx")
        .await
        .unwrap();
    assert_ne!(pid_a, pid_a2);
    // Reset reconnects at once.
    airlock.services().reset("agent-b", "fx").await.unwrap();
    let pid_b2 = airlock
        .services()
        .session_pid("agent-b", "fx")
        .await
        .unwrap();
    assert_ne!(pid_b, pid_b2);

    let mut reconnects = 0;
    let mut called = 0;
    while let Ok(event) = events.try_recv() {
        match event {
            Event::SessionChanged {
                state,
                reconnect: true,
                ..
            } if state == "connected" => reconnects += 1,
            Event::ToolCalled { status, .. } if status == "ok" => called += 1,
            _ => {}
        }
    }
    assert_eq!(
        reconnects, 2,
        "both reconnections are reported as new sessions"
    );
    assert_eq!(called, 3);
    airlock.close().await;
    for pid in [pid_a, pid_b, pid_a2, pid_b2] {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !support::process_gone(pid) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(support::process_gone(pid), "server {pid} survived");
    }
}

#[tokio::test]
async fn the_session_limit_refuses_instead_of_evicting() {
    let ws = Workspace::new(&python_fixture_entry("fx", ""));
    let options = AirlockOptions {
        max_sessions: 1,
        ..ws.options()
    };
    let airlock = Airlock::start(ws.load(), options).await.unwrap();
    let other = CallOptions {
        agent: "other".into(),
        ..Default::default()
    };
    let err = airlock
        .calls()
        .call_with("mcp__fx__echo", json!({"text": "x"}), other.clone())
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::ServiceSessionLimit);
    assert!(err.message.contains("limit (1)"), "{}", err.message);
    // The default agent's session was not closed to make room.
    airlock
        .calls()
        .call("mcp__fx__echo", json!({"text": "still mine"}), None)
        .await
        .unwrap();
    airlock.services().disconnect("default", "fx").await;
    airlock
        .calls()
        .call_with("mcp__fx__echo", json!({"text": "now"}), other)
        .await
        .unwrap();
    airlock.close().await;
}

#[tokio::test]
async fn cancellation_waits_for_the_grace_period_then_warns() {
    let ws = Workspace::new(&raw_entry("raw", "normal", "cancel_grace_secs = 1"));
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        trigger.cancel();
    });
    let err = airlock
        .calls()
        .call_with(
            "mcp__raw__stuck",
            json!({}),
            CallOptions {
                cancel: Some(cancel),
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::Cancelled);
    // The server never answers the cancelled call: the next call waits the grace period
    // and carries a warning.
    let started = Instant::now();
    let out = airlock
        .calls()
        .call("mcp__raw__exotic", json!({}), None)
        .await
        .unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(700),
        "waited {:?}",
        started.elapsed()
    );
    assert!(
        out.warning
            .as_deref()
            .is_some_and(|w| w.contains("may still be running")),
        "{:?}",
        out.warning
    );
    // The warning is given once.
    assert!(
        airlock
            .calls()
            .call("mcp__raw__exotic", json!({}), None)
            .await
            .unwrap()
            .warning
            .is_none()
    );
    airlock.close().await;
}

#[tokio::test]
async fn a_server_that_answers_the_cancellation_ends_the_grace_early() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let ws = Workspace::new(&raw_entry(
        "raw",
        "normal",
        &format!(
            "cancel_grace_secs = 30\nenv = {{ RAW_LOG = {} }}",
            toml_str(log.path().display().to_string())
        ),
    ));
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let err = airlock
        .calls()
        .call(
            "mcp__raw__slow",
            json!({}),
            Some(Duration::from_millis(300)),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::Timeout);
    let started = Instant::now();
    let out = airlock
        .calls()
        .call("mcp__raw__exotic", json!({}), None)
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the grace ended when the server answered: {:?}",
        started.elapsed()
    );
    assert!(out.warning.is_none());
    airlock.close().await;
    // The timed-out call sent the server a cancellation naming the request.
    let received: Vec<Value> = std::fs::read_to_string(log.path())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let call_id = received
        .iter()
        .find(|m| m["method"] == "tools/call" && m["params"]["name"] == "slow")
        .unwrap()["id"]
        .clone();
    assert!(
        received.iter().any(
            |m| m["method"] == "notifications/cancelled" && m["params"]["requestId"] == call_id
        ),
        "{received:?}"
    );
    // Never repeated: exactly one tools/call for `slow`.
    assert_eq!(
        received
            .iter()
            .filter(|m| m["params"]["name"] == "slow")
            .count(),
        1
    );
}

#[tokio::test]
async fn a_slow_tool_times_out_with_the_timeout_code() {
    let ws = Workspace::new(&secret_entry("fx", ""));
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    // big_text with a huge size takes a while in Python; 10 ms is never enough.
    let err = airlock
        .calls()
        .call(
            "mcp__fx__big_text",
            json!({"size": 50_000_000}),
            Some(Duration::from_millis(10)),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::Timeout);
    assert!(err.message.contains("cancellation"), "{}", err.message);
    airlock.close().await;
}

#[tokio::test]
async fn a_server_dying_mid_call_is_reported_and_the_next_call_reconnects() {
    let ws = Workspace::new(&python_fixture_entry("fx", ""));
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let err = airlock
        .calls()
        .call("mcp__fx__die", json!({}), Some(Duration::from_secs(10)))
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::ServiceUnavailable, "{err}");
    let out = airlock
        .calls()
        .call("mcp__fx__echo", json!({"text": "back"}), None)
        .await
        .unwrap();
    assert_eq!(out.preview, "back");
    airlock.close().await;
}

#[tokio::test]
async fn garbage_on_stdout_does_not_break_the_session() {
    let ws = Workspace::new(&raw_entry("raw", "garbage", ""));
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    assert!(
        matches!(
            airlock.services().status()[0].status,
            ServiceStatus::Connected { .. }
        ),
        "{:?}",
        airlock.services().status()
    );
    let out = airlock
        .calls()
        .call("mcp__raw__exotic", json!({}), None)
        .await
        .unwrap();
    assert_eq!(out.content.len(), 3);
    airlock.close().await;
}

#[tokio::test]
async fn progress_reaches_the_caller_and_the_event_stream() {
    let ws = Workspace::new(&python_fixture_entry("fx", ""));
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let mut events = airlock.events();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let out = airlock
        .calls()
        .call_with(
            "mcp__fx__work_with_progress",
            json!({"steps": 3}),
            CallOptions {
                progress: Some(tx),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(out.preview, "done");
    assert_eq!(out.progress_seen, 3);
    let mut updates = Vec::new();
    while let Ok(u) = rx.try_recv() {
        updates.push(u);
    }
    assert_eq!(updates.len(), 3);
    assert_eq!(updates[2].progress, 3.0);
    assert_eq!(updates[2].message.as_deref(), Some("step 3 of 3"));
    let mut progress_events = 0;
    while let Ok(event) = events.try_recv() {
        if let Event::Progress { tool, .. } = event {
            assert_eq!(tool, "mcp__fx__work_with_progress");
            progress_events += 1;
        }
    }
    assert_eq!(progress_events, 3);
    airlock.close().await;
}

#[tokio::test]
async fn a_tool_list_change_refreshes_the_catalog() {
    let ws = Workspace::new(&python_fixture_entry("fx", ""));
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let mut events = airlock.events();
    assert!(
        airlock
            .catalog()
            .tools()
            .iter()
            .all(|t| t.raw_name != "sprout")
    );
    airlock
        .calls()
        .call("mcp__fx__grow", json!({"name": "sprout"}), None)
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match tokio::time::timeout(Duration::from_millis(200), events.recv()).await {
            Ok(Ok(Event::ToolsChanged { service, .. })) if service == "fx" => break,
            _ if Instant::now() > deadline => panic!("no tools_changed event"),
            _ => {}
        }
    }
    let out = airlock
        .calls()
        .call("mcp__fx__sprout", json!({}), None)
        .await
        .unwrap();
    assert_eq!(out.preview, "I am sprout");
    airlock.close().await;
}

#[tokio::test]
async fn resource_and_prompt_list_changes_are_events() {
    let ws = Workspace::new(&python_fixture_entry("fx", ""));
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let mut events = airlock.events();
    airlock
        .calls()
        .call("mcp__fx__announce_lists", json!({}), None)
        .await
        .unwrap();
    let (mut resources, mut prompts) = (false, false);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !(resources && prompts) {
        match tokio::time::timeout(Duration::from_millis(200), events.recv()).await {
            Ok(Ok(Event::ResourcesChanged { service })) if service == "fx" => resources = true,
            Ok(Ok(Event::PromptsChanged { service })) if service == "fx" => prompts = true,
            _ if Instant::now() > deadline => {
                panic!("events missing: resources {resources}, prompts {prompts}")
            }
            _ => {}
        }
    }
    airlock.close().await;
}

#[tokio::test]
async fn filesystem_server_follows_roots_changed_at_runtime() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    std::fs::write(a.path().join("in-a.txt"), "A").unwrap();
    std::fs::write(b.path().join("in-b.txt"), "B").unwrap();
    let (a_path, b_path) = (
        a.path().canonicalize().unwrap(),
        b.path().canonicalize().unwrap(),
    );
    let fixed_cwd = tempfile::tempdir().unwrap();
    let ws = Workspace::new(&format!(
        "[mcp_servers.fs]\ncommand = \"node\"\nargs = [{}]\ncwd = {}\n",
        toml_str(support::filesystem_server().display().to_string()),
        toml_str(fixed_cwd.path().display().to_string())
    ));
    let options = AirlockOptions {
        roots: vec![a_path.display().to_string()],
        ..ws.options()
    };
    let airlock = Airlock::start(ws.load(), options).await.unwrap();
    let allowed = |out: &airlock_host::CallOutput| out.preview.clone();
    // The server asks for roots after initialization; give it a moment.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = airlock
            .calls()
            .call("mcp__fs__list_allowed_directories", json!({}), None)
            .await
            .unwrap();
        if allowed(&out).contains(&a_path.display().to_string()) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "roots never applied: {}",
            allowed(&out)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let pid = airlock
        .services()
        .session_pid("default", "fs")
        .await
        .unwrap();
    airlock
        .services()
        .set_roots("default", vec![b_path.display().to_string()])
        .await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = airlock
            .calls()
            .call("mcp__fs__list_allowed_directories", json!({}), None)
            .await
            .unwrap();
        if allowed(&out).contains(&b_path.display().to_string())
            && !allowed(&out).contains(&a_path.display().to_string())
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "new roots never applied: {}",
            allowed(&out)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        airlock.services().session_pid("default", "fs").await,
        Some(pid),
        "roots changed without reconnecting"
    );
    let read = airlock
        .calls()
        .call(
            "mcp__fs__read_text_file",
            json!({"path": b_path.join("in-b.txt")}),
            None,
        )
        .await
        .unwrap();
    assert_eq!(read.preview, "B");
    airlock.close().await;
}

#[tokio::test]
async fn a_roots_change_that_moves_the_working_directory_reconnects() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let ws = Workspace::new(&python_fixture_entry("fx", ""));
    let options = AirlockOptions {
        roots: vec![a.path().display().to_string()],
        ..ws.options()
    };
    let airlock = Airlock::start(ws.load(), options).await.unwrap();
    let pid = airlock
        .services()
        .session_pid("default", "fx")
        .await
        .unwrap();
    airlock
        .services()
        .set_roots("default", vec![b.path().display().to_string()])
        .await;
    let new_pid = airlock
        .services()
        .session_pid("default", "fx")
        .await
        .unwrap();
    assert_ne!(
        pid, new_pid,
        "the server restarted in the new working directory"
    );
    let cwd = std::fs::read_link(format!("/proc/{new_pid}/cwd")).unwrap();
    assert_eq!(cwd, b.path().canonicalize().unwrap());
    airlock.close().await;
}
