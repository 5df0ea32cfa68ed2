//! OpenTelemetry traces from `airlock serve --http`, received by a real OTLP/HTTP
//! receiver on loopback that decodes the protobuf with the official definitions
//! (`opentelemetry-proto`). Calls arrive with a caller's `traceparent`; each must make
//! one trace, parented to that context, with the stage spans in order and the MCP
//! attributes; the upstream server (a Python SDK server over streamable HTTP) must see
//! Airlock's own context of the same trace, as a header and in `_meta`; no span may
//! carry the secret the tool returned or put in its error; JSON log lines written inside
//! a call carry its trace id.

mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::{Span, span::SpanKind, status::StatusCode};
use prost::Message;
use serde_json::{Value, json};
use support::{
    HttpGateway, Workspace, free_port, modern_call, python, python_server, start_http_server,
    toml_str,
};

const TOKEN: &str = "tok-otel-7f3a9c2e5b1d4f60";

/// Spans received, with the `service.name` of their resource.
type Received = Arc<Mutex<Vec<(String, Span)>>>;

/// An OTLP/HTTP receiver on 127.0.0.1: `POST /v1/traces` with a protobuf body.
async fn receiver() -> (String, Received) {
    let received = Received::default();
    let kept = received.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: axum::body::Bytes| {
            let kept = kept.clone();
            async move {
                let request = ExportTraceServiceRequest::decode(body).expect("valid OTLP protobuf");
                for resource in request.resource_spans {
                    let service = resource
                        .resource
                        .iter()
                        .flat_map(|r| &r.attributes)
                        .find(|a| a.key == "service.name")
                        .and_then(|a| text(a.value.as_ref()?.value.as_ref()?))
                        .unwrap_or_default();
                    for scope in resource.scope_spans {
                        for span in scope.spans {
                            kept.lock().unwrap().push((service.clone(), span));
                        }
                    }
                }
                axum::http::StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{address}"), received)
}

fn text(value: &Any) -> Option<String> {
    match value {
        Any::StringValue(s) => Some(s.clone()),
        Any::IntValue(i) => Some(i.to_string()),
        Any::BoolValue(b) => Some(b.to_string()),
        _ => None,
    }
}

fn attributes(span: &Span) -> BTreeMap<String, String> {
    span.attributes
        .iter()
        .filter_map(|a| Some((a.key.clone(), text(a.value.as_ref()?.value.as_ref()?)?)))
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The spans of trace `trace_id`, by start time.
fn trace_of(received: &Received, trace_id: &str) -> Vec<Span> {
    let mut spans: Vec<Span> = received
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, s)| hex(&s.trace_id) == trace_id)
        .map(|(_, s)| s.clone())
        .collect();
    spans.sort_by_key(|s| (s.start_time_unix_nano, s.end_time_unix_nano));
    spans
}

/// The stage each child of `root` stands for, in start order: its span name, except the
/// upstream request, a client span named after the MCP method and the server's tool.
fn stages_under(spans: &[Span], root: &Span) -> Vec<String> {
    spans
        .iter()
        .filter(|s| s.parent_span_id == root.span_id)
        .map(stage_of)
        .collect()
}

/// The stage `span` stands for (see `stages_under`).
fn stage_of(span: &Span) -> String {
    if span.kind == SpanKind::Client as i32 && span.name.starts_with("tools/call ") {
        "upstream".to_string()
    } else {
        span.name.clone()
    }
}

/// A trace as an indented tree: each span's name, duration and chosen attributes.
fn render(spans: &[Span]) -> String {
    fn walk(spans: &[Span], parent: &[u8], depth: usize, out: &mut String) {
        for span in spans.iter().filter(|s| s.parent_span_id == parent) {
            let micros = (span.end_time_unix_nano - span.start_time_unix_nano) / 1_000;
            let shown: Vec<String> = attributes(span)
                .into_iter()
                .filter(|(k, _)| !k.starts_with("code."))
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            out.push_str(&format!(
                "{}{} ({micros} µs) {}\n",
                "  ".repeat(depth),
                span.name,
                shown.join(" ")
            ));
            walk(spans, &span.span_id, depth + 1, out);
        }
    }
    let root = spans
        .iter()
        .find(|s| !spans.iter().any(|p| p.span_id == s.parent_span_id));
    let mut out = String::new();
    if let Some(root) = root {
        walk(spans, &root.parent_span_id, 0, &mut out);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_are_traced_to_a_collector_through_the_egress_rule() {
    let (collector, received) = receiver().await;
    let port = free_port();
    let work = tempfile::tempdir().unwrap();
    let trace_log = work.path().join("upstream-traces.jsonl");
    let _upstream = start_http_server(
        &python().display().to_string(),
        &[&python_server("traced_server.py").display().to_string()],
        &[
            ("PORT", &port.to_string()),
            ("SERVICE_TOKEN", TOKEN),
            ("TRACE_LOG", &trace_log.display().to_string()),
        ],
        port,
    );
    let ws = Workspace::new(&format!(
        "[mcp_servers.traced]\nurl = {}\nheaders = {{ Authorization = {} }}\n\
         adapters = {{ policy = \"builtin:policy\" }}\n\n\
         [mcp_servers.local]\ncommand = {}\nargs = [{}]\n\n\
         [telemetry]\notlp_endpoint = {}\nservice_name = \"airlock-under-test\"\n",
        toml_str(format!("http://127.0.0.1:{port}/mcp")),
        toml_str(format!("Bearer {TOKEN}")),
        toml_str(python().display().to_string()),
        toml_str(python_server("handshake_server.py").display().to_string()),
        toml_str(&collector),
    ));
    let gateway = HttpGateway::start_with_env(
        &ws,
        &["--log-format", "json"],
        &[("OTEL_BSP_SCHEDULE_DELAY", "100"), ("AIRLOCK_LOG", "info")],
    );
    let client = reqwest::Client::new();

    // Three calls, each from its own incoming trace.
    let callers = [
        (
            "4bf92f3577b34da6a3ce929d0e0e4736",
            "00f067aa0ba902b7",
            "mcp__traced__reveal",
        ),
        (
            "0af7651916cd43dd8448eb211c80319c",
            "b7ad6b7169203331",
            "mcp__traced__reveal",
        ),
        (
            "a3ce929d0e0e47364bf92f3577b34da6",
            "53995c3f42cd8ad8",
            "mcp__traced__refuse",
        ),
    ];
    for (i, (trace, parent, tool)) in callers.iter().enumerate() {
        let traceparent = format!("00-{trace}-{parent}-01");
        let (status, body) = modern_call(
            &client,
            &gateway.url,
            i as u64 + 1,
            tool,
            json!({}),
            &[("traceparent", &traceparent)],
        )
        .await;
        assert_eq!(status, 200, "{body}");
        assert!(
            !body.contains(TOKEN),
            "the result leaked the secret: {body}"
        );
    }

    // A stdio server's call is traced the same way (twice: opening the session, then
    // on the open one).
    let local = [
        ("5c1e8a4f0b9d47e2a6f3c8d1e4b7a902", "1f2e3d4c5b6a7980"),
        ("6d2f9b5a1c0e48f3b7a4d9e2f5c8b013", "2a3b4c5d6e7f8091"),
    ];
    for (i, (trace, parent)) in local.iter().enumerate() {
        let traceparent = format!("00-{trace}-{parent}-01");
        let (status, body) = modern_call(
            &client,
            &gateway.url,
            10 + i as u64,
            "mcp__local__echo",
            json!({"text": "over stdio"}),
            &[("traceparent", &traceparent)],
        )
        .await;
        assert_eq!(status, 200, "{body}");
    }

    // A 2025-11-25 client's call in its session: the root span names the session and the
    // request.
    let session_trace = "7e3f0a9b2c8d41e5a6b7c8d9e0f1a2b3";
    let session = open_session(&client, &gateway.url).await;
    let request = json!({
        "jsonrpc": "2.0", "id": 20, "method": "tools/call",
        "params": {"name": "mcp__local__echo", "arguments": {"text": "in a session"}},
    });
    let answer = client
        .post(&gateway.url)
        .header("Accept", "application/json, text/event-stream")
        .header("Mcp-Session-Id", &session)
        .header("Mcp-Protocol-Version", "2025-11-25")
        .header(
            "traceparent",
            format!("00-{session_trace}-3b4c5d6e7f809102-01"),
        )
        .json(&request)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let body = answer.text().await.unwrap();
    assert!(body.contains("in a session"), "{body}");

    // Every call's root and stage spans reach the collector.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let complete = callers.iter().all(|(trace, _, _)| {
            trace_of(&received, trace)
                .iter()
                .any(|s| s.name.starts_with("tools/call mcp__"))
                && trace_of(&received, trace).len() >= 8
        });
        if complete {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "spans missing after 30 s: {:#?}",
            received
                .lock()
                .unwrap()
                .iter()
                .map(|(_, s)| (&s.name, hex(&s.trace_id)))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;

    // The thread that sends the spans yields the cores to the calls: lowest priority.
    assert_eq!(
        thread_nice(gateway.pid(), "airlock-spans"),
        Some(19),
        "the span export thread's nice value"
    );

    let deadline = Instant::now() + Duration::from_secs(30);
    for (trace, parent) in local {
        let stages = loop {
            let spans = trace_of(&received, trace);
            if let Some(root) = spans
                .iter()
                .find(|s| s.name == "tools/call mcp__local__echo")
            {
                assert_eq!(hex(&root.parent_span_id), parent);
                break stages_under(&spans, root);
            }
            assert!(
                Instant::now() < deadline,
                "no root span for the stdio call in {trace}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(
            stages,
            [
                "access",
                "session",
                "upstream",
                "content",
                "redaction",
                "retain"
            ]
        );
    }

    let deadline = Instant::now() + Duration::from_secs(30);
    let root = loop {
        let spans = trace_of(&received, session_trace);
        if let Some(root) = spans
            .iter()
            .find(|s| s.name == "tools/call mcp__local__echo")
        {
            break root.clone();
        }
        assert!(
            Instant::now() < deadline,
            "no root span for the session's call"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let attrs = attributes(&root);
    assert_eq!(attrs["mcp.session.id"], session);
    assert_eq!(attrs["jsonrpc.request.id"], "20");

    let upstream_seen: Vec<Value> = std::fs::read_to_string(&trace_log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(upstream_seen.len(), 3, "{upstream_seen:?}");

    for (i, (trace, parent, tool)) in callers.iter().enumerate() {
        let spans = trace_of(&received, trace);
        let roots: Vec<&Span> = spans
            .iter()
            .filter(|s| s.name == format!("tools/call {tool}"))
            .collect();
        assert_eq!(
            roots.len(),
            1,
            "one root span per call in trace {trace}: {spans:#?}"
        );
        let root = roots[0];
        // Parented to the caller's context.
        assert_eq!(hex(&root.parent_span_id), *parent);
        let attrs = attributes(root);
        // Stateless 2026-07-28 requests: the request id, no session.
        assert_eq!(attrs["jsonrpc.request.id"], (i + 1).to_string());
        assert!(!attrs.contains_key("mcp.session.id"), "{attrs:?}");
        assert_eq!(attrs["mcp.method.name"], "tools/call");
        assert_eq!(attrs["gen_ai.tool.name"], *tool);
        assert_eq!(attrs["gen_ai.operation.name"], "execute_tool");
        assert_eq!(attrs["airlock.service"], "traced");
        assert!(!attrs["airlock.agent"].is_empty());

        // The stages, each a child of the root, in the order a call runs them.
        let stages = stages_under(&spans, root);
        let upstream = spans
            .iter()
            .find(|s| s.parent_span_id == root.span_id && stage_of(s) == "upstream")
            .expect("an upstream span");
        assert_eq!(upstream.kind, SpanKind::Client as i32);
        assert_eq!(
            upstream.name,
            format!("tools/call {}", tool.rsplit("__").next().unwrap())
        );

        // The server saw Airlock's upstream span as its parent, in the header and in _meta.
        let expected = format!("00-{trace}-{}-01", hex(&upstream.span_id));
        assert_eq!(
            upstream_seen[i]["header"],
            expected.as_str(),
            "{upstream_seen:?}"
        );
        assert_eq!(
            upstream_seen[i]["meta"],
            expected.as_str(),
            "{upstream_seen:?}"
        );

        assert_eq!(
            stages,
            [
                "access",
                "policy",
                "session",
                "upstream",
                "content",
                "redaction",
                "result_policy",
                "retain"
            ],
            "{spans:#?}"
        );
        assert!(!attrs["airlock.output_id"].is_empty(), "{attrs:?}");
        assert!(attrs["airlock.result.size"].parse::<u64>().unwrap() > 0);
        assert!(
            attrs["airlock.redactions"].parse::<u64>().unwrap() >= 1,
            "{attrs:?}"
        );
        let policy = spans
            .iter()
            .find(|s| s.name == "policy")
            .expect("a policy span");
        assert_eq!(attributes(policy)["airlock.policy.decision"], "allow");
        if *tool == "mcp__traced__reveal" {
            assert_eq!(attrs["airlock.outcome"], "ok");
        } else {
            // The server's error result: the call's outcome, its error type and status.
            assert_eq!(attrs["airlock.outcome"], "tool_error");
            assert_eq!(attrs["error.type"], "tool_error");
            let status = root.status.as_ref().expect("an error status");
            assert_eq!(status.code, StatusCode::Error as i32);
        }
    }

    // The first call's trace as the README shows it.
    eprintln!("{}", render(&trace_of(&received, callers[0].0)));

    // One trace per call: nothing else shares the callers' traces, and no span carries
    // the secret, whether in an attribute, an event or a status message.
    let all = received.lock().unwrap().clone();
    assert!(
        all.iter()
            .all(|(service, _)| service == "airlock-under-test")
    );
    let dump = format!("{all:?}");
    assert!(!dump.contains(TOKEN), "a span carries the secret");

    // JSON log lines written inside a call join its trace.
    let lines = gateway.stderr_lines();
    let decided: Vec<Value> = lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["fields"]["message"] == "policy decided")
        .collect();
    assert!(decided.len() >= 3, "{lines:#?}");
    for (trace, _, _) in &callers {
        assert!(
            decided
                .iter()
                .any(|v| v["trace_id"] == *trace
                    && v["span_id"].as_str().is_some_and(|s| s.len() == 16)),
            "no policy log line in trace {trace}: {decided:#?}"
        );
    }
    assert!(
        !lines.iter().any(|l| l.contains(TOKEN)),
        "a log line carries the secret"
    );
}

/// The nice value of process `pid`'s thread named `name` (`/proc/PID/task/TID/stat`,
/// field 19); `None` when it has no such thread.
fn thread_nice(pid: u32, name: &str) -> Option<i64> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
        .find(|task| {
            std::fs::read_to_string(task.path().join("comm")).is_ok_and(|c| c.trim() == name)
        })
        .and_then(|task| {
            let stat = std::fs::read_to_string(task.path().join("stat")).ok()?;
            // Fields after the command, `(comm)`, start at field 3.
            let after = &stat[stat.rfind(')')? + 1..];
            after.split_whitespace().nth(19 - 3)?.parse().ok()
        })
}

/// Opens a 2025-11-25 session on the gateway at `url`: its `Mcp-Session-Id`.
async fn open_session(client: &reqwest::Client, url: &str) -> String {
    let initialize = json!({
        "jsonrpc": "2.0", "id": 100, "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "tests", "version": "1"},
        },
    });
    let answer = client
        .post(url)
        .header("Accept", "application/json, text/event-stream")
        .json(&initialize)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let session = answer.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    answer.text().await.unwrap();
    let initialized = client
        .post(url)
        .header("Accept", "application/json, text/event-stream")
        .header("Mcp-Session-Id", &session)
        .header("Mcp-Protocol-Version", "2025-11-25")
        .json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .send()
        .await
        .unwrap();
    assert!(initialized.status().is_success());
    session
}
