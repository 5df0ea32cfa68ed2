//! `GET /metrics` on `airlock serve --http`, scraped by a real Prometheus server
//! (Debian's `prometheus`, installed by scripts/test.sh) on loopback every second: after
//! a known number of calls its query API returns the call counter and the latency
//! histogram, and 1,000 calls with distinct arguments add no series (labels are
//! bounded). Behind `--require-token`, a scrape needs a valid bearer token. A label built
//! from a name the server chose (a tool named after its credential) leaves scrubbed.

mod support;

use std::collections::BTreeSet;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{HttpGateway, Workspace, free_port, modern_call, python, python_server, toml_str};

const CALLS: usize = 1_000;

fn workspace() -> Workspace {
    Workspace::new(&format!(
        "[mcp_servers.echo]\ncommand = {}\nargs = [{}]\n",
        toml_str(python().display().to_string()),
        toml_str(python_server("handshake_server.py").display().to_string()),
    ))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// `/metrics` as `token`: its status and text.
fn scrape(rt: &tokio::runtime::Runtime, mcp_url: &str, token: Option<&str>) -> (u16, String) {
    rt.block_on(async {
        let mut request = reqwest::Client::new().get(mcp_url.replace("/mcp", "/metrics"));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.expect("the gateway answers");
        (
            response.status().as_u16(),
            response.text().await.unwrap_or_default(),
        )
    })
}

/// The series in a scrape: each sample's name and labels, without its value.
fn series(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.rsplit_once(' ').map(|(series, _)| series.to_string()))
        .collect()
}

/// `n` stateless 2026-07-28 calls of `mcp__echo__echo`, each with its own text.
fn call_echo(rt: &tokio::runtime::Runtime, mcp_url: &str, n: usize) {
    rt.block_on(async {
        let client = reqwest::Client::new();
        for i in 0..n {
            let (status, text) = modern_call(
                &client,
                mcp_url,
                i as u64,
                "mcp__echo__echo",
                json!({"text": format!("distinct argument {i}")}),
                &[],
            )
            .await;
            assert_eq!(status, 200, "call {i}: {text}");
            assert!(text.contains("distinct argument"), "call {i}: {text}");
        }
    });
}

/// A Prometheus server scraping one target every second, killed on drop.
struct Prometheus {
    child: Child,
    api: String,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    fn start(target: &str) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: airlock\n    metrics_path: /metrics\n\
                 \x20   static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        let port = free_port();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start prometheus (scripts/test.sh installs Debian's package)");
        Prometheus {
            child,
            api: format!("http://127.0.0.1:{port}/api/v1"),
            _dir: dir,
        }
    }

    /// The value of the instant query `query`'s first sample, if any.
    fn query(&self, rt: &tokio::runtime::Runtime, query: &str) -> Option<f64> {
        rt.block_on(async {
            let encoded: String = form_urlencoded::byte_serialize(query.as_bytes()).collect();
            let response = reqwest::Client::new()
                .get(format!("{}/query?query={encoded}", self.api))
                .send()
                .await
                .ok()?;
            let body: Value = response.json().await.ok()?;
            body["data"]["result"][0]["value"][1]
                .as_str()
                .and_then(|v| v.parse().ok())
        })
    }

