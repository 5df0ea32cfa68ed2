//! `airlock import` on fixture files of every supported client (Claude Code, Cursor,
//! Codex, Gemini, VS Code, Muse Code), including malformed ones: a preview that changes
//! nothing and masks secrets, a selective apply, repair marks, expiry, and a real server
//! imported, tested and called.

mod support;

use std::path::{Path, PathBuf};

use serde_json::Value;
use support::{Workspace, python, python_server};

const FIXTURE_SECRET: &str = "imp-secret-44c1b0a9";

fn fixture(name: &str) -> PathBuf {
    support::root().join("tests/fixtures/import").join(name)
}

fn copy(from: &str, to: &Path) {
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    std::fs::copy(fixture(from), to).unwrap();
}

/// A home and a workspace laid out like a machine with every client installed.
fn machine(ws: &Workspace) -> (PathBuf, PathBuf) {
    let home = ws.dir.path().join("home");
    let work = ws.dir.path().join("project");
    std::fs::create_dir_all(&work).unwrap();
    let claude = std::fs::read_to_string(fixture("claude-code.home.claude.json"))
        .unwrap()
        .replace("__WORKSPACE__", &work.display().to_string());
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join(".claude.json"), claude).unwrap();
    copy("claude-code.workspace.mcp.json", &work.join(".mcp.json"));
    copy("cursor.home.mcp.json", &home.join(".cursor/mcp.json"));
    copy("codex.config.toml", &home.join(".codex/config.toml"));
    copy(
        "gemini.home.settings.json",
        &home.join(".gemini/settings.json"),
    );
    copy(
        "gemini.workspace.settings.json",
        &work.join(".gemini/settings.json"),
    );
    copy("vscode.workspace.mcp.json", &work.join(".vscode/mcp.json"));
    copy(
        "muse-code.home.settings.json",
        &home.join(".muse/settings.json"),
    );
    copy(
        "muse-code.workspace.settings.json",
        &work.join(".muse/settings.json"),
    );
    // A Cursor project file naming a real server, with its secret by env reference.
    let mut cursor: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("cursor.workspace.mcp.json")).unwrap(),
    )
    .unwrap();
    let real = serde_json::json!({"realfx": {
        "command": python(),
        "args": [python_server("fixture_server.py")],
        "env": {"SERVICE_TOKEN": "${IMPORT_FIXTURE_TOKEN}", "MISSING_TOKEN_REF": "${NOT_SET_ANYWHERE}"},
    }, "realfx2": {
        "command": python(),
        "args": [python_server("fixture_server.py")],
        "env": {"SERVICE_TOKEN": "${IMPORT_FIXTURE_TOKEN}"},
    }});
    for (name, entry) in real.as_object().unwrap() {
        cursor["mcpServers"][name] = entry.clone();
    }
    std::fs::create_dir_all(work.join(".cursor")).unwrap();
    std::fs::write(work.join(".cursor/mcp.json"), cursor.to_string()).unwrap();
    (home, work)
}

fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<_> = support::files_under(dir)
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect();
    files.sort();
    files
}

fn import(
    ws: &Workspace,
    home: &Path,
    work: &Path,
    extra: &[&str],
) -> (Value, std::process::Output) {
    let work = work.display().to_string();
    let mut args = vec!["import", "--workspace", &work];
    args.extend_from_slice(extra);
    let home = home.display().to_string();
    ws.json(
        &args,
        &[
            ("HOME", &home),
            ("IMPORT_FIXTURE_TOKEN", FIXTURE_SECRET),
            ("GITHUB_TOKEN", "ghp_fromenvEXAMPLE0123456789abcdefABCD"),
        ],
    )
}

