//! MCP 2026-07-28 beside the handshake era, on both sides of `airlock serve`, with the
//! newest official Python SDK (2.x) as the real peers: its `Client` in `auto`, pinned
//! `2026-07-28` and `legacy` modes in front (stdio and HTTP), and its `MCPServer` behind
//! (stdio, and stateless streamable HTTP that checks the routing headers), beside a
//! handshake-era twin on the 1.x SDK. Every combination lists, calls (a known secret
//! redacted), reads a resource, gets a prompt, and answers an upstream's question.

// Sampling and logging are deprecated (SEP-2577); an embedder's asker still answers them.
#![allow(deprecated)]

mod support;

use serde_json::{Value, json};
use support::{
    HttpGateway, Workspace, modern_client, modern_client_on, stdio_target, toml_str, upstreams,
};

const SECRET: &str = support::ERA_SECRET;

/// What every client era must see through Airlock, whatever the upstream's era.
fn assert_walk(report: &Value, mode: &str) {
    let expected_version = if mode == "legacy" {
        "2025-11-25"
    } else {
        "2026-07-28"
    };
    assert_eq!(report["protocol_version"], expected_version, "{report:#}");
    let tools = report["tools"].as_array().expect("tools listed");
    for service in ["m", "h", "l"] {
        for tool in ["echo", "leak_secret", "confirm"] {
            let name = json!(format!("mcp__{service}__{tool}"));
            assert!(tools.contains(&name), "{name} missing: {report:#}");
        }
        let seen = &report["services"][service];
        let leak = seen["leak"]["text"].as_str().unwrap_or_default();
        assert!(
            leak.starts_with("connected with token=") && !leak.contains(SECRET),
            "{service}: the secret was not redacted: {seen:#}"
        );
        assert_eq!(seen["leak"]["is_error"], false, "{seen:#}");
        assert_eq!(
            seen["resource"]["text"], "the readme says hello",
            "{service}: {seen:#}"
        );
        assert_eq!(
            seen["prompt"]["text"], "Say hello to Ada.",
            "{service}: {seen:#}"
        );
    }
}

/// Each upstream's question reaches the client, the secret in it redacted, and the
/// client's answer reaches the upstream, across eras: a handshake-era client is asked
/// with `elicitation/create`, a 2026-07-28 client with an `input_required` result; a
/// handshake-era upstream asks mid-call, a 2026-07-28 one with `input_required`.
fn assert_questions_answered(report: &Value) {
    for service in ["m", "h", "l"] {
        let confirm = &report["services"][service]["confirm"];
        assert_eq!(confirm["text"], "wipe: approved", "{service}: {confirm:#}");
        let questions = confirm["questions"].as_array().expect("questions");
        assert_eq!(questions.len(), 1, "{service}: {confirm:#}");
        let question = questions[0].as_str().unwrap_or_default();
        assert!(
            question.starts_with("Really wipe? (asked with token ") && !question.contains(SECRET),
            "{service}: the question's secret was not redacted: {question}"
        );
    }
}

#[test]
fn every_client_era_over_stdio_reaches_every_upstream_era() {
    let up = upstreams("");
    for mode in ["auto", "2026-07-28", "legacy"] {
        let report = modern_client(&up.ws, mode, &stdio_target(&up.ws));
        assert_walk(&report, mode);
        assert_questions_answered(&report);
    }
}

#[test]
fn every_client_era_over_http_reaches_every_upstream_era() {
    let up = upstreams("");
    let gateway = HttpGateway::start(&up.ws, &[]);
    for mode in ["auto", "2026-07-28", "legacy"] {
        let report = modern_client(&up.ws, mode, &["--http".to_string(), gateway.url.clone()]);
        assert_walk(&report, mode);
        assert_questions_answered(&report);
    }
}

