//! Task handles for 2026-07-28 clients (the `io.modelcontextprotocol/tasks` extension)
//! through `airlock serve --http`, spoken as raw JSON-RPC (the official Python SDK has
//! no 2026 tasks client yet). Two gateway replicas share one registry; behind them, a
//! task-capable upstream (`host/examples/task_server.rs`) and the official SDK 2.x server
//! that asks its user a question.
//!
//! Each test proves what a client sees: a slow call answers with a handle that only its
//! agent can poll, on any replica, after a restart too; the terminal result is redacted
//! and retained as an immediate one is; a question waits in the task until the client
//! answers it with `tasks/update`; `tasks/cancel` reaches the replica running the call;
//! and a task whose replica died reads as failed.

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{HttpGateway, Workspace, modern_peer, modern_python, toml_str};

const SECRET: &str = "task-secret-51e0c2d9a7";

/// A workspace with the task server `t` and the SDK 2.x server `m`, and bearer tokens
/// for the agents `ada` and `eve`.
struct Setup {
    ws: Workspace,
    ada: String,
    eve: String,
    rt: tokio::runtime::Runtime,
}

fn setup() -> Setup {
    let ws = Workspace::new(&format!(
        "[mcp_servers.t]\ncommand = {}\nenv = {{ SERVICE_TOKEN = {secret} }}\n\n\
         [mcp_servers.m]\ncommand = {}\nargs = [{}, \"stdio\"]\nenv = {{ SERVICE_TOKEN = {secret} }}\n",
        toml_str(support::example_binary("task_server").display().to_string()),
        toml_str(modern_python().display().to_string()),
        toml_str(modern_peer("modern_server.py").display().to_string()),
        secret = toml_str(SECRET),
    ));
    let token = |agent: &str| {
        let (made, _) = ws.json(&["--agent", agent, "serve", "tokens", "add"], &[]);
        format!("Bearer {}", made["token"].as_str().expect("a token"))
    };
    let (ada, eve) = (token("ada"), token("eve"));
    Setup {
        ws,
        ada,
        eve,
        rt: tokio::runtime::Runtime::new().unwrap(),
    }
}