#[test]
fn preview_then_apply_from_every_client() {
    let ws = Workspace::new("");
    let (home, work) = machine(&ws);
    let before = (snapshot(&home), snapshot(&work));

    let (preview, out) = import(&ws, &home, &work, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let candidates = preview["candidates"].as_array().unwrap();
    let by_name = |n: &str| {
        candidates
            .iter()
            .find(|c| c["name"] == n)
            .unwrap_or_else(|| panic!("{n} not in the preview: {stdout}"))
            .clone()
    };
    let clients: std::collections::BTreeSet<&str> = candidates
        .iter()
        .map(|c| c["client"].as_str().unwrap())
        .collect();
    assert_eq!(
        clients.into_iter().collect::<Vec<_>>(),
        [
            "claude-code",
            "codex",
            "cursor",
            "gemini",
            "muse-code",
            "vscode"
        ]
    );
    // Secrets are masked in the preview; credentials typed into args are scrubbed.
    for secret in [
        "BSA-example-not-a-real-key",
        "lin_api_EXAMPLEexample0123456789",
        "sk-EXAMPLEexample0123456789abcd",
        "xoxb-EXAMPLE-000000000000-abcdefabcdef",
        FIXTURE_SECRET,
        "ghp_",
    ] {
        assert!(!stdout.contains(secret), "{secret} shown in the preview");
    }
    let brave = by_name("brave-search");
    assert_eq!(brave["transport"]["env"]["BRAVE_API_KEY"]["secret"], true);
    assert_eq!(brave["transport"]["env"]["LOG_LEVEL"]["value"], "info");
    let slack = by_name("slack");
    assert!(slack["transport"]["args"].to_string().contains("REDACTED"));
    assert!(!slack["repair"].as_array().unwrap().is_empty());
    // Remote entries with credentials arrive disabled, without them.
    let linear = by_name("linear");
    assert_eq!(linear["enabled"], false);
    assert!(
        linear["transport"]["headers"]
            .get("Authorization")
            .is_none()
    );
    // Codex's tool timeout comes along.
    assert!(by_name("docs")["tool_timeout_secs"].as_u64().unwrap() >= 90);
    // A missing env reference marks the entry for repair.
    let realfx = by_name("realfx");
    assert!(
        realfx["repair"].to_string().contains("NOT_SET_ANYWHERE"),
        "{realfx}"
    );
    // Malformed entries and files: one problem each, naming the client, file and entry.
    let problems = preview["problems"].as_array().unwrap();
    let problem_text = serde_json::to_string(problems).unwrap();
    for entry in [
        "broken-args",
        "both-command-and-url",
        "bad-env",
        "nocmd",
        "badurl",
        "relative-cwd",
        "nothing",
        "websocket",
        "legacy-broken",
    ] {
        assert!(
            problems.iter().any(|p| p["entry"] == entry),
            "no problem for {entry}: {problem_text}"
        );
    }
    // Nothing was changed: no server in Airlock, the clients' files untouched.
    let (list, _) = ws.json(&["servers", "list"], &[]);
    assert_eq!(list["servers"].as_array().unwrap().len(), 0);

    // Apply a selection.
    let (applied, out) = import(
        &ws,
        &home,
        &work,
        &[
            "--apply",
            "brave-search",
            "slack",
            "linear",
            "docs",
            "realfx2",
        ],
    );
    assert!(out.status.success(), "{applied}");
    assert_eq!(
        applied["imported"].as_array().unwrap().len(),
        5,
        "{applied}"
    );
    let (list, _) = ws.json(&["servers", "list"], &[]);
    let names: Vec<&str> = list["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["brave-search", "docs", "linear", "realfx2", "slack"]
    );
    let (got, _) = ws.json(&["servers", "get", "brave-search"], &[]);
    assert_eq!(got["server"]["env"]["BRAVE_API_KEY"], "••••••");
    assert!(got["server"]["origin"].as_str().unwrap().contains("cursor"));
    let (got, _) = ws.json(&["servers", "get", "docs"], &[]);
    assert!(got["server"]["tool_timeout_secs"].as_f64().unwrap() >= 90.0);
    let (got, _) = ws.json(&["servers", "get", "linear"], &[]);
    assert_eq!(got["server"]["enabled"], false);

    // The imported real server works, with its secret from Airlock's environment.
    let test = ws.run(&["servers", "test", "realfx2"], &[]);
    assert!(
        test.status.success(),
        "{}",
        String::from_utf8_lossy(&test.stderr)
    );
    let (call, out) = ws.json(&["call", "mcp__realfx2__leak_secret"], &[]);
    assert_eq!(call["ok"], true, "{call}");
    assert_eq!(call["redacted"], true);
    assert!(!String::from_utf8_lossy(&out.stdout).contains(FIXTURE_SECRET));

    // Applying again: names now taken are refused per entry; nothing else changes.
    let (again, out) = import(&ws, &home, &work, &["--apply", "brave-search"]);
    assert!(!out.status.success());
    assert!(
        again["failed"][0]
            .as_str()
            .unwrap()
            .contains("already exists"),
        "{again}"
    );

    // A source changed since the preview: that entry is refused, the others import.
    let cursor = home.join(".cursor/mcp.json");
    let original = std::fs::read_to_string(&cursor).unwrap();
    std::fs::write(
        &cursor,
        original.replace("context7.com/mcp", "context7.com/v2/mcp"),
    )
    .unwrap();
    let (partial, out) = import(&ws, &home, &work, &["--apply", "context7", "sentry"]);
    assert!(!out.status.success());
    assert_eq!(partial["imported"][0]["name"], "sentry", "{partial}");
    assert!(
        partial["failed"][0].as_str().unwrap().contains("changed"),
        "{partial}"
    );
    std::fs::write(&cursor, &original).unwrap();
    let (fresh, _) = import(&ws, &home, &work, &[]);
    assert!(fresh["candidates"].is_array());
    let (changed_entry, _) = import(&ws, &home, &work, &["--apply", "realfx"]);
    assert_eq!(changed_entry["imported"].as_array().unwrap().len(), 1);
    let (got, _) = ws.json(&["servers", "get", "realfx"], &[]);
    assert!(
        got["server"]["repair"]
            .to_string()
            .contains("NOT_SET_ANYWHERE")
    );
    let (status, _) = ws.json(&["status"], &[("IMPORT_FIXTURE_TOKEN", FIXTURE_SECRET)]);
    let realfx_status = status["services"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["service"] == "realfx")
        .unwrap()
        .clone();
    assert_eq!(realfx_status["state"], "failed", "{realfx_status}");
    assert!(
        realfx_status["reason"]
            .as_str()
            .unwrap()
            .contains("needs repair")
    );

    // Airlock never wrote to the other clients' files (the edit above was the test's,
    // and was undone).
    assert!(
        before == (snapshot(&home), snapshot(&work)),
        "a client file changed"
    );
}

#[test]
fn previews_expire_and_must_match_the_request() {
    let ws = Workspace::new("");
    let (home, work) = machine(&ws);
    let (none, out) = import(&ws, &home, &work, &["--apply", "all"]);
    assert!(!out.status.success());
    assert!(
        none["message"]
            .as_str()
            .unwrap()
            .contains("run `airlock import` first")
    );

    let (_, out) = import(&ws, &home, &work, &["--from", "codex"]);
    assert!(out.status.success());
    let (other, out) = import(&ws, &home, &work, &["--apply", "all"]);
    assert!(!out.status.success());
    assert!(
        other["message"].as_str().unwrap().contains("same --from"),
        "{other}"
    );
    let (unknown, _) = import(&ws, &home, &work, &["--from", "codex", "--apply", "nope"]);
    assert!(
        unknown["message"]
            .as_str()
            .unwrap()
            .contains("\"nope\" was not in the import preview")
    );

    // Age the preview past ten minutes.
    ws.registry_sql("UPDATE import_previews SET created_at = created_at - 601");
    let (expired, out) = import(&ws, &home, &work, &["--from", "codex", "--apply", "all"]);
    assert!(!out.status.success());
    assert!(
        expired["message"].as_str().unwrap().contains("expired"),
        "{expired}"
    );
    let (list, _) = ws.json(&["servers", "list"], &[]);
    assert!(list["servers"].as_array().unwrap().is_empty());

    // Unknown clients are named.
    let (bad, _) = import(&ws, &home, &work, &["--from", "emacs"]);
    assert!(bad["message"].as_str().unwrap().contains("emacs"), "{bad}");

    // A malformed file is one problem naming the file, without its contents.
    std::fs::copy(
        fixture("malformed.invalid.toml"),
        home.join(".codex/config.toml"),
    )
    .unwrap();
    let (preview, out) = import(&ws, &home, &work, &["--from", "codex"]);
    assert!(out.status.success());
    let problem = &preview["problems"][0];
    assert!(
        problem["source"]
            .as_str()
            .unwrap()
            .ends_with(".codex/config.toml")
    );
    assert!(!preview.to_string().contains("ghp_EXAMPLE"));
}

#[test]
fn airlocks_own_registration_is_skipped_with_why() {
    let ws = Workspace::new("");
    let home = ws.dir.path().join("home");
    let work = ws.dir.path().join("project");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    // A Claude Code user file registering Airlock's gateway (as the README says to), the
    // same by a full path with a global flag first, and Airlock's demo server (not a
    // loop: it is an ordinary server).
    let claude = serde_json::json!({"mcpServers": {
        "airlock": {"command": "airlock", "args": ["serve"]},
        "airlock-http": {"command": "/opt/tools/bin/airlock", "args": ["--config", "/etc/airlock.toml", "serve", "--http", "127.0.0.1:8765"]},
        "demo": {"command": "airlock", "args": ["demo-server"]},
    }});
    std::fs::write(home.join(".claude.json"), claude.to_string()).unwrap();

    let (preview, out) = import(&ws, &home, &work, &["--from", "claude-code"]);
    assert!(out.status.success(), "{preview}");
    let names: Vec<&str> = preview["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["demo"], "{preview}");
    let skipped = preview["skipped"].as_array().unwrap();
    let skipped_names: Vec<&str> = skipped
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(skipped_names, ["airlock", "airlock-http"], "{preview}");
    for s in skipped {
        assert!(
            s["reason"].as_str().unwrap().contains("Airlock itself"),
            "{s}"
        );
        assert!(
            s["source"].as_str().unwrap().ends_with(".claude.json"),
            "{s}"
        );
    }

    // The text preview says why, on the entry's line.
    let text = ws.run(
        &[
            "import",
            "--from",
            "claude-code",
            "--workspace",
            &work.display().to_string(),
        ],
        &[("HOME", &home.display().to_string())],
    );
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(
        stdout.contains("airlock  (from claude-code")
            && stdout.contains("not imported: it runs `airlock serve`"),
        "{stdout}"
    );

    // Naming it is refused with the reason; `all` imports the rest.
    let (refused, out) = import(
        &ws,
        &home,
        &work,
        &["--from", "claude-code", "--apply", "airlock"],
    );
    assert!(!out.status.success());
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("Airlock itself"),
        "{refused}"
    );
    let (applied, out) = import(
        &ws,
        &home,
        &work,
        &["--from", "claude-code", "--apply", "all"],
    );
    assert!(out.status.success(), "{applied}");
    let (list, _) = ws.json(&["servers", "list"], &[]);
    let listed: Vec<&str> = list["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ["demo"], "{list}");
}