#[test]
fn a_handshake_era_client_and_a_modern_one_share_one_http_gateway_at_once() {
    let up = upstreams("");
    // Each client is its own agent, named per request by its bearer token (a 2026-07-28
    // client holds no session): a question goes to the client whose call asked it.
    let token = |agent: &str| {
        let (made, _) = up
            .ws
            .json(&["--agent", agent, "serve", "tokens", "add"], &[]);
        made["token"].as_str().expect("a token").to_string()
    };
    let clients = [
        ("legacy", token("ada")),
        ("2026-07-28", token("bo")),
        ("auto", token("cy")),
    ];
    let gateway = HttpGateway::start(&up.ws, &[]);
    let reports: Vec<(&str, Value)> = std::thread::scope(|scope| {
        let running: Vec<_> = clients
            .iter()
            .map(|(mode, token)| {
                let target = [
                    "--http".to_string(),
                    gateway.url.clone(),
                    "--token".to_string(),
                    token.clone(),
                ];
                let ws = &up.ws;
                scope.spawn(move || (*mode, modern_client(ws, mode, &target)))
            })
            .collect();
        running
            .into_iter()
            .map(|c| c.join().expect("a client thread"))
            .collect()
    });
    for (mode, report) in reports {
        assert_walk(&report, mode);
        assert_questions_answered(&report);
    }
}

#[test]
fn status_shows_the_revision_each_upstream_chose() {
    let up = upstreams("");
    let (status, out) = up.ws.json(&["status"], &[]);
    assert!(out.status.success(), "{status:#}");
    let text = status.to_string();
    let version_of = |service: &str| -> String {
        let services = status["services"].as_array().expect("services");
        let entry = services
            .iter()
            .find(|s| s["service"] == service)
            .unwrap_or_else(|| panic!("{service} missing: {text}"));
        entry["server"]["protocol_version"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(version_of("m"), "2026-07-28", "{text}");
    assert_eq!(version_of("h"), "2026-07-28", "{text}");
    assert_eq!(version_of("l"), "2025-11-25", "{text}");
}

/// The SDK's HTTP server checks `Mcp-Name` against the body and refuses a mismatch; so a
/// call through Airlock, whose qualified name (`mcp__h__echo`) differs from the server's
/// own (`echo`), works only if Airlock sends the server's name.
#[test]
fn routing_headers_name_the_servers_own_tool() {
    let up = upstreams("");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let refused = rt.block_on(async {
        let body = json!({
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {
                "name": "echo", "arguments": {"text": "hi"},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientInfo": {"name": "probe", "version": "1"},
                    "io.modelcontextprotocol/clientCapabilities": {}
                }
            }
        });
        reqwest::Client::new()
            .post(&up.http_url)
            .header("Accept", "application/json, text/event-stream")
            .header("Mcp-Protocol-Version", "2026-07-28")
            .header("Mcp-Method", "tools/call")
            .header("Mcp-Name", "mcp__h__echo")
            .json(&body)
            .send()
            .await
            .expect("the upstream answers")
    });
    let status = refused.status();
    let text = rt.block_on(refused.text()).unwrap_or_default();
    assert!(
        status.is_client_error() || text.contains("Mcp-Name"),
        "the upstream accepted a wrong Mcp-Name ({status}): {text}"
    );
    for word in ["one", "two", "three"] {
        let (call, _) = up.ws.json(
            &[
                "call",
                "mcp__h__echo",
                "--args",
                &json!({"text": word}).to_string(),
            ],
            &[],
        );
        assert_eq!(call["ok"], true, "{call:#}");
        assert_eq!(call["text"], word, "{call:#}");
    }
}

const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// One stateless 2026-07-28 `tools/call` to `airlock serve --http`: no `initialize`, no
/// session id; the client's context in `_meta`. Returns the JSON-RPC response and
/// whether the gateway handed out a session id.
fn stateless_call(
    rt: &tokio::runtime::Runtime,
    url: &str,
    tool: &str,
    extra_meta: Value,
    headers: &[(&str, &str)],
) -> (Value, bool) {
    stateless_request(rt, url, tool, json!({}), extra_meta, headers)
}

/// [`stateless_call`] with more `params` (`requestState`, `inputResponses`, `arguments`).
fn stateless_request(
    rt: &tokio::runtime::Runtime,
    url: &str,
    tool: &str,
    params: Value,
    extra_meta: Value,
    headers: &[(&str, &str)],
) -> (Value, bool) {
    let mut meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw-probe", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    meta.as_object_mut()
        .unwrap()
        .extend(extra_meta.as_object().cloned().unwrap_or_default());
    let mut body = json!({
        "jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": tool, "arguments": {}, "_meta": meta},
    });
    body["params"]
        .as_object_mut()
        .unwrap()
        .extend(params.as_object().cloned().unwrap_or_default());
    rt.block_on(async {
        let mut request = reqwest::Client::new()
            .post(url)
            .header("Accept", "application/json, text/event-stream")
            .header("Mcp-Protocol-Version", "2026-07-28")
            .header("Mcp-Method", "tools/call")
            .header("Mcp-Name", tool)
            .json(&body);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().await.expect("the gateway answers");
        let session = response.headers().contains_key("mcp-session-id");
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        assert!(status.is_success(), "{status}: {text}");
        // A JSON body, or an SSE stream whose data line holds the response.
        let json = text
            .lines()
            .filter_map(|l| l.strip_prefix("data:").map(str::trim).or(Some(l)))
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| v.get("id") == Some(&json!(7)))
            .unwrap_or_else(|| panic!("no response in: {text}"));
        (json, session)
    })
}

