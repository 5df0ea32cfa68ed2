//! What the gateway tests share: the services every one fronts, and rmcp calls and
//! results read as text.

use rmcp::model::CallToolRequestParams;
use serde_json::Value;

use super::*;

/// The credential the `fx` service holds, which no output may show.
pub const GATEWAY_SECRET: &str = "gw-secret-4f0c2b7d9e1a";

/// The services every gateway test fronts: `fx` (Python fixture, a credential in its
/// env), `raw` (hand-written server logging what it receives) and `every`
/// (server-everything).
pub fn gateway_workspace(raw_log: &std::path::Path, fx_style: Option<&str>) -> Workspace {
    let (node, everything) = everything_server();
    let naming = fx_style
        .map(|s| format!("adapter_config = {{ naming = {{ style = \"{s}\" }} }}\n"))
        .unwrap_or_default();
    Workspace::new(&format!(
        "[mcp_servers.fx]\ncommand = {}\nargs = [{}]\nenv = {{ SERVICE_TOKEN = {} }}\n{naming}\n\
         [mcp_servers.raw]\ncommand = {}\nargs = [{}]\nenv = {{ RAW_LOG = {} }}\ncancel_grace_secs = 1\n\n\
         [mcp_servers.every]\ncommand = {}\nargs = [{}, \"stdio\"]\n",
        toml_str(python().display().to_string()),
        toml_str(python_server("fixture_server.py").display().to_string()),
        toml_str(GATEWAY_SECRET),
        toml_str(python().display().to_string()),
        toml_str(python_server("raw_server.py").display().to_string()),
        toml_str(raw_log.display().to_string()),
        toml_str(node),
        toml_str(everything.display().to_string()),
    ))
}

/// A `tools/call` of `name` with `args` (an object).
pub fn call(name: &str, args: Value) -> CallToolRequestParams {
    let args = args.as_object().cloned().unwrap_or_default();
    CallToolRequestParams::new(name.to_string()).with_arguments(args)
}

/// The text blocks of a result, joined by newlines.
pub fn text_of(result: &rmcp::model::CallToolResult) -> String {
    let v = serde_json::to_value(result).unwrap();
    v["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}
