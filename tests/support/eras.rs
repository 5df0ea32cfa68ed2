//! The peers of the protocol-era tests: three upstreams of two eras on the official
//! Python SDKs (1.x and 2.x), and the SDK 2.x client run in front of a gateway.

use std::process::Command;

use serde_json::Value;

use super::*;

/// The secret every era's upstream knows.
pub const ERA_SECRET: &str = "era-secret-7c41d09b2e";

/// The three upstreams: `m` (SDK 2.x over stdio: 2026-07-28), `h` (SDK 2.x over stateless
/// streamable HTTP: 2026-07-28, its only way to ask a question), and `l` (SDK 1.x over
/// stdio: the handshake era). Each knows the same secret; for `h` Airlock learns it from
/// a credential-named header.
pub struct Upstreams {
    /// The workspace whose config names the three.
    pub ws: Workspace,
    _http: Background,
    /// The HTTP upstream's MCP endpoint.
    pub http_url: String,
    _turn: std::sync::MutexGuard<'static, ()>,
}

/// One stack of upstreams (and the gateways and clients in front of it) at a time: each
/// starts several Python interpreters, and on two cores a dozen at once would push a
/// cold `airlock serve` past the SDK client's 10 s discover timeout (it then falls back
/// to the handshake era, which is not what these tests are about).
static ONE_STACK_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The three upstreams, with `extra` config after them.
pub fn upstreams(extra: &str) -> Upstreams {
    let turn = ONE_STACK_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let port = free_port();
    let http = start_http_server(
        &modern_python().display().to_string(),
        &[
            &modern_peer("modern_server.py").display().to_string(),
            "http",
            &port.to_string(),
        ],
        &[("SERVICE_TOKEN", ERA_SECRET)],
        port,
    );
    let http_url = format!("http://127.0.0.1:{port}/mcp");
    let ws = Workspace::new(&format!(
        "[mcp_servers.m]\ncommand = {}\nargs = [{}, \"stdio\"]\nenv = {{ SERVICE_TOKEN = {secret} }}\n\n\
         [mcp_servers.h]\ntype = \"http\"\nurl = {}\nheaders = {{ X_API_TOKEN = {secret} }}\n\n\
         [mcp_servers.l]\ncommand = {}\nargs = [{}]\nenv = {{ SERVICE_TOKEN = {secret} }}\n{extra}\n",
        toml_str(modern_python().display().to_string()),
        toml_str(modern_peer("modern_server.py").display().to_string()),
        toml_str(&http_url),
        toml_str(python().display().to_string()),
        toml_str(python_server("handshake_server.py").display().to_string()),
        secret = toml_str(ERA_SECRET),
    ));
    Upstreams {
        ws,
        _http: http,
        http_url,
        _turn: turn,
    }
}

/// Runs the SDK 2.x client in `mode` against the services, and parses its report.
pub fn modern_client(ws: &Workspace, mode: &str, target: &[String]) -> Value {
    modern_client_on(ws, mode, "m,h,l", target)
}

/// [`modern_client`] with its SERVICES argument (`listen:NAME` for the listen walk).
pub fn modern_client_on(ws: &Workspace, mode: &str, services: &str, target: &[String]) -> Value {
    let out = Command::new(modern_python())
        .arg(modern_peer("modern_client.py"))
        .arg(mode)
        .arg(services)
        .args(target)
        // A gateway over stdio inherits these: the compiled plugins, no user config.
        .env("AIRLOCK_PLUGIN_CACHE", plugin_cache())
        .env("AIRLOCK_CONFIG", ws.dir.path().join("no-user-config.toml"))
        .output()
        .expect("run modern_client.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the SDK 2.x client ({mode}) failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).expect("one JSON report")
}

/// The SDK client's arguments for `airlock serve` over stdio in `ws`.
pub fn stdio_target(ws: &Workspace) -> Vec<String> {
    let mut target = vec!["--stdio".to_string(), airlock_bin().display().to_string()];
    target.extend(serve_args(ws, &["serve"]));
    target
}
