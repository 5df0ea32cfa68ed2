//! `airlock servers …` against real servers: the registry round trip (stdio and HTTP),
//! tested catalogs and staleness, scopes, secrets kept out of every output and the
//! database, and bad input that changes nothing.

mod support;

use serde_json::Value;
use support::{Workspace, python, python_server};

const TOKEN: &str = "tok-registry-5f1c9a77e2";

fn fixture_cmd() -> Vec<String> {
    vec![
        python().display().to_string(),
        python_server("fixture_server.py").display().to_string(),
    ]
}

fn ok(out: &std::process::Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "airlock failed: {}\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn failed(out: &std::process::Output) -> String {
    assert!(
        !out.status.success(),
        "expected a failure, got success:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn add_fixture(ws: &Workspace, name: &str, extra: &[&str]) -> std::process::Output {
    let cmd = fixture_cmd();
    let env = format!("SERVICE_TOKEN={TOKEN}");
    let mut args = vec!["servers", "add", name, "--env", &env];
    args.extend_from_slice(extra);
    args.push("--");
    args.extend(cmd.iter().map(String::as_str));
    ws.run(&args, &[])
}

fn listing(ws: &Workspace) -> Vec<Value> {
    let (v, out) = ws.json(&["servers", "list"], &[]);
    ok(&out);
    v["servers"].as_array().cloned().unwrap_or_default()
}

fn entry<'a>(list: &'a [Value], name: &str) -> &'a Value {
    list.iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("{name} not listed: {list:?}"))
}