#[test]
fn a_stateless_request_is_served_and_its_trace_reaches_the_upstream() {
    let up = upstreams("");
    let gateway = HttpGateway::start(&up.ws, &[]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    for service in ["m", "h"] {
        let tool = format!("mcp__{service}__traceparent");
        // In the request's _meta (SEP-414).
        let (response, session) = stateless_call(
            &rt,
            &gateway.url,
            &tool,
            json!({"traceparent": TRACEPARENT}),
            &[],
        );
        assert!(!session, "a stateless request was given a session");
        let result = &response["result"];
        assert_eq!(result["resultType"], "complete", "{response:#}");
        assert_eq!(result["content"][0]["text"], TRACEPARENT, "{response:#}");
        // In the HTTP request's W3C header.
        let (response, _) = stateless_call(
            &rt,
            &gateway.url,
            &tool,
            json!({}),
            &[("traceparent", TRACEPARENT)],
        );
        assert_eq!(
            response["result"]["content"][0]["text"], TRACEPARENT,
            "{response:#}"
        );
        // A malformed one is not passed on.
        let (response, _) = stateless_call(
            &rt,
            &gateway.url,
            &tool,
            json!({"traceparent": format!("00-{SECRET}-01")}),
            &[],
        );
        assert_eq!(
            response["result"]["content"][0]["text"], "none",
            "{response:#}"
        );
    }
}

/// An embedder's per-call asker that says yes and counts the questions.
struct YesSayer(std::sync::atomic::AtomicUsize);

impl airlock_host::session::AgentClient for YesSayer {
    fn capabilities(&self) -> airlock_host::session::AgentCapabilities {
        airlock_host::session::AgentCapabilities {
            sampling: false,
            elicitation: true,
            elicitation_url: false,
        }
    }
    fn create_message(
        &self,
        _service: String,
        _params: rmcp::model::CreateMessageRequestParams,
    ) -> airlock_host::session::AgentFuture<rmcp::model::CreateMessageResult> {
        Box::pin(async { Err(rmcp::ErrorData::invalid_request("no sampling", None)) })
    }
    fn elicit(
        &self,
        _service: String,
        params: rmcp::model::ElicitRequestParams,
    ) -> airlock_host::session::AgentFuture<rmcp::model::ElicitResult> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let text = serde_json::to_value(&params).unwrap().to_string();
        assert!(
            !text.contains(SECRET),
            "a question carried the secret: {text}"
        );
        Box::pin(async {
            Ok(
                serde_json::from_value(json!({"action": "accept", "content": {"ok": true}}))
                    .unwrap(),
            )
        })
    }
    fn log(&self, _service: &str, _message: rmcp::model::LoggingMessageNotificationParam) {}
}