    /// Waits until `query` returns `wanted`.
    fn until(&self, rt: &tokio::runtime::Runtime, query: &str, wanted: f64) {
        let start = Instant::now();
        loop {
            let got = self.query(rt, query);
            if got == Some(wanted) {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "Prometheus answers {got:?} for {query}, not {wanted}"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

#[test]
fn prometheus_scrapes_the_call_counters_and_latency_and_labels_stay_bounded() {
    let ws = workspace();
    let gateway = HttpGateway::start(&ws, &[]);
    let rt = runtime();
    call_echo(&rt, &gateway.url, 1);
    // A first scrape, so that the scrapes' own counter exists before the baseline.
    scrape(&rt, &gateway.url, None);
    let (status, before) = scrape(&rt, &gateway.url, None);
    assert_eq!(status, 200, "{before}");
    assert!(
        before.contains(
            "airlock_calls_total{service=\"echo\",tool=\"mcp__echo__echo\",outcome=\"ok\"} 1"
        ),
        "{before}"
    );
    assert!(before.contains("airlock_build_info{version="), "{before}");

    call_echo(&rt, &gateway.url, CALLS);
    let (_, after) = scrape(&rt, &gateway.url, None);
    let added: Vec<_> = series(&after)
        .difference(&series(&before))
        .cloned()
        .collect();
    assert!(
        added.is_empty(),
        "{CALLS} calls with distinct arguments added series: {added:#?}"
    );
    assert!(
        !after.contains("distinct argument"),
        "an argument became a label"
    );

    let target = gateway
        .url
        .trim_start_matches("http://")
        .replace("/mcp", "");
    let prometheus = Prometheus::start(&target);
    prometheus.until(&rt, "up{job=\"airlock\"}", 1.0);
    let total = (CALLS + 1) as f64;
    prometheus.until(
        &rt,
        "airlock_calls_total{service=\"echo\",tool=\"mcp__echo__echo\",outcome=\"ok\"}",
        total,
    );
    prometheus.until(
        &rt,
        "airlock_call_duration_seconds_count{service=\"echo\",outcome=\"ok\"}",
        total,
    );
    prometheus.until(
        &rt,
        "airlock_call_duration_seconds_bucket{service=\"echo\",outcome=\"ok\",le=\"+Inf\"}",
        total,
    );
    let median = prometheus
        .query(
            &rt,
            "histogram_quantile(0.5, sum by (le) (airlock_call_duration_seconds_bucket{service=\"echo\"}))",
        )
        .expect("a median call latency");
    assert!(median > 0.0 && median < 10.0, "median {median} s");
}

#[test]
fn metrics_need_a_token_where_the_gateway_does() {
    let ws = workspace();
    let (made, _) = ws.json(&["--agent", "ops", "serve", "tokens", "add"], &[]);
    let token = made["token"].as_str().expect("a token").to_string();
    let gateway = HttpGateway::start(&ws, &["--require-token"]);
    let rt = runtime();
    assert_eq!(scrape(&rt, &gateway.url, None).0, 401);
    assert_eq!(scrape(&rt, &gateway.url, Some("wrong")).0, 401);
    let (status, text) = scrape(&rt, &gateway.url, Some(&token));
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("airlock_build_info"), "{text}");
    // The refused scrapes were counted too.
    assert!(
        text.contains("airlock_http_requests_total{route=\"metrics\",status=\"401\"} 2"),
        "{text}"
    );
}

#[test]
fn a_tool_named_after_the_credential_is_not_offered_and_reaches_no_label() {
    const TOKEN: &str = "tok9f8e7d6c5b4a39210fedcba";
    let ws = Workspace::new(&format!(
        "[mcp_servers.leaky]\ncommand = {}\nargs = [{}]\n\
         env = {{ SERVICE_TOKEN = {}, LEAKY_TOOL_NAME = \"1\" }}\n",
        toml_str(python().display().to_string()),
        toml_str(python_server("leaky_server.py").display().to_string()),
        toml_str(TOKEN),
    ));
    // The server named a tool after its credential: a name is shown, stored and called,
    // so that tool is not offered at all (its siblings are).
    let (listed, _) = ws.json(&["tools"], &[]);
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .expect("a tool list")
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"mcp__leaky__lookup"), "{names:?}");
    assert!(
        !names.iter().any(|n| n.starts_with("mcp__leaky__lookup_")),
        "{names:?}"
    );
    assert!(!listed.to_string().contains(TOKEN), "{listed}");

    let gateway = HttpGateway::start(&ws, &[]);
    let rt = runtime();
    let client = reqwest::Client::new();
    rt.block_on(async {
        let (status, text) = modern_call(
            &client,
            &gateway.url,
            1,
            "mcp__leaky__lookup",
            json!({"query": "q"}),
            &[],
        )
        .await;
        assert_eq!(status, 200, "{text}");
        assert!(text.contains("found q"), "{text}");
        // Called by the name the server gave it, it is unknown.
        let tool = format!("mcp__leaky__lookup_{TOKEN}");
        let (_, text) = modern_call(&client, &gateway.url, 2, &tool, json!({}), &[]).await;
        assert!(text.contains("no tool named"), "{text}");
        assert!(!text.contains(TOKEN), "{text}");
    });
    // The figures are read off the event stream: the call shows up shortly after it ends.
    let started = Instant::now();
    let text = loop {
        let (status, text) = scrape(&rt, &gateway.url, None);
        assert_eq!(status, 200, "{text}");
        if text.contains("airlock_calls_total{service=\"leaky\"") {
            break text;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no call counted: {text}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        !text.contains(TOKEN),
        "the credential reached a label:\n{text}"
    );
    let calls: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("airlock_calls_total{service=\"leaky\""))
        .collect();
    assert_eq!(
        calls,
        ["airlock_calls_total{service=\"leaky\",tool=\"mcp__leaky__lookup\",outcome=\"ok\"} 1"],
        "{text}"
    );
}
