//! Peers and gateways a test runs in the background: HTTP servers and `airlock serve
//! --http` killed with their process groups on drop, the reference servers' launch
//! lines, a 2026-07-28 stateless call, and a relay that takes an upstream down and up.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Child, Stdio};
use std::time::Duration;

use super::*;

/// A server process killed (with its group) on drop.
pub struct Background {
    child: std::process::Child,
}

impl Drop for Background {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::killpg(pid, nix::sys::signal::Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

/// Starts `program args` with `envs` in its own process group and waits until
/// 127.0.0.1:`port` accepts connections.
pub fn start_http_server(
    program: &str,
    args: &[&str],
    envs: &[(&str, &str)],
    port: u16,
) -> Background {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .process_group(0)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let child = cmd.spawn().expect("start the HTTP test server");
    let server = Background { child };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "{program} did not listen on port {port}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    server
}

/// `@modelcontextprotocol/server-everything` over HTTP (`transport` is `sse` or
/// `streamableHttp`) on a free port. Returns the server and its port.
pub fn everything_http(transport: &str) -> (Background, u16) {
    let (node, entry) = everything_server();
    let port = free_port();
    let server = start_http_server(
        &node,
        &[&entry.display().to_string(), transport],
        &[("PORT", &port.to_string())],
        port,
    );
    (server, port)
}

/// The entry point of `@modelcontextprotocol/server-filesystem`.
pub fn filesystem_server() -> PathBuf {
    must_exist(
        root()
            .join("tests/peers/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"),
        "@modelcontextprotocol/server-filesystem",
    )
}

/// The `airlock serve` command line for `ws`.
pub fn serve_args(ws: &Workspace, extra: &[&str]) -> Vec<String> {
    let mut args = vec![
        "--config".to_string(),
        ws.config().display().to_string(),
        "--data-dir".to_string(),
        ws.data().display().to_string(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// `airlock serve` over stdio in `ws` (its command line from [`serve_args`] with `extra`),
/// its stdin and stdout piped for an MCP client, killed when dropped.
pub fn stdio_gateway(ws: &Workspace, extra: &[&str]) -> tokio::process::Child {
    use std::process::Stdio;
    stdio_gateway_on(ws, extra, Stdio::piped(), Stdio::piped())
}

/// [`stdio_gateway`] with the given stdin and stdout (a socket pair, as Node starts
/// servers, say).
pub fn stdio_gateway_on(
    ws: &Workspace,
    extra: &[&str],
    stdin: std::process::Stdio,
    stdout: std::process::Stdio,
) -> tokio::process::Child {
    tokio::process::Command::new(super::airlock_bin())
        .args(serve_args(ws, extra))
        .current_dir(ws.dir.path())
        .env("AIRLOCK_CONFIG", ws.dir.path().join("no-user-config.toml"))
        .env("AIRLOCK_PLUGIN_CACHE", super::plugin_cache())
        .stdin(stdin)
        .stdout(stdout)
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("airlock serve starts")
}

/// A running `airlock serve --http`, killed with its process group on drop.
pub struct HttpGateway {
    child: Child,
    /// The endpoint, `http://127.0.0.1:PORT/mcp`.
    pub url: String,
    /// Every line it has written to stderr so far.
    stderr: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Drop for HttpGateway {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::killpg(pid, nix::sys::signal::Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

impl HttpGateway {
    /// Starts `airlock serve --http 127.0.0.1:0` with `extra` arguments.
    pub fn start(ws: &Workspace, extra: &[&str]) -> HttpGateway {
        HttpGateway::start_with_env(ws, extra, &[])
    }

    /// [`HttpGateway::start`] with `envs` set for the gateway.
    pub fn start_with_env(ws: &Workspace, extra: &[&str], envs: &[(&str, &str)]) -> HttpGateway {
        HttpGateway::start_on(ws, "127.0.0.1:0", extra, envs)
    }

    /// [`HttpGateway::start_with_env`] listening on `addr` (a port chosen beforehand, for
    /// a gateway whose own URL must be known before it starts).
    pub fn start_on(
        ws: &Workspace,
        addr: &str,
        extra: &[&str],
        envs: &[(&str, &str)],
    ) -> HttpGateway {
        let mut args = serve_args(ws, &["serve", "--http", addr]);
        args.extend(extra.iter().map(|s| s.to_string()));
        let mut child = Command::new(airlock_bin())
            .args(&args)
            .current_dir(ws.dir.path())
            .env("AIRLOCK_CONFIG", ws.dir.path().join("no-user-config.toml"))
            .env("AIRLOCK_PLUGIN_CACHE", plugin_cache())
            .envs(envs.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("start airlock serve --http");
        let stderr = child.stderr.take().expect("stderr is piped");
        let (tx, rx) = std::sync::mpsc::channel();
        let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let kept = lines.clone();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if !sent && let Some(at) = line.split("listening on ").nth(1) {
                    // The plain line, or a JSON log record's message.
                    let url = at.split(['"', ' ']).next().unwrap_or_default();
                    let _ = tx.send(url.trim().to_string());
                    sent = true;
                }
                kept.lock().unwrap().push(line);
            }
        });
        let url = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("airlock serve --http printed its address");
        HttpGateway {
            child,
            url,
            stderr: lines,
        }
    }

    /// The lines the gateway has written to stderr so far.
    pub fn stderr_lines(&self) -> Vec<String> {
        self.stderr.lock().unwrap().clone()
    }

    /// The gateway's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the gateway has exited (reaping it).
    pub fn try_wait(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }
}

/// One stateless 2026-07-28 `tools/call` to the HTTP gateway at `url` (a single POST
/// carrying the protocol version, client info and capabilities in `_meta`), with
/// `headers` added. Returns the HTTP status and the response body.
pub async fn modern_call(
    client: &reqwest::Client,
    url: &str,
    id: u64,
    tool: &str,
    arguments: Value,
    headers: &[(&str, &str)],
) -> (u16, String) {
    let body = serde_json::json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {
            "name": tool,
            "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "tests", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    });
    let mut request = client
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
    let status = response.status().as_u16();
    (status, response.text().await.unwrap_or_default())
}

/// A TCP relay in front of a real service (PostgreSQL, say) that a test can take down
/// and bring back, so the service's clients see an outage: [`Outage::cut`] closes every
/// relayed connection and refuses new ones (the service died), [`Outage::stall`] accepts
/// connections and forwards nothing (a network partition), [`Outage::restore`] relays
/// again. Loopback only; stops on drop.
pub struct Outage {
    port: u16,
    mode: std::sync::Arc<std::sync::atomic::AtomicU8>,
    live: std::sync::Arc<std::sync::Mutex<Vec<std::net::TcpStream>>>,
    stopping: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

const RELAY_UP: u8 = 0;
const RELAY_DOWN: u8 = 1;
const RELAY_STALLED: u8 = 2;

impl Outage {
    /// Relays `127.0.0.1:<port>` to `target`.
    pub fn start(target: std::net::SocketAddr) -> Outage {
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let outage = Outage {
            port: listener.local_addr().unwrap().port(),
            mode: Default::default(),
            live: Default::default(),
            stopping: Default::default(),
        };
        let (mode, live, stopping) = (
            outage.mode.clone(),
            outage.live.clone(),
            outage.stopping.clone(),
        );
        std::thread::spawn(move || {
            for incoming in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(client) = incoming else { continue };
                match mode.load(Ordering::SeqCst) {
                    RELAY_DOWN => drop(client),
                    RELAY_STALLED => live.lock().unwrap().push(client),
                    _ => {
                        let Ok(server) = std::net::TcpStream::connect(target) else {
                            continue;
                        };
                        let mut held = live.lock().unwrap();
                        held.push(client.try_clone().unwrap());
                        held.push(server.try_clone().unwrap());
                        for (from, to) in [
                            (client.try_clone().unwrap(), server.try_clone().unwrap()),
                            (server, client),
                        ] {
                            let mode = mode.clone();
                            std::thread::spawn(move || relay(from, to, &mode));
                        }
                    }
                }
            }
        });
        outage
    }

    /// The relay's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The service is gone: every connection closes, new ones are refused at once.
    pub fn cut(&self) {
        self.set(RELAY_DOWN);
    }

    /// The network is partitioned: connections are accepted and nothing goes through.
    pub fn stall(&self) {
        self.set(RELAY_STALLED);
    }

    /// The service is back.
    pub fn restore(&self) {
        self.set(RELAY_UP);
    }

    fn set(&self, mode: u8) {
        self.mode.store(mode, std::sync::atomic::Ordering::SeqCst);
        if mode != RELAY_STALLED {
            for stream in self.live.lock().unwrap().drain(..) {
                let _ = stream.shutdown(std::net::Shutdown::Both);
            }
        }
    }
}

/// Copies `from` to `to` until either closes, holding what it read while the relay is
/// stalled.
fn relay(
    mut from: std::net::TcpStream,
    mut to: std::net::TcpStream,
    mode: &std::sync::atomic::AtomicU8,
) {
    use std::io::{Read, Write};
    let mut buffer = [0u8; 16 * 1024];
    while let Ok(n @ 1..) = from.read(&mut buffer) {
        while mode.load(std::sync::atomic::Ordering::SeqCst) == RELAY_STALLED {
            std::thread::sleep(Duration::from_millis(10));
        }
        if to.write_all(&buffer[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Both);
}

impl Drop for Outage {
    fn drop(&mut self) {
        self.stopping
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = std::net::TcpStream::connect(("127.0.0.1", self.port));
        self.set(RELAY_UP);
    }
}