/// An embedder answers a call's questions with `CallOptions::asker`; a server that keeps
/// asking is stopped after eight answered rounds with an error saying so.
#[tokio::test]
async fn an_embedder_answers_per_call_and_a_server_that_keeps_asking_is_stopped() {
    use airlock_host::{Airlock, CallOptions};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let up = upstreams("");
    let airlock = Airlock::start(up.ws.load(), up.ws.options()).await.unwrap();
    for service in ["m", "h", "l"] {
        let asker = Arc::new(YesSayer(AtomicUsize::new(0)));
        let options = CallOptions {
            asker: Some(asker.clone()),
            ..Default::default()
        };
        let out = airlock
            .calls()
            .call_with(
                &format!("mcp__{service}__confirm"),
                json!({"action": "wipe"}),
                options,
            )
            .await
            .unwrap_or_else(|e| panic!("{service}: {e}"));
        assert_eq!(out.content_json()[0]["text"], "wipe: approved", "{service}");
        assert_eq!(asker.0.load(Ordering::SeqCst), 1, "{service}");
    }
    let asker = Arc::new(YesSayer(AtomicUsize::new(0)));
    let options = CallOptions {
        asker: Some(asker.clone()),
        ..Default::default()
    };
    let refused = airlock
        .calls()
        .call_with("mcp__m__nag", json!({"action": "go"}), options)
        .await
        .expect_err("a server that never finishes is refused");
    assert!(
        refused.message.contains("asked for input 8 times"),
        "{refused:?}"
    );
    assert_eq!(asker.0.load(Ordering::SeqCst), 8);
    airlock.close().await;
}

/// A URL-mode elicitation passes the service's policy before anyone is asked: a URL the
/// policy denies never reaches the asker (the server hears why), an allowed one does.
#[tokio::test]
async fn a_url_a_server_sends_the_user_to_passes_the_policy_first() {
    use airlock_host::{Airlock, CallOptions};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let up = upstreams(
        "adapters = { policy = \"builtin:policy\" }\n\
         adapter_config = { policy = { deny_arguments = [{ name = \"phishing\", regex = \"evil\\\\.example\" }] } }",
    );
    let airlock = Airlock::start(up.ws.load(), up.ws.options()).await.unwrap();
    // The call's own arguments pass; the URL the server builds from them does not.
    for (site, asked, said) in [("good", 1, "sign-in: accept"), ("evil", 0, "phishing")] {
        let asker = Arc::new(YesSayer(AtomicUsize::new(0)));
        let options = CallOptions {
            asker: Some(asker.clone()),
            ..Default::default()
        };
        let out = airlock
            .calls()
            .call_with("mcp__l__sign_in", json!({"site": site}), options)
            .await
            .unwrap_or_else(|e| panic!("{site}: {e}"));
        let blocks = out.content_json();
        let text = blocks[0]["text"].as_str().unwrap_or_default();
        assert!(text.contains(said), "{site}: {text}");
        assert_eq!(asker.0.load(Ordering::SeqCst), asked, "{site}: {text}");
    }
    airlock.close().await;
}