fn tool_names(ws: &Workspace) -> Vec<String> {
    let (v, out) = ws.json(&["tools"], &[]);
    ok(&out);
    v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn stdio_round_trip_with_tested_catalog_staleness_and_a_secret_that_never_leaks() {
    let ws = Workspace::new("");
    ok(&add_fixture(&ws, "fx", &["--label", "Fixture"]));

    // Added but untested: listed from the registry, no tools offered yet.
    let list = listing(&ws);
    let fx = entry(&list, "fx");
    assert_eq!(fx["source"], "registry:user");
    assert_eq!(fx["catalog"], "untested");
    assert!(tool_names(&ws).is_empty());
    let (status, _) = ws.json(&["status"], &[]);
    assert_eq!(status["services"][0]["state"], "untested", "{status}");
    assert!(
        status["services"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("airlock servers test fx")
    );

    // Adding the same name in the same scope is refused and changes nothing.
    let again = failed(&add_fixture(&ws, "fx", &[]));
    assert!(
        again.contains("already exists in the user scope"),
        "{again}"
    );

    // Test: verified, protocol, identity, tools; none run.
    let text = ok(&ws.run(&["servers", "test", "fx"], &[]));
    assert!(text.contains("verified: yes"), "{text}");
    assert!(text.contains("protocol: 2025-"), "{text}");
    assert!(text.contains("leak_secret"), "{text}");
    let (report, _) = ws.json(&["servers", "test", "fx"], &[]);
    assert_eq!(report["test"]["verified"], true);
    assert!(report["test"]["tools"].as_array().unwrap().len() >= 10);
    assert_eq!(entry(&listing(&ws), "fx")["catalog"], "tested");
    let tools = tool_names(&ws);
    assert!(
        tools.iter().any(|t| t.ends_with("leak_secret")),
        "{tools:?}"
    );

    // The secret reaches the real server, and is redacted from what comes back.
    let leak = tools.iter().find(|t| t.ends_with("leak_secret")).unwrap();
    let (call, out) = ws.json(&["call", leak], &[]);
    assert_eq!(call["ok"], true, "{call}");
    assert!(call["redacted"] == true, "{call}");
    let all_output = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !all_output.contains(TOKEN),
        "the secret leaked: {all_output}"
    );
    assert!(
        call["text"]
            .as_str()
            .unwrap()
            .contains("connected with token=")
    );
    // The retained result is in the registry's index, owned by the calling agent.
    let registry = ws.registry();
    let indexed = registry.results("fx", "default").unwrap();
    assert_eq!(indexed[0].output_id, call["output_id"].as_str().unwrap());
    assert!(indexed[0].redacted);
    drop(registry);
    let (got, _) = ws.json(&["servers", "get", "fx"], &[]);
    assert_eq!(got["server"]["env"]["SERVICE_TOKEN"], "••••••", "{got}");
    assert_eq!(got["catalog"]["state"], "tested");

    // A label change keeps the catalog; a launch change makes it stale.
    ok(&ws.run(&["servers", "edit", "fx", "--label", "Renamed"], &[]));
    assert_eq!(entry(&listing(&ws), "fx")["catalog"], "tested");
    assert!(!tool_names(&ws).is_empty());
    // A blank secret edit keeps the stored value (and the catalog).
    ok(&ws.run(&["servers", "edit", "fx", "--env", "SERVICE_TOKEN="], &[]));
    let (call, _) = ws.json(&["call", leak], &[]);
    assert_eq!(call["redacted"], true, "the stored secret was kept: {call}");
    assert_eq!(entry(&listing(&ws), "fx")["catalog"], "tested");
    ok(&ws.run(&["servers", "edit", "fx", "--env", "MODE=fast"], &[]));
    assert_eq!(entry(&listing(&ws), "fx")["catalog"], "stale");
    assert!(
        tool_names(&ws).is_empty(),
        "a stale catalog offers no tools"
    );
    ok(&ws.run(&["servers", "test", "fx"], &[]));
    assert!(!tool_names(&ws).is_empty());

    // Disable: stale, and status says disabled; enable needs a new test.
    ok(&ws.run(&["servers", "disable", "fx"], &[]));
    let fx = entry(&listing(&ws), "fx").clone();
    assert_eq!(fx["enabled"], false);
    assert_eq!(fx["catalog"], "stale");
    let (status, _) = ws.json(&["status"], &[]);
    assert_eq!(status["services"][0]["state"], "disabled");
    // Enabling again does not bring the old catalog back.
    ok(&ws.run(&["servers", "enable", "fx"], &[]));
    assert_eq!(entry(&listing(&ws), "fx")["catalog"], "stale");
    ok(&ws.run(&["servers", "disable", "fx"], &[]));
    ok(&ws.run(&["servers", "enable", "fx"], &[]));
    assert!(tool_names(&ws).is_empty());
    ok(&ws.run(&["servers", "test", "fx"], &[]));
    assert!(!tool_names(&ws).is_empty());

    // The secret is nowhere in the data directory except the 0600 secrets file.
    for file in support::files_under(&ws.data()) {
        let Some(bytes) = support::file_bytes(&file) else {
            continue;
        };
        let holds = bytes.windows(TOKEN.len()).any(|w| w == TOKEN.as_bytes());
        let is_store = file.ends_with("secrets/secrets.json");
        assert_eq!(holds, is_store, "{}", file.display());
        if is_store {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
    }

    // Remove: gone from the list, the store and the tools.
    ok(&ws.run(&["servers", "remove", "fx"], &[]));
    assert!(listing(&ws).is_empty());
    assert!(tool_names(&ws).is_empty());
    let store = std::fs::read_to_string(ws.data().join("secrets/secrets.json")).unwrap();
    assert!(!store.contains(TOKEN), "remove deletes the secret");
}

#[test]
fn http_round_trip_on_a_real_streamable_server() {
    let (_server, port) = support::everything_http("streamableHttp");
    let ws = Workspace::new("");
    let url = format!("http://127.0.0.1:{port}/mcp");
    let key = "X-Api-Key: hdr-secret-81d0c2";
    ok(&ws.run(
        &[
            "servers",
            "add",
            "ev",
            "--transport",
            "http",
            &url,
            "--header",
            key,
        ],
        &[],
    ));
    let (got, _) = ws.json(&["servers", "get", "ev"], &[]);
    assert_eq!(got["server"]["type"], "http");
    assert_eq!(got["server"]["headers"]["X-Api-Key"], "••••••");
    let (report, out) = ws.json(&["servers", "test", "ev"], &[]);
    ok(&out);
    assert_eq!(report["test"]["verified"], true);
    assert_eq!(report["test"]["server"]["transport"], "streamable-http");
    let tools = tool_names(&ws);
    let echo = tools
        .iter()
        .find(|t| t.ends_with("echo"))
        .expect("echo tool");
    let (call, _) = ws.json(&["call", echo, "--args", r#"{"message":"hi"}"#], &[]);
    assert_eq!(call["ok"], true, "{call}");
    ok(&ws.run(&["servers", "disable", "ev"], &[]));
    assert!(tool_names(&ws).is_empty());
    ok(&ws.run(&["servers", "remove", "ev"], &[]));
    assert!(listing(&ws).is_empty());
}

#[test]
fn scopes_sources_and_refusing_to_guess() {
    let ws = Workspace::new(&support::python_fixture_entry("fromfile", ""));
    ok(&add_fixture(&ws, "both", &[]));
    ok(&add_fixture(&ws, "both", &["--scope", "project"]));
    let list = listing(&ws);
    let both = entry(&list, "both");
    assert_eq!(both["source"], "registry:project", "project wins: {both}");
    assert_eq!(both["overrides"][0], "registry:user");
    assert!(
        entry(&list, "fromfile")["source"]
            .as_str()
            .unwrap()
            .ends_with("airlock.toml")
    );
    let guess = failed(&ws.run(&["servers", "remove", "both"], &[]));
    assert!(guess.contains("--scope user or --scope project"), "{guess}");
    assert_eq!(listing(&ws).len(), 2, "nothing removed");
    let file_owned = failed(&ws.run(&["servers", "disable", "fromfile"], &[]));
    assert!(file_owned.contains("airlock.toml"), "{file_owned}");
    ok(&ws.run(&["servers", "remove", "both", "--scope", "project"], &[]));
    assert_eq!(entry(&listing(&ws), "both")["source"], "registry:user");
    // A file server can be tested too; its catalog is then used without connecting.
    ok(&ws.run(&["servers", "test", "fromfile"], &[]));
    assert_eq!(entry(&listing(&ws), "fromfile")["catalog"], "tested");
}

#[test]
fn bad_input_names_the_item_and_changes_nothing() {
    let ws = Workspace::new("");
    ok(&add_fixture(&ws, "keep", &[]));
    let before = listing(&ws);
    let store_before = std::fs::read(ws.data().join("secrets/secrets.json")).unwrap();
    let cmd = fixture_cmd();
    let oversize = format!("API_TOKEN={}", "x".repeat(2561));
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![
                "servers",
                "add",
                "rel",
                "--cwd",
                "relative/dir",
                "--",
                &cmd[0],
            ],
            "\"cwd\" must be an absolute path",
        ),
        (
            vec!["servers", "add", "big", "--env", &oversize, "--", &cmd[0]],
            "2561 bytes; the limit is 2560",
        ),
        (
            vec![
                "servers",
                "add",
                "empty",
                "--env",
                "API_TOKEN=",
                "--",
                &cmd[0],
            ],
            "is empty",
        ),
        (
            vec!["servers", "add", "bad name!", "--", &cmd[0]],
            "invalid server name",
        ),
        (
            vec!["servers", "add", "nocmd"],
            "give the command after `--`",
        ),
        (
            vec!["servers", "add", "web", "--transport", "http", "ftp://x"],
            "must start with http:// or https://",
        ),
        (
            vec![
                "servers",
                "add",
                "web",
                "--transport",
                "http",
                "http://x",
                "--header",
                "nocolon",
            ],
            "expected \"Name: value\"",
        ),
        (
            vec!["servers", "add", "keep", "--", &cmd[0]],
            "already exists in the user scope",
        ),
        (
            vec!["servers", "edit", "keep", "--env", &oversize],
            "2561 bytes",
        ),
        (
            vec!["servers", "edit", "keep", "--unset", "NOPE"],
            "has no env \"NOPE\"",
        ),
        (vec!["servers", "test", "nope"], "no server named \"nope\""),
        (
            vec!["servers", "add", "t", "--tool-timeout", "0", "--", &cmd[0]],
            "--tool-timeout must be a positive number",
        ),
    ];
    for (args, expected) in cases {
        let text = failed(&ws.run(&args, &[]));
        assert!(
            text.contains(expected),
            "{args:?}: expected {expected:?} in:\n{text}"
        );
    }
    assert_eq!(listing(&ws), before, "the registry is unchanged");
    assert_eq!(
        std::fs::read(ws.data().join("secrets/secrets.json")).unwrap(),
        store_before,
        "the secret store is unchanged"
    );

    // A malformed config file is an error naming the file; the registry is untouched.
    ws.rewrite("[mcp_servers.broken]\ncommand = 5\n");
    let text = failed(&ws.run(&["servers", "list"], &[]));
    assert!(
        text.contains("broken") && text.contains("airlock.toml"),
        "{text}"
    );
    ws.rewrite("");
    assert_eq!(listing(&ws), before);
}

#[test]
fn library_refuses_nul_secrets_without_writing() {
    use airlock_host::registry::Scope;
    use airlock_host::servers::{Draft, DraftTransport, GivenValue, Servers};
    let dir = tempfile::tempdir().unwrap();
    let servers = Servers::open(&dir.path().join("data"), dir.path()).unwrap();
    let draft = Draft {
        name: "nul".into(),
        scope: Scope::User,
        label: None,
        description: None,
        transport: DraftTransport::Stdio {
            command: "node".into(),
            args: vec![],
            env: [(
                "API_TOKEN".to_string(),
                GivenValue {
                    value: "a\0b".into(),
                    secret: true,
                },
            )]
            .into(),
        },
        cwd: None,
        enabled: true,
        startup_timeout_secs: None,
        tool_timeout_secs: None,
        repair: vec![],
        origin: "test".into(),
    };
    let e = servers.add(draft, &|_| None).unwrap_err().to_string();
    assert!(e.contains("API_TOKEN") && e.contains("NUL"), "{e}");
    assert!(servers.registry().services("").unwrap().is_empty());
    assert!(!dir.path().join("data/secrets/secrets.json").exists());
}

/// Runs `airlock` in folder `cwd` with the data directory `data`.
fn run_in(
    cwd: &std::path::Path,
    data: &std::path::Path,
    args: &[&str],
    envs: &[(&str, &str)],
) -> std::process::Output {
    let mut cmd = std::process::Command::new(support::airlock_bin());
    cmd.arg("--data-dir").arg(data).args(args).current_dir(cwd);
    cmd.env("AIRLOCK_CONFIG", cwd.join("no-user-config.toml"));
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

#[test]
fn catalogs_are_kept_per_launch_and_a_lost_variable_marks_only_its_server() {
    let root = tempfile::tempdir().unwrap();
    let data = root.path().join("data");
    let (a, b) = (root.path().join("a"), root.path().join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let cmd = fixture_cmd();
    // The same name in two projects, launched differently.
    for (dir, mode) in [(&a, "MODE=a"), (&b, "MODE=b")] {
        let mut args = vec![
            "servers", "add", "db", "--scope", "project", "--env", mode, "--",
        ];
        args.extend(cmd.iter().map(String::as_str));
        ok(&run_in(dir, &data, &args, &[]));
        ok(&run_in(dir, &data, &["servers", "test", "db"], &[]));
    }
    for dir in [&a, &b] {
        let out = run_in(dir, &data, &["--json", "servers", "list"], &[]);
        let list: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            list["servers"][0]["catalog"],
            "tested",
            "{}: {list}",
            dir.display()
        );
    }

    // A ${VAR} that resolved when the server was added but is gone now: that server
    // needs repair, naming the variable; the others still load and work.
    let mut args = vec!["servers", "add", "tpl", "--"];
    args.extend(cmd.iter().map(String::as_str));
    args.push("${TPL_EXTRA_ARG}");
    ok(&run_in(&a, &data, &args, &[("TPL_EXTRA_ARG", "--verbose")]));
    let out = run_in(&a, &data, &["--json", "servers", "list"], &[]);
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let tpl = list["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "tpl")
        .unwrap()
        .clone();
    assert!(tpl["repair"].to_string().contains("TPL_EXTRA_ARG"), "{tpl}");
    let out = run_in(
        &a,
        &data,
        &[
            "--json",
            "call",
            "mcp__db__echo",
            "--args",
            r#"{"text":"still here"}"#,
        ],
        &[],
    );
    let call: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(call["text"], "still here", "{call}");
}

/// How many rows of `table` the registry keeps for service `name`.
fn rows_for(ws: &Workspace, table: &str, name: &str) -> i64 {
    ws.registry_count(&format!(
        "SELECT count(*) FROM {table} WHERE service = '{name}'"
    ))
}

#[test]
fn removing_a_server_takes_its_grants_approvals_namespace_and_catalog() {
    let ws = Workspace::new("");
    ok(&add_fixture(&ws, "fx", &[]));
    ok(&ws.run(&["servers", "test", "fx"], &[]));
    // Listing its tools names them, freezing its namespace.
    assert!(!tool_names(&ws).is_empty());
    ok(&ws.run(&["--agent", "alice", "grants", "add", "fx"], &[]));
    // A remembered approval (PostgreSQL keeps the globs' regexes beside them).
    let remote = std::env::var("AIRLOCK_TEST_STORAGE").as_deref() == Ok("remote");
    ws.registry_sql(if remote {
        "INSERT INTO approvals (agent, service, tool, arguments, plugin, rule, tool_re, arguments_re)
         VALUES ('alice', 'fx', 'echo', '{}', 'builtin:policy', 'ask-all', '^echo$', '^\\{\\}$')"
    } else {
        "INSERT INTO approvals (agent, service, tool, arguments, plugin, rule)
         VALUES ('alice', 'fx', 'echo', '{}', 'builtin:policy', 'ask-all')"
    });
    let (held, out) = ws.json(&["--agent", "alice", "grants", "list"], &[]);
    ok(&out);
    assert_eq!(held["services"], serde_json::json!(["fx"]), "{held}");
    assert_eq!(held["approvals"].as_array().unwrap().len(), 1, "{held}");
    assert_eq!(rows_for(&ws, "namespaces", "fx"), 1);
    assert_eq!(rows_for(&ws, "catalogs", "fx"), 1);

    // Removed, then added again under the same name: a new server, holding nothing of
    // the old one's.
    ok(&ws.run(&["servers", "remove", "fx"], &[]));
    for table in ["grants", "approvals", "namespaces", "catalogs"] {
        assert_eq!(
            rows_for(&ws, table, "fx"),
            0,
            "{table} kept rows of a removed server"
        );
    }
    ok(&add_fixture(&ws, "fx", &[]));
    let (held, out) = ws.json(&["--agent", "alice", "grants", "list"], &[]);
    ok(&out);
    assert_eq!(held["services"], serde_json::json!([]), "{held}");
    assert_eq!(held["approvals"], serde_json::json!([]), "{held}");
}

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
    let mut child = tokio::process::Command::new(support::airlock_bin())
        .args(support::serve_args(ws, args))
        .current_dir(ws.dir.path())
        .env("AIRLOCK_CONFIG", ws.dir.path().join("no-user-config.toml"))
        .env("AIRLOCK_PLUGIN_CACHE", support::plugin_cache())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let transport = rmcp::transport::async_rw::AsyncRwTransport::new_client(
        child.stdout.take().unwrap(),
        child.stdin.take().unwrap(),
    );
    let heard = ListChanges::default();
    let client = rmcp::serve_client(heard.clone(), transport).await.unwrap();
    (child, client, heard)
}

/// The issue's scenario: `airlock serve` is running for an MCP client when the user adds
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
            assert!(
                started.elapsed() < Duration::from_secs(15),
                "{flags:?}: the edited file was never taken in"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        client.cancel().await.unwrap();
        let _ = tokio::time::timeout(Duration::from_secs(15), child.wait()).await;
    }
}
