//! `airlock servers …` against real servers: the registry round trip (stdio and HTTP),
//! tested catalogs and staleness, scopes, secrets kept out of every output and the
//! database, and bad input that changes nothing.

mod support;

use serde_json::Value;
use support::{Workspace, add_fixture, failed, fixture_cmd, ok};

const TOKEN: &str = support::SERVERS_TOKEN;

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

/// A gateway token seen by one host is kept in memory while it hears every host's
/// changes, so a request presenting it costs no round trip; removed by another host, it
/// is refused within milliseconds.
#[test]
fn tokens_kept_in_memory_follow_every_hosts_removals() {
    use airlock_host::registry::{Registry, TokenRecord};
    let (url, _, _) = support::storage_services();
    let (dir, tag) = (tempfile::tempdir().unwrap(), support::storage_tag());
    let (here, there) = (
        support::host_registry(&url, &tag, dir.path()),
        support::host_registry(&url, &tag, dir.path()),
    );
    let token = TokenRecord {
        id: "tok-1".into(),
        agent: "alice".into(),
        fingerprint: "sha256:feed".into(),
        secret_ref: "secret:none".into(),
        created_at: 0,
    };
    there.insert_token(&token).unwrap();
    let found = |registry: &Registry| {
        registry
            .token_by_fingerprint("sha256:feed")
            .unwrap()
            .map(|t| t.agent)
    };
    assert_eq!(found(&here).as_deref(), Some("alice"));
    assert!(
        support::held_within(std::time::Duration::from_secs(10), || here.hears_changes()).is_some(),
        "the host listens for changes"
    );
    // The insert's own notification may still be on its way: once it has surely
    // arrived, the answer asked again is kept.
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(found(&here).as_deref(), Some("alice"));
    // Removed behind the hosts' backs (triggers off: no notification), it is still
    // answered from memory: no round trip is made.
    support::unannounced(
        &url,
        &format!("DELETE FROM \"{tag}\".gateway_tokens WHERE id = 'tok-1'"),
    );
    assert_eq!(found(&here).as_deref(), Some("alice"), "kept in memory");
    // Put back and removed by another host, as `airlock serve tokens remove` does: heard.
    support::unannounced(
        &url,
        &format!(
            "INSERT INTO \"{tag}\".gateway_tokens (id, agent, fingerprint, secret_ref) \
             VALUES ('tok-1', 'alice', 'sha256:feed', 'secret:none')"
        ),
    );
    assert!(there.delete_token("tok-1").unwrap().is_some());
    let removed =
        support::held_within(std::time::Duration::from_secs(2), || found(&here).is_none())
            .expect("a removal made by another host is heard");
    eprintln!("heard another host's token removal after {removed:?}");
    assert!(
        removed < std::time::Duration::from_millis(500),
        "{removed:?}"
    );
}
