//! Tests of the per-client knowledge: one test per client's fixtures, and maps of the
//! wrong type.

use std::collections::BTreeMap;

use super::*;

#[test]
fn a_map_of_the_wrong_type_is_a_file_problem() {
    let home = tempfile::tempdir().unwrap();
    let file = put(home.path(), ".cursor/mcp.json", r#"{"mcpServers": []}"#);
    put(home.path(), ".gemini/settings.json", "[1, 2]");
    let out = scan_in(home.path(), None, &no_env, None);
    assert_eq!(out.problems.len(), 2);
    assert_eq!(out.problems[0].source, file);
    assert_eq!(out.problems[0].entry, None);
    assert_eq!(
        out.problems[0].message,
        "\"mcpServers\" must be an object, got an array"
    );
    assert_eq!(
        out.problems[1].message,
        "expected a JSON object at the top level, got an array"
    );
}

// --- One test per client's fixtures ---

#[test]
fn claude_code_fixtures() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let ws_key = ws.path().to_str().unwrap();
    let user = put(
        home.path(),
        ".claude.json",
        &fixture!("claude-code.home.claude.json").replace("__WORKSPACE__", ws_key),
    );
    let project = put(
        ws.path(),
        ".mcp.json",
        fixture!("claude-code.workspace.mcp.json"),
    );
    let vars = env_of(&[("GITHUB_TOKEN", "ghp_fromEnvironment0123456789")]);
    let out = scan_in(home.path(), Some(ws.path()), &*vars, None);
    assert_eq!(
        names(&out),
        [
            "github",
            "linear",
            "my_server_",
            "postgres",
            "filesystem",
            "sentry"
        ]
    );
    assert_eq!(out.files_read, [user.clone(), project.clone()]);

    let github = find(&out, "github");
    assert_eq!((github.client, &github.source), (Client::ClaudeCode, &user));
    assert_eq!(github.cwd, None);
    assert_eq!(
        github.transport,
        ImportedTransport::Stdio {
            command: "npx".into(),
            args: vec!["-y".into(), "@modelcontextprotocol/server-github".into()],
            env: values(&[(
                "GITHUB_PERSONAL_ACCESS_TOKEN",
                "ghp_fromEnvironment0123456789",
                true
            )]),
        }
    );
    assert!(github.enabled && github.repair.is_empty());

    let linear = find(&out, "linear");
    assert!(!linear.enabled);
    assert_eq!(url(linear), "https://mcp.linear.app/mcp");
    assert_eq!(
        headers(linear),
        &values(&[("X-Client-Name", "claude-code", false)])
    );
    assert_eq!(
        linear.repair,
        [
            "credentials not imported: header Authorization; set it with `airlock servers edit linear --header ...`"
        ]
    );

    let renamed = find(&out, "my_server_");
    assert_eq!(renamed.notes, ["renamed from \"my server!\""]);
    assert_eq!(args(renamed), ["--port", "8080", "--api-key=REDACTED"]);
    assert_eq!(renamed.repair.len(), 1);
    assert!(renamed.repair[0].starts_with("args[2] looked like a credential"));

    let postgres = find(&out, "postgres");
    assert_eq!(postgres.source, user);
    assert_eq!(
        postgres.notes,
        [format!("defined for project {ws_key:?} in this file")]
    );
    assert_eq!(
        args(postgres),
        [
            "-y",
            "@modelcontextprotocol/server-postgres",
            "postgresql://dev:REDACTED@localhost/dev"
        ]
    );
    assert_eq!(
        postgres.repair,
        [
            "args[2] looked like a credential typed into the command line and was replaced with REDACTED; pass it through an env var instead"
        ]
    );
    assert!(!format!("{out:?}").contains("devpass"));

    let filesystem = find(&out, "filesystem");
    assert_eq!(filesystem.source, project);
    assert_eq!(
        args(filesystem),
        [
            "-y",
            "@modelcontextprotocol/server-filesystem",
            "/srv/project"
        ]
    );

    let sentry = find(&out, "sentry");
    assert_eq!(url(sentry), "https://mcp.sentry.dev/sse");
    assert!(sentry.enabled && sentry.repair.is_empty());
    assert!(sentry.notes[0].starts_with("the source uses SSE"));

    assert_eq!(out.problems.len(), 2, "{:?}", out.problems);
    let broken = problem(&out, "broken-args");
    assert_eq!(broken.source, user);
    assert_eq!(
        broken.message,
        "\"args\" must be an array of strings, got a string"
    );
    let both = problem(&out, "both-command-and-url");
    assert_eq!(both.source, project);
    assert!(both.message.starts_with("both \"command\" and \"url\""));

    // Without a workspace, only the user-level servers are read.
    let out = scan_in(home.path(), None, &*vars, None);
    assert_eq!(names(&out), ["github", "linear", "my_server_"]);
}