impl Setup {
    /// One stateless 2026-07-28 request from a client that takes tasks (and answers
    /// elicitations) to the gateway at `url`, as the bearer `token`. Returns the
    /// JSON-RPC response.
    fn request(&self, url: &str, token: &str, method: &str, params: Value) -> Value {
        let meta = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "task-probe", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {
                "elicitation": {},
                "extensions": {"io.modelcontextprotocol/tasks": {}},
            },
        });
        let mut params = params;
        params["_meta"] = meta;
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        self.rt.block_on(async {
            let mut request = reqwest::Client::new()
                .post(url)
                .header("Accept", "application/json, text/event-stream")
                .header("Mcp-Protocol-Version", "2026-07-28")
                .header("Mcp-Method", method)
                .header("Authorization", token)
                .json(&body);
            // The routing name: the tool's, or the task's id for tasks/*.
            let params = &body["params"];
            if let Some(name) = params["name"].as_str().or(params["taskId"].as_str()) {
                request = request.header("Mcp-Name", name);
            }
            let response = request.send().await.expect("the gateway answers");
            let status = response.status();
            let text = response.text().await.unwrap_or_default();
            assert!(status.is_success(), "{method}: {status}: {text}");
            text.lines()
                .filter_map(|l| l.strip_prefix("data:").map(str::trim).or(Some(l)))
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .find(|v| v.get("id") == Some(&json!(1)))
                .unwrap_or_else(|| panic!("no response in: {text}"))
        })
    }

    /// Calls `tool` and expects a task handle; returns its id.
    fn start_task(&self, url: &str, tool: &str, arguments: Value) -> String {
        let response = self.request(
            url,
            &self.ada,
            "tools/call",
            json!({"name": tool, "arguments": arguments}),
        );
        let result = &response["result"];
        assert_eq!(result["resultType"], "task", "{response:#}");
        assert!(result["pollIntervalMs"].as_u64().is_some(), "{response:#}");
        result["taskId"].as_str().expect("a task id").to_string()
    }

    /// `tasks/get` as `token`.
    fn get(&self, url: &str, token: &str, id: &str) -> Value {
        self.request(url, token, "tasks/get", json!({"taskId": id}))
    }

    /// Polls `tasks/get` until the task's status is one of `wanted`.
    fn poll_until(&self, url: &str, id: &str, wanted: &[&str], within: Duration) -> Value {
        let start = Instant::now();
        loop {
            let response = self.get(url, &self.ada, id);
            let status = response["result"]["status"].as_str().unwrap_or_default();
            if wanted.contains(&status) {
                return response["result"].clone();
            }
            assert!(
                start.elapsed() < within,
                "still not {wanted:?} after {within:?}: {response:#}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

fn assert_refused(response: &Value, what: &str) {
    let message = response["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("no task"),
        "{what} was not refused: {response:#}"
    );
}

#[test]
fn a_slow_call_becomes_a_task_that_only_its_agent_polls_on_any_replica_after_a_restart() {
    let s = setup();
    let (one, two) = (
        HttpGateway::start(&s.ws, &[]),
        HttpGateway::start(&s.ws, &[]),
    );
    // A quick call answers at once, even for a client that takes tasks.
    let quick = s.request(
        &one.url,
        &s.ada,
        "tools/call",
        json!({"name": "mcp__t__report", "arguments": {"ms": 10}}),
    );
    assert_eq!(quick["result"]["resultType"], "complete", "{quick:#}");

    let id = s.start_task(&one.url, "mcp__t__report", json!({"ms": 2500}));
    let stolen = s.get(&two.url, &s.eve, &id);
    assert_refused(&stolen, "another agent's poll");
    let cancel = s.request(&two.url, &s.eve, "tasks/cancel", json!({"taskId": id}));
    assert_refused(&cancel, "another agent's cancel");

    // Polled on the other replica to its end: redacted, retained.
    let done = s.poll_until(&two.url, &id, &["completed"], Duration::from_secs(30));
    let text = done["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.starts_with("report ready, signed with ") && !text.contains(SECRET),
        "{done:#}"
    );
    let meta = &done["result"]["_meta"];
    assert_eq!(meta["redacted"], true, "{done:#}");
    let output = meta["output_id"].as_str().expect("the result was retained");
    let (page, _) = s.ws.json(&["--agent", "ada", "output", "t", output], &[]);
    assert_eq!(page["text"], text, "{page:#}");

    // Both replicas stop; a new one still knows the handle, and still only for ada.
    drop((one, two));
    let three = HttpGateway::start(&s.ws, &[]);
    let again = s.get(&three.url, &s.ada, &id);
    assert_eq!(again["result"]["status"], "completed", "{again:#}");
    assert_eq!(again["result"]["result"], done["result"], "{again:#}");
    assert_refused(&s.get(&three.url, &s.eve, &id), "another agent's poll");
    let late = s.request(&three.url, &s.ada, "tasks/cancel", json!({"taskId": id}));
    assert!(
        late["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("already ended")),
        "{late:#}"
    );
}

#[test]
fn a_task_asks_its_question_and_takes_the_answer_through_another_replica() {
    let s = setup();
    let (one, two) = (
        HttpGateway::start(&s.ws, &[]),
        HttpGateway::start(&s.ws, &[]),
    );
    let id = s.start_task(&one.url, "mcp__m__confirm", json!({"action": "wipe"}));
    let asking = s.poll_until(&two.url, &id, &["input_required"], Duration::from_secs(30));
    let (key, question) = asking["inputRequests"]
        .as_object()
        .and_then(|r| r.iter().next())
        .expect("one question");
    let message = question["params"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("Really wipe?") && !message.contains(SECRET),
        "{asking:#}"
    );
    let answer = json!({key.clone(): {"action": "accept", "content": {"ok": true}}});
    let refused = s.request(
        &two.url,
        &s.eve,
        "tasks/update",
        json!({"taskId": id, "inputResponses": answer}),
    );
    assert_refused(&refused, "another agent's answer");
    let taken = s.request(
        &two.url,
        &s.ada,
        "tasks/update",
        json!({"taskId": id, "inputResponses": answer}),
    );
    assert_eq!(taken["result"]["resultType"], "complete", "{taken:#}");
    let done = s.poll_until(&one.url, &id, &["completed"], Duration::from_secs(30));
    assert_eq!(
        done["result"]["content"][0]["text"], "wipe: approved",
        "{done:#}"
    );
}

#[test]
fn a_cancel_reaches_the_running_replica_and_a_dead_replicas_task_reads_failed() {
    let s = setup();
    let (one, two) = (
        HttpGateway::start(&s.ws, &[]),
        HttpGateway::start(&s.ws, &[]),
    );
    let cancelled = s.start_task(&one.url, "mcp__t__report", json!({"ms": 60000}));
    let ack = s.request(
        &two.url,
        &s.ada,
        "tasks/cancel",
        json!({"taskId": cancelled}),
    );
    assert_eq!(ack["result"]["resultType"], "complete", "{ack:#}");
    let seen = s.poll_until(
        &two.url,
        &cancelled,
        &["cancelled"],
        Duration::from_secs(20),
    );
    assert!(seen.get("result").is_none(), "{seen:#}");

    let orphan = s.start_task(&one.url, "mcp__t__report", json!({"ms": 60000}));
    drop(one);
    let failed = s.poll_until(&two.url, &orphan, &["failed"], Duration::from_secs(40));
    let message = failed["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("stopped before it finished"), "{failed:#}");
}
