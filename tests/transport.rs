//! HTTP transports against real peers: server-everything over streamable HTTP and the
//! legacy SSE fallback (calls, resources and prompts), and HTTP failures (nothing
//! listening, a web server that is not MCP) reported with the real error.

mod support;

use airlock_host::session::TransportKind;
use airlock_host::{Airlock, ServiceStatus};
use serde_json::json;
use support::{Workspace, toml_str};

fn http_entry(name: &str, url: &str) -> String {
    format!(
        "[mcp_servers.{name}]\ntype = \"http\"\nurl = {}\nstartup_timeout_secs = 20\n",
        toml_str(url)
    )
}

#[tokio::test]
async fn everything_over_streamable_http_and_legacy_sse() {
    let (_streamable, p1) = support::everything_http("streamableHttp");
    let (_sse, p2) = support::everything_http("sse");
    let ws = Workspace::new(&format!(
        "{}\n{}",
        http_entry("modern", &format!("http://127.0.0.1:{p1}/mcp")),
        http_entry("legacy", &format!("http://127.0.0.1:{p2}/sse"))
    ));
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let status = airlock.services().status();
    for report in &status {
        assert!(
            matches!(report.status, ServiceStatus::Connected { .. }),
            "{report:?}"
        );
    }
    let transport = |name: &str| {
        status
            .iter()
            .find(|s| s.service == name)
            .unwrap()
            .server
            .as_ref()
            .unwrap()
            .transport
    };
    assert_eq!(transport("modern"), TransportKind::StreamableHttp);
    assert_eq!(
        transport("legacy"),
        TransportKind::Sse,
        "a /sse endpoint falls back to the legacy transport"
    );
    for service in ["modern", "legacy"] {
        let out = airlock
            .calls()
            .call(
                &format!("mcp__{service}__echo"),
                json!({"message": format!("via {service}")}),
                None,
            )
            .await
            .unwrap();
        assert!(
            out.preview.contains(&format!("via {service}")),
            "{}",
            out.preview
        );
    }
    // Resources and prompts, per service and aggregated.
    let resources = airlock
        .resources()
        .list_resources("default", Some("modern"))
        .await
        .unwrap();
    assert!(!resources.is_empty());
    let uri = resources[0]["uri"].as_str().unwrap().to_string();
    let read = airlock
        .resources()
        .read_resource("default", "modern", &uri)
        .await
        .unwrap();
    assert!(
        read["contents"].as_array().is_some_and(|c| !c.is_empty()),
        "{read}"
    );
    let all = airlock
        .resources()
        .list_resources("default", None)
        .await
        .unwrap();
    assert!(
        all.iter().any(|r| r["service"] == "legacy")
            && all.iter().any(|r| r["service"] == "modern")
    );
    let prompts = airlock
        .resources()
        .list_prompts("default", Some("modern"))
        .await
        .unwrap();
    let simple = prompts
        .iter()
        .find(|p| p["arguments"].as_array().is_none_or(|a| a.is_empty()))
        .expect("a prompt without arguments");
    let got = airlock
        .resources()
        .get_prompt(
            "default",
            "modern",
            simple["name"].as_str().unwrap(),
            json!({}),
        )
        .await
        .unwrap();
    assert!(
        got["messages"].as_array().is_some_and(|m| !m.is_empty()),
        "{got}"
    );
    airlock.close().await;
}

#[tokio::test]
async fn http_failures_report_the_real_error() {
    // Nothing listens: no fallback, the real error.
    let closed = support::free_port();
    // A plain web server: not MCP at all, so both transports fail and both errors show.
    let web = support::free_port();
    let dir = tempfile::tempdir().unwrap();
    let _web = support::start_http_server(
        "python3",
        &[
            "-m",
            "http.server",
            &web.to_string(),
            "--bind",
            "127.0.0.1",
            "--directory",
            &dir.path().display().to_string(),
        ],
        &[],
        web,
    );
    let ws = Workspace::new(&format!(
        "{}\n{}",
        http_entry("refused", &format!("http://127.0.0.1:{closed}/mcp")),
        http_entry("web", &format!("http://127.0.0.1:{web}/mcp"))
    ));
    let airlock = Airlock::start(ws.load(), ws.options()).await.unwrap();
    let reason = |name: &str| match &airlock
        .services()
        .status()
        .into_iter()
        .find(|s| s.service == name)
        .unwrap()
        .status
    {
        ServiceStatus::Failed { reason } => reason.clone(),
        other => panic!("{name}: expected failure, got {other:?}"),
    };
    // A refused connection is said in words: where, and what happened; none of the
    // transport's type names.
    let refused = reason("refused");
    assert!(
        refused.contains(&format!(
            "cannot connect to http://127.0.0.1:{closed}/mcp: connection refused"
        )) && !refused.contains("SSE fallback")
            && !refused.contains("rmcp::")
            && !refused.contains("Transport ["),
        "{refused}"
    );
    let web_reason = reason("web");
    assert!(
        web_reason.contains("streamable HTTP")
            && web_reason.contains("SSE fallback failed too")
            && web_reason.contains("404")
            && !web_reason.contains("rmcp::"),
        "{web_reason}"
    );
    eprintln!("refused: {refused}\nweb: {web_reason}");
    airlock.close().await;
}