/// A 2026-07-28 client's question round trip, by hand: the call answers `input_required`
/// with the upstream's question (its secret redacted) and an opaque `requestState`;
/// another agent presenting that state is refused and changes nothing; the asking agent's
/// retry with the answer completes the call; the same state is not accepted twice.
#[test]
fn a_suspended_call_answers_only_its_own_agent() {
    let up = upstreams("");
    let token = |agent: &str| {
        let (made, _) = up
            .ws
            .json(&["--agent", agent, "serve", "tokens", "add"], &[]);
        format!("Bearer {}", made["token"].as_str().expect("a token"))
    };
    let (ada, eve) = (token("ada"), token("eve"));
    let gateway = HttpGateway::start(&up.ws, &[]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let can_elicit = json!({"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}});
    for service in ["m", "l"] {
        let tool = format!("mcp__{service}__confirm");
        let args = json!({"arguments": {"action": "wipe"}});
        let (asked, _) = stateless_request(
            &rt,
            &gateway.url,
            &tool,
            args.clone(),
            can_elicit.clone(),
            &[("Authorization", &ada)],
        );
        let result = &asked["result"];
        assert_eq!(result["resultType"], "input_required", "{asked:#}");
        let state = result["requestState"]
            .as_str()
            .expect("a requestState")
            .to_string();
        let (key, question) = result["inputRequests"]
            .as_object()
            .and_then(|r| r.iter().next())
            .expect("one question");
        let message = question["params"]["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with("Really wipe?") && !message.contains(SECRET),
            "{service}: {question:#}"
        );
        let answer = json!({
            "requestState": state,
            "inputResponses": {key.clone(): {"action": "accept", "content": {"ok": true}}},
        });
        let mut retry = args.clone();
        retry
            .as_object_mut()
            .unwrap()
            .extend(answer.as_object().cloned().unwrap());
        let (stolen, _) = stateless_request(
            &rt,
            &gateway.url,
            &tool,
            retry.clone(),
            can_elicit.clone(),
            &[("Authorization", &eve)],
        );
        assert!(
            stolen["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("requestState")),
            "another agent resumed the call: {stolen:#}"
        );
        let (done, _) = stateless_request(
            &rt,
            &gateway.url,
            &tool,
            retry.clone(),
            can_elicit.clone(),
            &[("Authorization", &ada)],
        );
        assert_eq!(
            done["result"]["content"][0]["text"], "wipe: approved",
            "{done:#}"
        );
        let (again, _) = stateless_request(
            &rt,
            &gateway.url,
            &tool,
            retry,
            can_elicit.clone(),
            &[("Authorization", &ada)],
        );
        assert!(
            again["error"].is_object(),
            "a state was used twice: {again:#}"
        );
    }
}

/// `subscriptions/listen` end to end: a 2026-07-28 upstream that grows a tool says so only
/// on its listen stream; Airlock keeps one open per session, refreshes its catalog, and
/// tells a 2026-07-28 client on the client's own listen stream, over stdio and HTTP.
#[test]
fn a_modern_clients_listen_stream_hears_a_modern_upstreams_new_tool() {
    for over_http in [false, true] {
        let up = upstreams("");
        let gateway = over_http.then(|| HttpGateway::start(&up.ws, &[]));
        let target = match &gateway {
            Some(gateway) => vec!["--http".to_string(), gateway.url.clone()],
            None => stdio_target(&up.ws),
        };
        let report = modern_client_on(&up.ws, "2026-07-28", "listen:m", &target);
        assert_eq!(report["honored"], true, "{report:#}");
        assert_eq!(report["event"], "ToolsListChanged", "{report:#}");
        assert_eq!(report["grown"], true, "{report:#}");
    }
}

/// Resource updates across eras: a 2026-07-28 client subscribes to a 2026-07-28
/// upstream's resource on its listen stream; Airlock opens a listen stream upstream for
/// that one URI (the revision has no `resources/subscribe`), and the upstream's update
/// reaches the client under the URI the client knows, over stdio and HTTP.
#[test]
fn a_modern_upstreams_resource_update_reaches_a_modern_clients_listen_stream() {
    for over_http in [false, true] {
        let up = upstreams("");
        let gateway = over_http.then(|| HttpGateway::start(&up.ws, &[]));
        let target = match &gateway {
            Some(gateway) => vec!["--http".to_string(), gateway.url.clone()],
            None => stdio_target(&up.ws),
        };
        let report = modern_client_on(&up.ws, "2026-07-28", "updates:m", &target);
        let uri = report["uri"].as_str().expect("m's resource is listed");
        assert_eq!(report["honored"], json!([uri]), "{report:#}");
        assert_eq!(report["event"], "ResourceUpdated", "{report:#}");
        assert_eq!(report["updated"], uri, "{report:#}");
    }
}

/// A task-capable upstream (SEP-2663) answers a call with a task handle; Airlock follows
/// the task to its end, and its result is redacted and retained like any other.
#[test]
fn a_task_from_an_upstream_is_followed_to_its_result() {
    let ws = Workspace::new(&format!(
        "[mcp_servers.t]\ncommand = {}\nenv = {{ SERVICE_TOKEN = {} }}\n",
        toml_str(support::example_binary("task_server").display().to_string()),
        toml_str(SECRET),
    ));
    let (call, out) = ws.json(&["call", "mcp__t__report"], &[]);
    assert!(out.status.success(), "{call:#}");
    let text = call["text"].as_str().unwrap_or_default();
    assert!(
        text.starts_with("report ready, signed with ") && !text.contains(SECRET),
        "{call:#}"
    );
    assert_eq!(call["redacted"], true, "{call:#}");
    let id = call["output_id"].as_str().expect("the result was retained");
    let (page, _) = ws.json(&["output", "t", id], &[]);
    assert_eq!(page["text"], call["text"], "{page:#}");
    let (status, _) = ws.json(&["status"], &[]);
    assert!(status.to_string().contains("2026-07-28"), "{status:#}");
}
