//! `airlock serve` as real MCP clients use it: the official Python SDK client and rmcp's
//! client, over stdio and streamable HTTP, in front of server-everything and our Python
//! fixture servers. Tools, a redacted secret, progress, cancellation reaching the
//! upstream server, paging with `airlock_output`, resources, prompts, `list_changed`,
//! grants, the HTTP rules (tokens, Host/Origin, limits) and shutdown without orphans.

mod support;

use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::ClientConfig;
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{ClientHandler, RoleClient, serve_client};
use serde_json::{Value, json};
use support::{
    HttpGateway, Workspace, airlock_bin, call, gateway_workspace, python, python_server,
    serve_args, text_of,
};

const SECRET: &str = support::GATEWAY_SECRET;

/// Runs the Python SDK client script and parses its report.
fn python_client(args: &[&str]) -> Value {
    let out = Command::new(python())
        .arg(python_server("gateway_client.py"))
        .args(args)
        .output()
        .expect("run gateway_client.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the Python client failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).expect("one JSON report")
}

/// What a full session through the gateway must show.
fn assert_full_report(report: &Value, raw_log: &std::path::Path) {
    let tools: Vec<&str> = report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for wanted in [
        "airlock_output",
        "airlock_search_tools",
        "airlock_status",
        "mcp__fx__leak_secret",
        "mcp__raw__slow",
    ] {
        assert!(tools.contains(&wanted), "{wanted} missing from {tools:?}");
    }
    assert!(
        tools.iter().any(|t| t.starts_with("mcp__every__")),
        "{tools:?}"
    );
    let instructions = report["instructions"].as_str().unwrap();
    assert!(instructions.contains("- fx") && instructions.contains("airlock_output"));

    let leak = &report["leak"];
    let text = leak["text"].as_str().unwrap();
    assert!(!text.contains(SECRET), "the secret came out: {text}");
    assert!(text.contains("[REDACTED:secret:SERVICE_TOKEN]"), "{text}");
    assert_eq!(leak["meta"]["redacted"], true, "{leak}");

    let seen = report["progress"]["seen"].as_array().unwrap();
    assert_eq!(seen.len(), 3, "progress reached the client: {seen:?}");
    assert_eq!(seen[2][2], "step 3 of 3");

    let paging = &report["paging"];
    assert_eq!(paging["meta"]["complete"], false, "{paging}");
    assert_eq!(paging["meta"]["size"], 200_000, "{paging}");
    assert!(
        paging["last_block"]
            .as_str()
            .unwrap()
            .contains("airlock_output"),
        "{paging}"
    );
    assert_eq!(paging["chars"], 100_000, "{paging}");
    assert_eq!(paging["all_expected"], true);
    assert!(paging["pages"].as_u64().unwrap() >= 4, "{paging}");

    // The cancellation reached the upstream server.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let log = std::fs::read_to_string(raw_log).unwrap_or_default();
        if log.contains("notifications/cancelled") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the upstream server never got notifications/cancelled:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    assert!(
        !report["resources"].as_array().unwrap().is_empty(),
        "{report}"
    );
    assert!(
        report["read"]["contents"].as_u64().unwrap() >= 1,
        "{report}"
    );
    assert!(
        !report["prompts"].as_array().unwrap().is_empty(),
        "{report}"
    );
    assert!(
        report["prompt"]["messages"].as_u64().unwrap() >= 1,
        "{report}"
    );

    assert_eq!(report["list_changed"]["notified"], true, "{report}");
    assert_eq!(report["list_changed"]["added"], true, "{report}");

    assert_eq!(report["unknown"]["is_error"], true);
    assert_eq!(report["unknown"]["meta"]["error"], "unknown_tool");
}

#[test]
fn the_python_sdk_client_over_stdio() {
    let raw_log = tempfile::NamedTempFile::new().unwrap();
    let ws = gateway_workspace(raw_log.path(), None);
    let bin = airlock_bin().display().to_string();
    let mut args = vec!["full", "--stdio", bin.as_str()];
    let serve = serve_args(&ws, &["serve"]);
    args.extend(serve.iter().map(String::as_str));
    let report = python_client(&args);
    assert_eq!(report["server"], "airlock");
    assert_full_report(&report, raw_log.path());
}

#[test]
fn the_python_sdk_client_over_http_with_a_token() {
    let raw_log = tempfile::NamedTempFile::new().unwrap();
    let ws = gateway_workspace(raw_log.path(), None);
    let (made, _) = ws.json(&["--agent", "alice", "serve", "tokens", "add"], &[]);
    let token = made["token"].as_str().unwrap().to_string();
    assert!(token.starts_with("alk_"));
    let gateway = HttpGateway::start(&ws, &[]);
    let report = python_client(&["full", "--http", &gateway.url, "--token", &token]);
    assert_full_report(&report, raw_log.path());
    // The token never reaches a file under the data directory outside the secret store.
    for file in support::files_under(&ws.data()) {
        if file.to_string_lossy().contains("/secrets/") {
            continue;
        }
        let bytes = std::fs::read(&file).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(&token),
            "the token is in {}",
            file.display()
        );
    }
}

