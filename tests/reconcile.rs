//! Changes to the registry reach Airlock while it runs: `reconcile` takes in servers
//! added, tested, changed and removed; a running gateway offers a server added
//! meanwhile; another host follows disables, grants and definitions; an edited config
//! file is taken in, and SIGHUP reloads at once.

mod support;

use support::{Workspace, add_fixture, ok};

/// The config as `airlock serve` loads it: `ws`'s config file and its registry's services.
fn load_running(ws: &Workspace) -> airlock_host::config::Config {
    let sources = airlock_host::config::ConfigSources {
        user: None,
        project: None,
        explicit: vec![ws.config()],
    };
    let registry = ws.load().storage.registry;
    airlock_host::servers::Servers::open_at(&ws.data(), ws.dir.path(), &registry)
        .unwrap()
        .load_config(&sources, &airlock_host::config::process_env)
        .unwrap()
}

#[test]
fn reconcile_takes_in_added_tested_changed_and_removed_servers_and_keeps_the_rest() {
    use airlock_host::{Airlock, DEFAULT_AGENT};
    let ws = Workspace::new(&support::python_fixture_entry("fx", ""));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let airlock = rt
        .block_on(Airlock::start(load_running(&ws), ws.options()))
        .unwrap();
    let echo = |tool: &str| {
        rt.block_on(
            airlock
                .calls()
                .call(tool, serde_json::json!({"text": "hi"}), None),
        )
    };
    let pid_of =
        |service: &str| rt.block_on(airlock.services().session_pid(DEFAULT_AGENT, service));
    assert_eq!(echo("mcp__fx__echo").unwrap().preview, "hi");
    let first = pid_of("fx").expect("fx has a session");

    // The same definitions again: nothing changes, the live session stays.
    let same = rt.block_on(airlock.services().reconcile(&load_running(&ws).servers));
    assert!(same.is_empty(), "{same:?}");
    assert_eq!(pid_of("fx"), Some(first));

    // Added in the registry: known at once, offered once tested.
    ok(&add_fixture(&ws, "py23", &[]));
    let added = rt.block_on(airlock.services().reconcile(&load_running(&ws).servers));
    assert_eq!(added.added, ["py23"], "{added:?}");
    assert!(
        !airlock
            .catalog()
            .tools()
            .iter()
            .any(|t| t.service == "py23")
    );
    ok(&ws.run(&["servers", "test", "py23"], &[]));
    let tested = rt.block_on(airlock.services().reconcile(&load_running(&ws).servers));
    assert_eq!(tested.tested, ["py23"], "{tested:?}");
    let again = rt.block_on(airlock.services().reconcile(&load_running(&ws).servers));
    assert!(
        again.is_empty(),
        "a registry service loads the same each time: {again:?}"
    );
    assert_eq!(echo("mcp__py23__echo").unwrap().preview, "hi");
    assert_eq!(
        pid_of("fx"),
        Some(first),
        "an unrelated service keeps its session"
    );

    // Its definition edited: its session closes and the next call runs the new one.
    ws.rewrite(&support::python_fixture_entry(
        "fx",
        "env = { RELOADED = \"1\" }",
    ));
    let changed = rt.block_on(airlock.services().reconcile(&load_running(&ws).servers));
    assert_eq!(changed.changed, ["fx"], "{changed:?}");
    // A config-file service is cataloged by connecting: a new server process.
    assert_ne!(pid_of("fx"), Some(first));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !support::process_gone(first) {
        assert!(
            std::time::Instant::now() < deadline,
            "the old server process lives on"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(echo("mcp__fx__echo").unwrap().preview, "hi");
    let env = rt
        .block_on(
            airlock
                .calls()
                .call("mcp__fx__env_names", serde_json::json!({}), None),
        )
        .unwrap();
    assert!(env.preview.contains("RELOADED"), "{}", env.preview);

    // Removed: its tools leave and a call to one is refused.
    ok(&ws.run(&["servers", "remove", "py23"], &[]));
    let removed = rt.block_on(airlock.services().reconcile(&load_running(&ws).servers));
    assert_eq!(removed.removed, ["py23"], "{removed:?}");
    assert!(
        !airlock
            .catalog()
            .tools()
            .iter()
            .any(|t| t.service == "py23")
    );
    assert!(
        airlock
            .services()
            .status()
            .iter()
            .all(|s| s.service != "py23")
    );
    assert!(echo("mcp__py23__echo").is_err());
    rt.block_on(airlock.close());
}

/// Counts the `tools/list_changed` notifications a client receives.
#[derive(Clone, Default)]
struct ListChanges(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl rmcp::ClientHandler for ListChanges {
    async fn on_tool_list_changed(
        &self,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// `airlock serve` over stdio in `ws` with `args`, and an MCP client on it that counts
/// the `tools/list_changed` it hears.
async fn stdio_gateway(
    ws: &Workspace,
    args: &[&str],
) -> (
    tokio::process::Child,
    rmcp::service::RunningService<rmcp::RoleClient, ListChanges>,
    ListChanges,
) {
    let mut child = support::stdio_gateway(ws, args);
    let transport = rmcp::transport::async_rw::AsyncRwTransport::new_client(
        child.stdout.take().unwrap(),
        child.stdin.take().unwrap(),
    );
    let heard = ListChanges::default();
    let client = rmcp::serve_client(heard.clone(), transport).await.unwrap();
    (child, client, heard)
}

/// The scenario: `airlock serve` is running for an MCP client when the user adds
/// and tests a server; the client hears `tools/list_changed` and can call it, without a
/// restart. Removing it withdraws its tools the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_gateway_offers_a_server_added_meanwhile_and_withdraws_it_when_removed() {
    use std::time::{Duration, Instant};
    let ws = Workspace::new(&support::demo_entry("demo", ""));
    let (mut child, client, heard) = stdio_gateway(&ws, &["serve", "--reload-secs", "0.2"]).await;
    let names = async || -> Vec<String> {
        let tools = client.list_all_tools().await.unwrap();
        tools.iter().map(|t| t.name.to_string()).collect()
    };
    assert!(names().await.contains(&"mcp__demo__echo".to_string()));
    assert!(!names().await.iter().any(|n| n.starts_with("mcp__py23__")));

    let before = heard.0.load(std::sync::atomic::Ordering::SeqCst);
    tokio::task::block_in_place(|| {
        ok(&add_fixture(&ws, "py23", &[]));
        ok(&ws.run(&["servers", "test", "py23"], &[]));
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    while !names().await.contains(&"mcp__py23__echo".to_string()) {
        assert!(
            Instant::now() < deadline,
            "py23 never offered: {:?}",
            names().await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    while heard.0.load(std::sync::atomic::Ordering::SeqCst) == before {
        assert!(Instant::now() < deadline, "no tools/list_changed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let args = serde_json::json!({"text": "hi"})
        .as_object()
        .cloned()
        .unwrap();
    let echoed = client
        .call_tool(rmcp::model::CallToolRequestParams::new("mcp__py23__echo").with_arguments(args))
        .await
        .unwrap();
    assert_eq!(echoed.is_error, Some(false), "{echoed:?}");

    let before = heard.0.load(std::sync::atomic::Ordering::SeqCst);
    tokio::task::block_in_place(|| ok(&ws.run(&["servers", "remove", "py23"], &[])));
    let deadline = Instant::now() + Duration::from_secs(10);
    while names().await.iter().any(|n| n.starts_with("mcp__py23__"))
        || heard.0.load(std::sync::atomic::Ordering::SeqCst) == before
    {
        assert!(
            Instant::now() < deadline,
            "py23 never withdrawn: {:?}",
            names().await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(names().await.contains(&"mcp__demo__echo".to_string()));
    client.cancel().await.unwrap();
    let _ = tokio::time::timeout(Duration::from_secs(15), child.wait()).await;
}

/// A run-time disable and a grant made on one host reach another host sharing the
/// registry at its next look (`take_in_changes`), a disable outlives a restart, and a
/// server added elsewhere is reported so the host reloads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_host_follows_run_time_disables_grants_and_definitions() {
    use airlock_host::{Airlock, ErrorCode, Event, ServiceStatus};
    let ws = Workspace::new(&support::python_fixture_entry("fx", ""));
    let a = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let b = Airlock::start(ws.load(), ws.options()).await.unwrap();
    assert!(
        !b.take_in_changes().await.unwrap(),
        "the first look only records"
    );
    let mut events = b.events();
    let fx_status = |airlock: &Airlock| {
        airlock
            .services()
            .status()
            .into_iter()
            .find(|r| r.service == "fx")
            .unwrap()
            .status
    };
    let echo = |airlock: &Airlock| {
        let airlock = airlock.clone();
        async move {
            airlock
                .calls()
                .call("mcp__fx__echo", serde_json::json!({"text": "hi"}), None)
                .await
        }
    };
    echo(&b).await.unwrap();

    // Disabled on A: B closes its session and refuses the service after its next look.
    a.services().set_enabled("fx", false).await.unwrap();
    assert!(!b.take_in_changes().await.unwrap(), "no definition moved");
    assert_eq!(fx_status(&b), ServiceStatus::Disabled);
    let refused = echo(&b).await.unwrap_err();
    assert_eq!(refused.code, ErrorCode::ServiceUnavailable, "{refused}");
    let mut heard_tools_gone = false;
    while let Ok(event) = events.try_recv() {
        heard_tools_gone |=
            matches!(event, Event::ToolsChanged { ref service, tools: 0 } if service == "fx");
    }
    assert!(heard_tools_gone, "B's clients were not told the tools went");
    // A host started now starts with it disabled.
    let c = Airlock::start(ws.load(), ws.options()).await.unwrap();
    assert_eq!(fx_status(&c), ServiceStatus::Disabled);
    c.close().await;

    // Enabled again on A: B offers it again.
    a.services().set_enabled("fx", true).await.unwrap();
    assert!(!b.take_in_changes().await.unwrap());
    assert_ne!(fx_status(&b), ServiceStatus::Disabled);
    echo(&b).await.unwrap();

    // A grant given on A is an event on B (the gateway turns it into list_changed).
    a.access().grant("alice", "fx").unwrap();
    b.take_in_changes().await.unwrap();
    let mut heard_grant = false;
    while let Ok(event) = events.try_recv() {
        heard_grant |= matches!(event, Event::GrantsChanged { ref agent, ref service, granted: true } if agent == "alice" && service == "fx");
    }
    assert!(heard_grant, "B never heard of alice's grant");

    // A server added by another process moves the definitions: B is told to reload.
    tokio::task::block_in_place(|| ok(&add_fixture(&ws, "py24", &[])));
    assert!(b.take_in_changes().await.unwrap());
    assert!(!b.take_in_changes().await.unwrap(), "told once");
    a.close().await;
    b.close().await;
}

/// Two gateways on one registry: a grant given and revoked with the CLI reaches a
/// client of either gateway as `tools/list_changed` and a changed tool list, well within
/// the default look interval's reach.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_made_elsewhere_reaches_the_clients_of_every_gateway() {
    use rmcp::ServiceExt;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    use std::sync::atomic::Ordering;
    use std::time::{Duration, Instant};
    let ws = Workspace::new(&support::python_fixture_entry("fx", ""));
    let (made, out) = ws.json(&["--agent", "alice", "serve", "tokens", "add"], &[]);
    assert!(out.status.success(), "{made}");
    let token = made["token"].as_str().unwrap().to_string();
    let replicas = [
        support::HttpGateway::start(&ws, &["--require-token", "--access", "grants"]),
        support::HttpGateway::start(&ws, &["--require-token", "--access", "grants"]),
    ];
    let mut clients = Vec::new();
    for replica in &replicas {
        let heard = ListChanges::default();
        let transport = StreamableHttpClientTransport::from_config(
            StreamableHttpClientTransportConfig::with_uri(replica.url.clone())
                .auth_header(token.clone()),
        );
        clients.push((heard.clone(), heard.serve(transport).await.unwrap()));
    }
    let offers_fx =
        async |client: &rmcp::service::RunningService<rmcp::RoleClient, ListChanges>| {
            client
                .list_all_tools()
                .await
                .unwrap()
                .iter()
                .any(|t| t.name == "mcp__fx__echo")
        };
    for (_, client) in &clients {
        assert!(!offers_fx(client).await, "not granted yet");
    }
    for (command, granted) in [("add", true), ("remove", false)] {
        let before: Vec<usize> = clients
            .iter()
            .map(|(h, _)| h.0.load(Ordering::SeqCst))
            .collect();
        let started = Instant::now();
        tokio::task::block_in_place(|| {
            ok(&ws.run(&["--agent", "alice", "grants", command, "fx"], &[]))
        });
        for ((heard, client), before) in clients.iter().zip(before) {
            while heard.0.load(Ordering::SeqCst) == before {
                assert!(
                    started.elapsed() < Duration::from_secs(10),
                    "grants {command}: no tools/list_changed"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            assert_eq!(offers_fx(client).await, granted, "grants {command}");
        }
        eprintln!(
            "grants {command}: every client heard within {:?}",
            started.elapsed()
        );
    }
    for (_, client) in clients {
        client.cancel().await.unwrap();
    }
}

/// A config file edited while `airlock serve` runs is taken in at the next look; with
/// looks off (`--reload-secs 0`), SIGHUP takes it in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_config_file_is_taken_in_and_sighup_reloads_at_once() {
    use std::time::{Duration, Instant};
    for flags in [&[][..], &["--reload-secs", "0"][..]] {
        let first = support::demo_entry("demo", "");
        let ws = Workspace::new(&first);
        let mut args = vec!["serve"];
        args.extend_from_slice(flags);
        let (mut child, client, heard) = stdio_gateway(&ws, &args).await;
        let offers_fx = async || {
            client
                .list_all_tools()
                .await
                .unwrap()
                .iter()
                .any(|t| t.name == "mcp__fx__echo")
        };
        assert!(!offers_fx().await);
        ws.rewrite(&format!(
            "{first}\n{}",
            support::python_fixture_entry("fx", "")
        ));
        if !flags.is_empty() {
            nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(child.id().unwrap() as i32),
                nix::sys::signal::Signal::SIGHUP,
            )
            .unwrap();
        }
        let started = Instant::now();
        while heard.0.load(std::sync::atomic::Ordering::SeqCst) == 0 || !offers_fx().await {
            // A bound for a loaded 2-core machine (the server starts and is cataloged
            // meanwhile); the loop ends as soon as the client hears the change.
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{flags:?}: the edited file was never taken in"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        client.cancel().await.unwrap();
        let _ = tokio::time::timeout(Duration::from_secs(15), child.wait()).await;
    }
}
