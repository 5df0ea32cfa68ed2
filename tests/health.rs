//! `GET /healthz` and `GET /readyz` on `airlock serve --http`, as a load balancer uses
//! them: the process answers; readiness follows the registry (a real PostgreSQL cluster
//! of the test's own, stopped and started again) and lists degraded services only to a
//! caller the gateway would let in.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{HttpGateway, Workspace, free_port, python, python_server, toml_str};

/// GETs `path` on the gateway whose MCP endpoint is `mcp_url`; returns the status and
/// the JSON body.
fn get(mcp_url: &str, path: &str, token: Option<&str>) -> (u16, Value) {
    let url = mcp_url.replace("/mcp", path);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut request = reqwest::Client::new().get(&url);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.expect("the gateway answers");
        let status = response.status().as_u16();
        let body = response.json::<Value>().await.expect("a JSON body");
        (status, body)
    })
}

/// Polls `/readyz` until its status is `wanted`.
fn readyz_until(url: &str, token: Option<&str>, wanted: u16, within: Duration) -> Value {
    let start = Instant::now();
    loop {
        let (status, body) = get(url, "/readyz", token);
        if status == wanted {
            return body;
        }
        assert!(
            start.elapsed() < within,
            "/readyz still answers {status}, not {wanted}, after {within:?}: {body:#}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn healthz_answers_and_readyz_lists_degraded_services_only_to_those_let_in() {
    let ws = Workspace::new(&format!(
        "[mcp_servers.fine]\ncommand = {}\nargs = [{}]\n\n\
         [mcp_servers.broken]\ncommand = \"/nonexistent/mcp-server\"\n",
        toml_str(python().display().to_string()),
        toml_str(python_server("handshake_server.py").display().to_string()),
    ));
    let (made, _) = ws.json(&["--agent", "ops", "serve", "tokens", "add"], &[]);
    let token = made["token"].as_str().expect("a token").to_string();
    let gateway = HttpGateway::start(&ws, &["--require-token"]);

    let (status, body) = get(&gateway.url, "/healthz", None);
    assert_eq!((status, body["status"].as_str()), (200, Some("ok")));

    // Without a token: the verdict only.
    let (status, body) = get(&gateway.url, "/readyz", None);
    assert_eq!(status, 200, "{body:#}");
    assert_eq!(body, serde_json::json!({"ready": true}));
    let (_, body) = get(&gateway.url, "/readyz", Some("not-a-token"));
    assert_eq!(body, serde_json::json!({"ready": true}));

    // With one: what was checked, and which services cannot serve.
    let (status, body) = get(&gateway.url, "/readyz", Some(&token));
    assert_eq!(status, 200, "{body:#}");
    assert_eq!(body["registry"]["ok"], true, "{body:#}");
    assert_eq!(body["registry"]["target"], "SQLite", "{body:#}");
    assert_eq!(body["results"]["ok"], true, "{body:#}");
    assert_eq!(
        body["degraded"],
        serde_json::json!([{"service": "broken", "state": "failed"}]),
        "{body:#}"
    );
}

/// A PostgreSQL cluster of this test's own, on loopback, that the test can stop.
struct Cluster {
    bin: PathBuf,
    data: PathBuf,
    port: u16,
    _dir: tempfile::TempDir,
}

/// Runs a PostgreSQL program as an unprivileged user when the test runs as root
/// (PostgreSQL refuses root).
fn as_owner(program: &Path) -> Command {
    use std::os::unix::fs::MetadataExt;
    // /proc/self belongs to the process's effective user.
    let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
    if root {
        let mut command = Command::new("setpriv");
        command
            .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"])
            .arg(program);
        command
    } else {
        Command::new(program)
    }
}

fn pg_bin() -> PathBuf {
    if let Ok(bin) = std::env::var("AIRLOCK_TEST_PG_BIN") {
        return PathBuf::from(bin);
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|p| p.join("initdb").exists())
        .collect();
    found.sort();
    found.pop().expect(
        "PostgreSQL's programs (initdb, pg_ctl): scripts/test.sh installs them and sets AIRLOCK_TEST_PG_BIN",
    )
}

impl Cluster {
    fn start() -> Cluster {
        let bin = pg_bin();
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o777),
        )
        .unwrap();
        let data = dir.path().join("data");
        let out = as_owner(&bin.join("initdb"))
            .arg("-D")
            .arg(&data)
            .args(["-U", "airlock", "--auth=trust", "-E", "UTF8"])
            .output()
            .expect("run initdb");
        assert!(out.status.success(), "initdb: {out:?}");
        let cluster = Cluster {
            bin,
            data,
            port: free_port(),
            _dir: dir,
        };
        cluster.pg_ctl_start();
        cluster
    }

    fn pg_ctl_start(&self) {
        let socket_dir = self.data.parent().unwrap().display().to_string();
        let out = as_owner(&self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(&self.data)
            .arg("-l")
            .arg(self.data.parent().unwrap().join("server.log"))
            .arg("-o")
            .arg(format!(
                "-c listen_addresses=127.0.0.1 -p {} -k {socket_dir} -c fsync=off",
                self.port
            ))
            .args(["-w", "start"])
            .output()
            .expect("run pg_ctl start");
        assert!(out.status.success(), "pg_ctl start: {out:?}");
    }

    fn stop(&self) {
        let out = as_owner(&self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(&self.data)
            .args(["-m", "immediate", "-w", "stop"])
            .output()
            .expect("run pg_ctl stop");
        assert!(out.status.success(), "pg_ctl stop: {out:?}");
    }

    fn url(&self) -> String {
        format!("postgres://airlock@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = as_owner(&self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(&self.data)
            .args(["-m", "immediate", "-w", "stop"])
            .output();
    }
}

#[test]
fn readyz_fails_while_the_postgresql_registry_is_down_and_recovers_after() {
    let cluster = Cluster::start();
    let ws = Workspace::with_storage(
        &format!(
            "[mcp_servers.fine]\ncommand = {}\nargs = [{}]\n",
            toml_str(python().display().to_string()),
            toml_str(python_server("handshake_server.py").display().to_string()),
        ),
        &format!("[registry]\nurl = {}\n", toml_str(cluster.url())),
    );
    let gateway = HttpGateway::start(&ws, &[]);
    // On loopback without required tokens, every caller sees the details.
    let body = readyz_until(&gateway.url, None, 200, Duration::from_secs(10));
    assert!(
        body["registry"]["target"]
            .as_str()
            .is_some_and(|t| t.starts_with("PostgreSQL postgres://")),
        "{body:#}"
    );

    cluster.stop();
    let down = readyz_until(&gateway.url, None, 503, Duration::from_secs(15));
    assert_eq!(down["ready"], false, "{down:#}");
    assert_eq!(down["registry"]["ok"], false, "{down:#}");
    assert!(down["registry"]["error"].is_string(), "{down:#}");
    assert_eq!(down["results"]["ok"], true, "{down:#}");
    // The process itself still serves.
    assert_eq!(get(&gateway.url, "/healthz", None).0, 200);

    cluster.pg_ctl_start();
    let back = readyz_until(&gateway.url, None, 200, Duration::from_secs(30));
    assert_eq!(back["registry"]["ok"], true, "{back:#}");
}