/// Records what the gateway sends an rmcp client.
#[derive(Clone, Default)]
struct Recorder {
    notes: Arc<Mutex<Vec<String>>>,
    progress: Arc<Mutex<Vec<f64>>>,
}

impl ClientHandler for Recorder {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::default()
    }

    async fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params.progress);
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.notes.lock().unwrap().push("tools/list_changed".into());
    }
}

/// The same checks through rmcp's client, whatever the transport.
async fn exercise(
    client: &RunningService<RoleClient, Recorder>,
    recorder: &Recorder,
    raw_log: &std::path::Path,
) {
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    assert!(
        names.contains(&"mcp__fx__leak_secret".to_string()),
        "{names:?}"
    );

    let leaked = client
        .call_tool(call("mcp__fx__leak_secret", json!({})))
        .await
        .unwrap();
    assert!(!text_of(&leaked).contains(SECRET));

    let worked = client
        .call_tool(call("mcp__fx__work_with_progress", json!({"steps": 3})))
        .await
        .unwrap();
    assert_eq!(text_of(&worked), "done");
    // rmcp's client runs each notification handler in a task of its own, so the
    // recorder may see the last progress just after the result it preceded on the wire.
    let deadline = Instant::now() + Duration::from_secs(5);
    while recorder.progress.lock().unwrap().len() < 3 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(recorder.progress.lock().unwrap().len(), 3);

    let big = client
        .call_tool(call("mcp__fx__big_text", json!({"size": 70_000})))
        .await
        .unwrap();
    let meta = serde_json::to_value(&big.meta).unwrap();
    assert_eq!(meta["complete"], false, "{meta}");
    let (mut offset, mut text) = (0u64, String::new());
    loop {
        let page = client
            .call_tool(call(
                "airlock_output",
                json!({"service": "fx", "output_id": meta["output_id"], "offset": offset}),
            ))
            .await
            .unwrap();
        let s = page.structured_content.clone().unwrap();
        text.push_str(s["text"].as_str().unwrap());
        if s["eof"] == true {
            break;
        }
        offset = s["next_offset"].as_u64().unwrap();
    }
    assert_eq!(text, "x".repeat(70_000));

    // Dropping a call (a client-side cancel) sends notifications/cancelled upstream.
    let slow = tokio::time::timeout(
        Duration::from_millis(700),
        client.call_tool_once(call("mcp__raw__slow", json!({}))),
    )
    .await;
    assert!(slow.is_err(), "the slow tool does not answer by itself");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !std::fs::read_to_string(raw_log)
        .unwrap_or_default()
        .contains("notifications/cancelled")
    {
        assert!(
            Instant::now() < deadline,
            "no cancellation reached the raw server"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let resources = client.list_all_resources().await.unwrap();
    assert!(!resources.is_empty());
    let prompts = client.list_all_prompts().await.unwrap();
    assert!(!prompts.is_empty());

    recorder.notes.lock().unwrap().clear();
    client
        .call_tool(call("mcp__fx__grow", json!({"name": "grown"})))
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !recorder
        .notes
        .lock()
        .unwrap()
        .contains(&"tools/list_changed".to_string())
    {
        assert!(Instant::now() < deadline, "no tools/list_changed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let tools = client.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "mcp__fx__grown"));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_rmcp_client_over_stdio_and_http() {
    let raw_log = tempfile::NamedTempFile::new().unwrap();
    let ws = gateway_workspace(raw_log.path(), None);

    let mut child = support::stdio_gateway(&ws, &["serve"]);
    let (stdout, stdin) = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
    exercise_over_stdio(child, stdout, stdin, raw_log.path()).await;

    let raw_log = tempfile::NamedTempFile::new().unwrap();
    let ws = gateway_workspace(raw_log.path(), None);
    let gateway = HttpGateway::start(&ws, &[]);
    let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(gateway.url.clone());
    let recorder = Recorder::default();
    let client = serve_client(recorder.clone(), transport).await.unwrap();
    exercise(&client, &recorder, raw_log.path()).await;
    client.cancel().await.unwrap();
}

/// A client that starts `airlock serve` with socket pairs for its stdin and stdout, as
/// Node's `child_process` does, gets the same service as over pipes (the gateway reads
/// and writes them through the runtime's I/O driver, as it does pipes).
#[tokio::test(flavor = "multi_thread")]
async fn the_rmcp_client_over_socket_pairs_as_node_starts_servers() {
    use std::os::fd::OwnedFd;
    use std::os::unix::net::UnixStream;
    let raw_log = tempfile::NamedTempFile::new().unwrap();
    let ws = gateway_workspace(raw_log.path(), None);
    let (to_gateway, gateway_stdin) = UnixStream::pair().unwrap();
    let (from_gateway, gateway_stdout) = UnixStream::pair().unwrap();
    let child = support::stdio_gateway_on(
        &ws,
        &["serve"],
        OwnedFd::from(gateway_stdin).into(),
        OwnedFd::from(gateway_stdout).into(),
    );
    let stream = |socket: UnixStream| {
        socket.set_nonblocking(true).unwrap();
        tokio::net::UnixStream::from_std(socket).unwrap()
    };
    exercise_over_stdio(
        child,
        stream(from_gateway),
        stream(to_gateway),
        raw_log.path(),
    )
    .await;
}

/// [`exercise`] by an rmcp client reading the gateway's stdout from `from_gateway` and
/// writing its stdin to `to_gateway`; the gateway exits once the client goes away.
async fn exercise_over_stdio<R, W>(
    mut child: tokio::process::Child,
    from_gateway: R,
    to_gateway: W,
    raw_log: &std::path::Path,
) where
    R: tokio::io::AsyncRead + Send + Unpin + 'static,
    W: tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let transport =
        rmcp::transport::async_rw::AsyncRwTransport::new_client(from_gateway, to_gateway);
    let recorder = Recorder::default();
    let client = serve_client(recorder.clone(), transport).await.unwrap();
    exercise(&client, &recorder, raw_log).await;
    client.cancel().await.unwrap();
    let exited = tokio::time::timeout(Duration::from_secs(15), child.wait()).await;
    assert!(
        exited.is_ok(),
        "airlock serve exits when its client goes away"
    );
}

#[test]
fn grants_mode_shows_and_runs_only_granted_services() {
    let raw_log = tempfile::NamedTempFile::new().unwrap();
    let ws = gateway_workspace(raw_log.path(), None);
    let (alice, _) = ws.json(&["--agent", "alice", "serve", "tokens", "add"], &[]);
    let (bob, _) = ws.json(&["--agent", "bob", "serve", "tokens", "add"], &[]);
    let (granted, out) = ws.json(&["--agent", "alice", "grants", "add", "fx"], &[]);
    assert!(out.status.success(), "{granted}");
    let gateway = HttpGateway::start(&ws, &["--access", "grants"]);

    let seen = python_client(&[
        "hidden",
        "--http",
        &gateway.url,
        "--token",
        alice["token"].as_str().unwrap(),
    ]);
    let tools: Vec<&str> = seen["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(tools.contains(&"mcp__fx__echo"), "{tools:?}");
    assert!(
        !tools
            .iter()
            .any(|t| t.starts_with("mcp__every__") || t.starts_with("mcp__raw__")),
        "{tools:?}"
    );
    assert_eq!(seen["call"]["is_error"], false, "{seen}");
    assert!(seen["instructions"].as_str().unwrap().contains("- fx"));
    assert!(!seen["instructions"].as_str().unwrap().contains("- every"));

    let denied = python_client(&[
        "hidden",
        "--http",
        &gateway.url,
        "--token",
        bob["token"].as_str().unwrap(),
    ]);
    let tools: Vec<&str> = denied["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(!tools.iter().any(|t| t.starts_with("mcp__")), "{tools:?}");
    assert_eq!(denied["call"]["is_error"], true, "{denied}");
    assert_eq!(
        denied["call"]["meta"]["error"], "service_access_denied",
        "{denied}"
    );
}

/// A raw HTTP request to the gateway; returns the status.
async fn status_of(request: reqwest::RequestBuilder) -> u16 {
    request
        .send()
        .await
        .expect("the gateway answers")
        .status()
        .as_u16()
}

fn initialize_body() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "probe", "version": "1"}}})
}