#[test]
fn cursor_fixtures() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let user = put(
        home.path(),
        ".cursor/mcp.json",
        fixture!("cursor.home.mcp.json"),
    );
    let project = put(
        ws.path(),
        ".cursor/mcp.json",
        fixture!("cursor.workspace.mcp.json"),
    );
    let out = scan_in(home.path(), Some(ws.path()), &no_env, None);
    assert_eq!(
        names(&out),
        ["brave-search", "context7", "slack", "project-db"]
    );

    assert_eq!(
        env(find(&out, "brave-search")),
        &values(&[
            ("BRAVE_API_KEY", "BSA-example-not-a-real-key", true),
            ("LOG_LEVEL", "info", false),
        ])
    );

    let context7 = find(&out, "context7");
    assert!(!context7.enabled);
    assert!(headers(context7).is_empty());
    assert_eq!(
        context7.repair,
        [
            "credentials not imported: header CONTEXT7_API_KEY; set it with `airlock servers edit context7 --header ...`"
        ]
    );

    let slack = find(&out, "slack");
    assert_eq!(
        args(slack),
        [
            "-y",
            "@modelcontextprotocol/server-slack",
            "--token",
            "REDACTED"
        ]
    );
    assert_eq!(env(slack), &values(&[("SLACK_TEAM_ID", "", false)]));
    assert_eq!(
        slack.repair,
        [
            "args[3] looked like a credential typed into the command line and was replaced with REDACTED; pass it through an env var instead",
            "env SLACK_TEAM_ID for SLACK_TEAM_ID is not set in Airlock's environment",
        ]
    );

    let db = find(&out, "project-db");
    assert_eq!(db.source, project);
    assert_eq!(cwd(db), Some("/srv/app"));
    assert_eq!(
        args(db),
        ["mcp-server-sqlite", "--db-path", "/srv/app/dev.db"]
    );

    assert_eq!(out.problems.len(), 2, "{:?}", out.problems);
    let bad_env = problem(&out, "bad-env");
    assert_eq!(bad_env.source, user);
    assert_eq!(
        bad_env.message,
        "\"env\" must be an object of strings; \"PORT\" is a number"
    );
    assert_eq!(
        problem(&out, "relative-cwd").message,
        "\"cwd\" must be an absolute path, got \"./tools\""
    );
    assert!(!format!("{out:?}").contains("xoxb-"));
}

