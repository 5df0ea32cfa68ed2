//! The policy peer (tests/peers/python/policy_server.py): workspaces of its services,
//! what reached each, and an Airlock over them with a person's approver.

use std::sync::Arc;

use airlock_host::Airlock;
use serde_json::Value;

use super::*;

/// The credential the policy peer's services hold.
pub const POLICY_TOKEN: &str = "policy-token-5b9e2c71";

/// A workspace with one policy-peer service per `(name, extra config)`, each logging
/// the calls that reach it to `<workspace>/<name>.log`.
pub fn policy_workspace(services: &[(&str, &str)]) -> Workspace {
    let ws = Workspace::new("");
    let mut config = String::new();
    for (name, extra) in services {
        let log = ws.dir.path().join(format!("{name}.log"));
        config.push_str(&format!(
            "[mcp_servers.{name}]\ncommand = {}\nargs = [{}]\nenv = {{ SERVICE_TOKEN = \"{POLICY_TOKEN}\", POLICY_CALL_LOG = {} }}\n{extra}\n\n",
            toml_str(python().display().to_string()),
            toml_str(python_server("policy_server.py").display().to_string()),
            toml_str(log.display().to_string()),
        ));
    }
    ws.rewrite(&config);
    ws
}

/// What reached `service`'s server, one JSON object per call.
pub fn arrived(ws: &Workspace, service: &str) -> Vec<Value> {
    let log =
        std::fs::read_to_string(ws.dir.path().join(format!("{service}.log"))).unwrap_or_default();
    log.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

pub async fn start_with(
    ws: &Workspace,
    approver: Option<Arc<dyn airlock_host::Approver>>,
) -> Airlock {
    let mut options = ws.options();
    options.approver = approver;
    Airlock::start(ws.load(), options).await.unwrap()
}