#[tokio::test(flavor = "multi_thread")]
async fn http_refuses_what_it_must() {
    let raw_log = tempfile::NamedTempFile::new().unwrap();
    let ws = gateway_workspace(raw_log.path(), None);
    let gateway = HttpGateway::start(&ws, &["--max-sessions", "1"]);
    // A connection per request: what is tested is each refusal, and a pooled connection
    // the gateway closed while idle would fail the next request for another reason.
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let post = |url: &str| {
        http.post(url)
            .header("Accept", "application/json, text/event-stream")
            .header("Content-Type", "application/json")
    };
    let url = gateway.url.as_str();
    assert_eq!(
        status_of(
            post(url)
                .bearer_auth("alk_not-a-token")
                .json(&initialize_body())
        )
        .await,
        401
    );
    assert_eq!(
        status_of(
            post(url)
                .header("Host", "evil.example.com")
                .json(&initialize_body())
        )
        .await,
        403
    );
    assert_eq!(
        status_of(
            post(url)
                .header("Origin", "http://evil.example.com")
                .json(&initialize_body())
        )
        .await,
        403
    );
    let other = url.replace("/mcp", "/other");
    assert_eq!(status_of(http.get(other)).await, 404);
    // The gateway answers 413 once it has read 40 MiB, then closes with the rest of the
    // body unread: the close can reach the client as a reset before it reads the
    // answer (a race in TCP, not a refusal missed), so a cut connection is tried again.
    let huge = "x".repeat(41 << 20);
    let body = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{{\"pad\":\"{huge}\"}}}}"
    );
    let mut statuses = Vec::new();
    for _ in 0..5 {
        match post(url).body(body.clone()).send().await {
            Ok(response) => {
                statuses.push(response.status().as_u16());
                break;
            }
            Err(e) if e.is_request() || e.is_body() => statuses.push(0),
            Err(e) => panic!("the gateway answers: {e}"),
        }
    }
    assert_eq!(statuses.last(), Some(&413), "{statuses:?}");
    assert_eq!(status_of(post(url).json(&initialize_body())).await, 200);
    assert_eq!(
        status_of(post(url).json(&initialize_body())).await,
        503,
        "the session limit (1) refuses a second session"
    );

    // A remote bind needs --allow-remote, and then a token.
    let out = ws.run(&["serve", "--http", "0.0.0.0:0"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--allow-remote"));
    let fresh = Workspace::new("");
    let out = fresh.run(&["serve", "--http", "0.0.0.0:0", "--allow-remote"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("serve tokens add"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn meta_surface_lists_four_tools_and_reaches_the_catalog() {
    let raw_log = tempfile::NamedTempFile::new().unwrap();
    let ws = gateway_workspace(raw_log.path(), None);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let gateway = HttpGateway::start(&ws, &["--tools", "meta", "--compact"]);
        let transport =
            rmcp::transport::StreamableHttpClientTransport::from_uri(gateway.url.clone());
        let client = serve_client(Recorder::default(), transport).await.unwrap();
        let tools = client.list_all_tools().await.unwrap();
        let mut names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
        names.sort();
        assert_eq!(
            names,
            [
                "airlock_call_tool",
                "airlock_describe_tool",
                "airlock_output",
                "airlock_search_tools"
            ]
        );
        let found = client
            .call_tool(call("airlock_search_tools", json!({"query": "fx echo"})))
            .await
            .unwrap();
        let hits = found.structured_content.unwrap();
        assert_eq!(hits["tools"][0]["name"], "mcp__fx__echo", "{hits}");
        let described = client
            .call_tool(call(
                "airlock_describe_tool",
                json!({"name": "mcp__fx__echo"}),
            ))
            .await
            .unwrap();
        assert!(
            described.structured_content.unwrap()["inputSchema"]["properties"]["text"].is_object()
        );
        let echoed = client
            .call_tool(call(
                "airlock_call_tool",
                json!({"name": "mcp__fx__echo", "arguments": {"text": "via meta"}}),
            ))
            .await
            .unwrap();
        assert_eq!(text_of(&echoed), "via meta");
        let big = client
            .call_tool(call(
                "airlock_call_tool",
                json!({"name": "mcp__fx__big_text", "arguments": {"size": 5000}}),
            ))
            .await
            .unwrap();
        let first = text_of(&big);
        assert!(
            first.starts_with(&"x".repeat(4096)) && !first.starts_with(&"x".repeat(4097)),
            "--compact previews 4 KiB"
        );
        client.cancel().await.unwrap();
    });
}

#[test]
fn raw_naming_keeps_the_servers_own_names() {
    let raw_log = tempfile::NamedTempFile::new().unwrap();
    let ws = gateway_workspace(raw_log.path(), Some("raw"));
    let (tools, _) = ws.json(&["tools"], &[]);
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["service"] == "fx")
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"echo"), "{names:?}");
    assert!(names.contains(&"leak_secret"), "{names:?}");
}