#[test]
fn codex_fixture() {
    let home = tempfile::tempdir().unwrap();
    let codex_home = tempfile::tempdir().unwrap();
    let file = put(
        codex_home.path(),
        "config.toml",
        fixture!("codex.config.toml"),
    );
    let dir = codex_home.path().to_str().unwrap().to_string();
    let vars = env_of(&[
        ("CODEX_HOME", dir.as_str()),
        ("DOCS_TOKEN", "docs-secret-value"),
    ]);
    let out = scan_in(home.path(), None, &*vars, None);
    assert_eq!(out.files_read, std::slice::from_ref(&file));
    assert_eq!(names(&out), ["docs", "figma", "old"]);

    let docs = find(&out, "docs");
    assert_eq!((docs.client, &docs.source), (Client::Codex, &file));
    assert_eq!(args(docs), ["-y", "mcp-server-docs", "--api-key=REDACTED"]);
    assert_eq!(
        env(docs),
        &values(&[
            ("DOCS_API_TOKEN", "docs-secret-value", true),
            ("LOG_LEVEL", "info", false),
        ])
    );
    assert_eq!(docs.startup_timeout_secs, Some(20));
    assert_eq!(docs.tool_timeout_secs, Some(91));
    assert_eq!(docs.repair.len(), 1);
    assert!(docs.repair[0].starts_with("args[2] looked like a credential"));

    let figma = find(&out, "figma");
    assert!(!figma.enabled);
    assert_eq!(url(figma), "https://mcp.figma.com/mcp");
    assert_eq!(headers(figma), &values(&[("X-Figma-Region", "eu", false)]));
    assert_eq!(
        figma.repair,
        [
            "env FIGMA_TOKEN for Authorization is not set in Airlock's environment",
            "credentials not imported: header Authorization (from bearer_token_env_var FIGMA_TOKEN); set it with `airlock servers edit figma --header ...`",
        ]
    );

    let old = find(&out, "old");
    assert!(!old.enabled);
    assert_eq!(old.notes, ["disabled in the source; imported disabled"]);

    assert_eq!(out.problems.len(), 2, "{:?}", out.problems);
    assert_eq!(
        problem(&out, "badurl").message,
        "\"url\" must start with http:// or https://"
    );
    assert_eq!(
        problem(&out, "nocmd").message,
        "neither \"command\" nor \"url\" is set"
    );

    // Without CODEX_HOME the file is looked for under the home folder.
    let default = put(
        home.path(),
        ".codex/config.toml",
        fixture!("codex.config.toml"),
    );
    let out = scan_in(home.path(), None, &no_env, Some(Client::Codex));
    assert_eq!(out.files_read, [default]);
    assert_eq!(names(&out), ["docs", "figma", "old"]);
}

#[test]
fn gemini_fixtures() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    put(
        home.path(),
        ".gemini/settings.json",
        fixture!("gemini.home.settings.json"),
    );
    let project = put(
        ws.path(),
        ".gemini/settings.json",
        fixture!("gemini.workspace.settings.json"),
    );
    let vars = env_of(&[
        ("DB_CONNECTION_STRING", "postgres://db"),
        ("EXTERNAL_API_KEY", "ext-key-value"),
    ]);
    let out = scan_in(home.path(), Some(ws.path()), &*vars, None);
    assert_eq!(
        names(&out),
        [
            "httpServer",
            "pythonTools",
            "sseServer",
            "trusted",
            "pythonTools-2"
        ]
    );

    let http = find(&out, "httpServer");
    assert_eq!(url(http), "http://localhost:3000/mcp");
    assert_eq!(http.tool_timeout_secs, Some(5));
    assert!(http.enabled);

    let python = find(&out, "pythonTools");
    assert_eq!(
        env(python),
        &values(&[
            ("API_KEY", "ext-key-value", true),
            ("DATABASE_URL", "postgres://db", true),
        ])
    );
    assert_eq!(cwd(python), Some("/srv/mcp-servers/python"));
    assert_eq!(args(python), ["-m", "my_mcp_server", "--port", "8080"]);
    assert_eq!(python.tool_timeout_secs, Some(16), "15500 ms rounds up");
    assert!(python.repair.is_empty());

    let sse = find(&out, "sseServer");
    assert!(!sse.enabled);
    assert_eq!(headers(sse), &values(&[("X-Client", "gemini", false)]));
    assert_eq!(
        sse.repair,
        [
            "credentials not imported: header X-Api-Key; set it with `airlock servers edit sseServer --header ...`"
        ]
    );

    assert_eq!(
        find(&out, "trusted").notes,
        ["not imported: field \"trust\""]
    );

    let second = find(&out, "pythonTools-2");
    assert_eq!(second.source, project);
    assert_eq!(cwd(second), Some("/srv/project"));
    assert_eq!(
        second.notes,
        [
            "renamed from \"pythonTools\" to \"pythonTools-2\": an earlier imported server already uses that name"
        ]
    );

    assert_eq!(out.problems.len(), 1, "{:?}", out.problems);
    assert_eq!(
        problem(&out, "nothing").message,
        "neither \"command\" nor \"url\" is set"
    );
}

#[test]
fn vscode_fixture() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let file = put(
        ws.path(),
        ".vscode/mcp.json",
        fixture!("vscode.workspace.mcp.json"),
    );
    let out = scan_in(home.path(), Some(ws.path()), &no_env, None);
    assert_eq!(out.files_read, std::slice::from_ref(&file));
    assert_eq!(names(&out), ["fetch", "github", "perplexity"]);

    assert_eq!(args(find(&out, "fetch")), ["mcp-server-fetch"]);

    let github = find(&out, "github");
    assert!(!github.enabled);
    assert!(headers(github).is_empty());
    assert_eq!(
        github.repair,
        [
            "env GITHUB_TOKEN for Authorization is not set in Airlock's environment",
            "credentials not imported: header Authorization; set it with `airlock servers edit github --header ...`",
        ]
    );

    let perplexity = find(&out, "perplexity");
    assert_eq!(
        env(perplexity),
        &values(&[("PERPLEXITY_API_KEY", "", true)])
    );
    assert_eq!(
        perplexity.repair,
        [
            "PERPLEXITY_API_KEY uses the VS Code input ${input:perplexity-key}, which Airlock cannot prompt for; set the value yourself"
        ]
    );
    assert_eq!(
        perplexity.notes,
        [
            "\"envFile\" (${workspaceFolder}/.env) was not imported; copy the variables it sets into env"
        ]
    );

    assert_eq!(out.problems.len(), 1, "{:?}", out.problems);
    let websocket = problem(&out, "websocket");
    assert_eq!(websocket.client, Client::Vscode);
    assert_eq!(
        websocket.message,
        "\"type\" must be \"stdio\", \"http\", \"sse\" or \"streamable-http\", got \"websocket\""
    );

    // VS Code has no user-level file here: nothing without a workspace.
    let out = scan_in(home.path(), None, &no_env, None);
    assert!(out.files_read.is_empty());
}

#[test]
fn muse_code_fixtures() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let user = put(
        home.path(),
        ".muse/settings.json",
        fixture!("muse-code.home.settings.json"),
    );
    let project = put(
        ws.path(),
        ".muse/settings.json",
        fixture!("muse-code.workspace.settings.json"),
    );
    let out = scan_in(home.path(), Some(ws.path()), &no_env, None);
    assert_eq!(names(&out), ["legacy-only", "notes", "search", "builder"]);

    let legacy = find(&out, "legacy-only");
    assert!(!legacy.enabled);
    assert_eq!(
        legacy.notes,
        [
            "from the legacy \"mcp_servers\" map",
            "disabled in the source; imported disabled",
        ]
    );

    let notes = find(&out, "notes");
    assert_eq!(notes.cwd, None);
    assert_eq!(
        notes.transport,
        ImportedTransport::Stdio {
            command: "muse-notes".into(),
            args: vec!["--dir".into(), "/home/user/notes".into()],
            env: BTreeMap::new(),
        }
    );
    assert_eq!(
        notes.notes,
        [
            "also defined in the legacy \"mcp_servers\" map of this file; the \"mcpServers\" definition wins"
        ]
    );

    let search = find(&out, "search");
    assert_eq!(url(search), "https://search.example.com/mcp");
    assert!(search.enabled);

    let builder = find(&out, "builder");
    assert_eq!(builder.source, project);
    assert_eq!(cwd(builder), Some("/srv/project"));

    assert_eq!(out.problems.len(), 2, "{:?}", out.problems);
    let broken = problem(&out, "legacy-broken");
    assert_eq!(broken.source, user);
    assert_eq!(broken.message, "\"command\" must be a string, got an array");
    let file_level = out.problems.iter().find(|p| p.entry.is_none()).unwrap();
    assert_eq!(file_level.source, project);
    assert_eq!(
        file_level.message,
        "\"mcp_servers\" must be an object, got a string"
    );
}
