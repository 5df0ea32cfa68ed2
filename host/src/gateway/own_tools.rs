//! Airlock's own tools in the gateway, and the way every `tools/call` is run:
//! - `airlock_output` pages a retained result;
//! - `airlock_search_tools` runs the ranked search over the tools the agent may use;
//! - `airlock_status` reports the state of the agent's services;
//! - `airlock_describe_tool` and `airlock_call_tool` reach the catalog on the compact
//!   surface (`--tools meta`), whose tool list never changes.

use rmcp::RoleServer;
use rmcp::model::{CallToolResult, ProgressNotificationParam};
use rmcp::service::RequestContext;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::{ServeOptions, ToolSurface, results};
use crate::catalog::CatalogTool;
use std::sync::Arc;

use crate::session::{AgentClient, ProgressUpdate, TraceContext};
use crate::{Airlock, CallError, CallOptions, CallerRequest, ErrorCode};

/// What the own tools run against: the Airlock and how it is served.
pub struct Served<'a> {
    /// The Airlock behind the gateway.
    pub airlock: &'a Airlock,
    /// How it is served.
    pub options: &'a ServeOptions,
    /// Who answers the questions servers ask during a call, when not the agent's
    /// client (a 2026-07-28 caller, asked through `input_required`).
    pub asker: Option<Arc<dyn AgentClient>>,
}

/// How the gateway's tools are explained to the model (appended to the server's
/// instructions).
pub const INSTRUCTIONS: &str = "Results larger than the preview are kept by Airlock: \
the preview ends with a note naming the output, and airlock_output {service, output_id, \
offset} reads the rest. airlock_search_tools finds tools by words; airlock_status tells \
which services are up.";

const OUTPUT: &str = "airlock_output";
const SEARCH: &str = "airlock_search_tools";
const STATUS: &str = "airlock_status";
const DESCRIBE: &str = "airlock_describe_tool";
const CALL: &str = "airlock_call_tool";

/// Whether `name` is one of Airlock's own tools.
pub fn is_own(name: &str) -> bool {
    [OUTPUT, SEARCH, STATUS, DESCRIBE, CALL].contains(&name)
}

/// The own tools listed on `surface`, as MCP tool JSON.
pub fn definitions(surface: ToolSurface) -> Vec<Value> {
    let output = json!({
        "name": OUTPUT,
        "title": "Read a retained result",
        "description": "Reads a page of a tool result Airlock kept (results larger than the preview). Pass the service and output_id named in the result, and the offset to start at (next_offset of the previous page). Returns the page text; structuredContent is {text, next_offset, eof}.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "service": {"type": "string", "description": "The service that produced the result."},
                "output_id": {"type": "string", "description": "The output id from the result."},
                "offset": {"type": "integer", "minimum": 0, "description": "Byte offset to start at (default 0)."}
            },
            "required": ["service", "output_id"]
        },
        "annotations": {"readOnlyHint": true, "openWorldHint": false}
    });
    let search = json!({
        "name": SEARCH,
        "title": "Search the tools",
        "description": "Finds tools by words (service, namespace, tool name, description), best matches first. Returns each tool's name, service and description.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Words that should all appear."},
                "limit": {"type": "integer", "minimum": 1, "description": "Most tools to return (default 20)."}
            },
            "required": ["query"]
        },
        "annotations": {"readOnlyHint": true, "openWorldHint": false}
    });
    let status = json!({
        "name": STATUS,
        "title": "Service status",
        "description": "Reports each service's state (connected, disconnected, failed with the reason, untested…), its tool count and its server.",
        "inputSchema": {"type": "object", "properties": {}},
        "annotations": {"readOnlyHint": true, "openWorldHint": false}
    });
    let describe = json!({
        "name": DESCRIBE,
        "title": "Describe a tool",
        "description": "Returns a tool's full definition: its description and input schema. Use it before airlock_call_tool.",
        "inputSchema": {
            "type": "object",
            "properties": {"name": {"type": "string", "description": "The tool's name, as airlock_search_tools shows it."}},
            "required": ["name"]
        },
        "annotations": {"readOnlyHint": true, "openWorldHint": false}
    });
    let call = json!({
        "name": CALL,
        "title": "Call a tool",
        "description": "Calls a tool found with airlock_search_tools, with its arguments (a JSON object matching the tool's input schema).",
        "inputSchema": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "The tool's name."},
                "arguments": {"type": "object", "description": "The tool's arguments."}
            },
            "required": ["name"]
        }
    });
    match surface {
        ToolSurface::All => vec![output, search, status],
        ToolSurface::Meta => vec![search, describe, call, output],
    }
}

/// A catalog tool as MCP tool JSON: the qualified name, and the server's title and
/// annotations. The output schema is not passed on: a large result reaches the client as
/// a preview, which cannot promise structured content that conforms to it (the whole
/// result stays readable with `airlock_output`).
pub fn catalog_tool_json(tool: &CatalogTool) -> Value {
    let mut v = json!({
        "name": tool.name,
        "description": tool.description.clone().unwrap_or_default(),
        "inputSchema": tool.input_schema,
    });
    if let Some(title) = &tool.title {
        v["title"] = json!(title);
    }
    if let Some(annotations) = &tool.annotations {
        v["annotations"] = annotations.clone();
    }
    v
}

fn invalid(message: impl Into<String>) -> CallError {
    CallError::new(ErrorCode::InvalidArguments, message)
}

fn string_arg<'a>(args: &'a Value, key: &str) -> Result<&'a str, CallError> {
    args.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| invalid(format!("\"{key}\" is required and must be a string")))
}

/// Runs `tools/call` for `name`: one of Airlock's own tools, or a catalog tool.
pub async fn call(
    gateway: &Served<'_>,
    agent: &str,
    name: &str,
    arguments: Value,
    ctx: &RequestContext<RoleServer>,
) -> CallToolResult {
    let surface = gateway.options.tools;
    let outcome = match name {
        OUTPUT => read_output(gateway, agent, &arguments).await,
        SEARCH if definitions(surface).iter().any(|t| t["name"] == SEARCH) => {
            search(gateway, agent, &arguments)
        }
        STATUS if surface == ToolSurface::All => Ok(status(gateway, agent).await),
        DESCRIBE if surface == ToolSurface::Meta => describe(gateway, agent, &arguments),
        CALL if surface == ToolSurface::Meta => {
            let target = match string_arg(&arguments, "name") {
                Ok(target) => target.to_string(),
                Err(e) => return results::from_error(&e),
            };
            let args = arguments
                .get("arguments")
                .cloned()
                .unwrap_or_else(|| json!({}));
            return call_catalog(gateway, agent, &target, args, ctx).await;
        }
        _ => return call_catalog(gateway, agent, name, arguments, ctx).await,
    };
    match outcome {
        Ok(result) => result,
        Err(e) => results::from_error(&e),
    }
}

/// A catalog tool call with the client's progress token and cancellation.
async fn call_catalog(
    gateway: &Served<'_>,
    agent: &str,
    name: &str,
    arguments: Value,
    ctx: &RequestContext<RoleServer>,
) -> CallToolResult {
    let token = ctx.meta.get_progress_token();
    let (tx, mut rx) = mpsc::unbounded_channel::<ProgressUpdate>();
    // The client's progress, relayed in this task beside the call (no task of its own);
    // it ends once the call has returned and dropped its sender, so every progress
    // notification goes out before the result.
    let forward = async {
        let Some(token) = &token else { return };
        while let Some(update) = rx.recv().await {
            let param: Result<ProgressNotificationParam, _> = serde_json::from_value(json!({
                "progressToken": token,
                "progress": update.progress,
                "total": update.total,
                "message": update.message,
            }));
            if let Ok(param) = param {
                let _ = ctx.peer.notify_progress(param).await;
            }
        }
    };
    let options = CallOptions {
        agent: agent.to_string(),
        cancel: Some(ctx.ct.clone()),
        progress: token.is_some().then_some(tx),
        preview: Some(gateway.options.preview),
        trace: request_trace(ctx),
        asker: gateway.asker.clone(),
        request: Some(caller_request(ctx)),
        ..Default::default()
    };
    let (outcome, ()) = tokio::join!(
        gateway.airlock.calls().call_with(name, arguments, options),
        forward
    );
    match outcome {
        Ok(out) => results::from_output(out),
        Err(e) => results::from_error(&e),
    }
}

async fn read_output(
    gateway: &Served<'_>,
    agent: &str,
    args: &Value,
) -> Result<CallToolResult, CallError> {
    let service = string_arg(args, "service")?;
    let output_id = string_arg(args, "output_id")?;
    let offset = match args.get("offset") {
        None | Some(Value::Null) => 0,
        Some(v) => v
            .as_u64()
            .ok_or_else(|| invalid("\"offset\" must be a non-negative integer"))?
            as usize,
    };
    let page = gateway
        .airlock
        .outputs()
        .read_as(agent, service, output_id, offset)
        .await?;
    let structured = json!({"text": page.text, "next_offset": page.next_offset, "eof": page.eof});
    Ok(results::own(page.text, structured))
}

/// The catalog tools `agent` may see, by name.
fn visible(gateway: &Served<'_>, agent: &str) -> Vec<CatalogTool> {
    gateway
        .airlock
        .catalog()
        .tools_for(agent)
        .into_iter()
        .filter(|t| !is_own(&t.name))
        .collect()
}

fn search(gateway: &Served<'_>, agent: &str, args: &Value) -> Result<CallToolResult, CallError> {
    let query = string_arg(args, "query")?;
    let limit = args.get("limit").and_then(Value::as_u64).unwrap_or(20) as usize;
    let allowed: std::collections::HashSet<String> = visible(gateway, agent)
        .into_iter()
        .map(|t| t.name)
        .collect();
    let hits: Vec<CatalogTool> = gateway
        .airlock
        .catalog()
        .search(query)
        .into_iter()
        .filter(|t| allowed.contains(&t.name))
        .take(limit)
        .collect();
    let text = if hits.is_empty() {
        format!("No tool matches \"{query}\".")
    } else {
        hits.iter()
            .map(|t| {
                let first = t
                    .description
                    .as_deref()
                    .and_then(|d| d.lines().next())
                    .unwrap_or("");
                format!("{} ({}): {first}", t.name, t.service)
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    let structured = json!({
        "tools": hits.iter().map(|t| json!({
            "name": t.name,
            "service": t.service,
            "description": t.description,
            "incompatible": t.incompatible,
        })).collect::<Vec<_>>()
    });
    Ok(results::own(text, structured))
}

async fn status(gateway: &Served<'_>, agent: &str) -> CallToolResult {
    let reports = gateway.airlock.access().status_for(agent);
    let links = sign_in_links(gateway, agent, &reports).await;
    let text = reports
        .iter()
        .map(|r| {
            if let Some(url) = links.get(&r.service) {
                return format!(
                    "{}: {}; sign in to use it (as agent \"{agent}\"): open {url}",
                    r.service,
                    r.status.name()
                );
            }
            let detail = match &r.status {
                crate::ServiceStatus::Failed { reason }
                | crate::ServiceStatus::Untested { reason, .. } => format!(": {reason}"),
                crate::ServiceStatus::Connected { tools, .. }
                | crate::ServiceStatus::Disconnected { tools }
                | crate::ServiceStatus::Connecting { tools } => format!(", {tools} tools"),
                crate::ServiceStatus::Disabled => String::new(),
            };
            format!("{}: {}{detail}", r.service, r.status.name())
        })
        .collect::<Vec<_>>()
        .join("\n");
    let text = if text.is_empty() {
        "No services are available to this agent.".to_string()
    } else {
        text
    };
    let mut structured = json!({ "services": reports });
    if !links.is_empty() {
        structured["sign_in"] = json!(links);
    }
    results::own(text, structured)
}

/// The sign-in links of the services in `reports` that `agent` must authorize itself
/// and has not, when the gateway can take a browser back; once a browser comes back, the
/// service's tools are named through the agent's new session (clients get
/// `list_changed`).
#[cfg(feature = "http")]
async fn sign_in_links(
    gateway: &Served<'_>,
    agent: &str,
    reports: &[crate::ServiceReport],
) -> std::collections::BTreeMap<String, String> {
    let mut links = std::collections::BTreeMap::new();
    for report in reports {
        let services = gateway.airlock.services();
        let Some(mut started) = services.sign_in(agent, &report.service).await else {
            continue;
        };
        links.insert(report.service.clone(), started.url.clone());
        if started.joined {
            continue;
        }
        let (airlock, agent, service) = (
            gateway.airlock.clone(),
            agent.to_string(),
            report.service.clone(),
        );
        tokio::spawn(async move {
            if started.finished().await.is_ok() {
                airlock.services().name_as_caller(&agent, &service).await;
            }
        });
    }
    links
}

#[cfg(not(feature = "http"))]
async fn sign_in_links(
    _gateway: &Served<'_>,
    _agent: &str,
    _reports: &[crate::ServiceReport],
) -> std::collections::BTreeMap<String, String> {
    Default::default()
}

fn describe(gateway: &Served<'_>, agent: &str, args: &Value) -> Result<CallToolResult, CallError> {
    let name = string_arg(args, "name")?;
    let tool = visible(gateway, agent)
        .into_iter()
        .find(|t| t.name == name)
        .ok_or_else(|| {
            CallError::new(
                ErrorCode::UnknownTool,
                format!("no tool named \"{name}\"; find one with airlock_search_tools"),
            )
        })?;
    let definition = catalog_tool_json(&tool);
    let text = serde_json::to_string_pretty(&definition).unwrap_or_default();
    Ok(results::own(text, definition))
}

/// The client's trace context: `traceparent`/`tracestate` in the request's `_meta`
/// (SEP-414), else the HTTP request's W3C headers.
/// The client's request id and, over streamable HTTP with a session, its session id.
fn caller_request(ctx: &RequestContext<RoleServer>) -> CallerRequest {
    let session = ctx
        .extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.headers.get("mcp-session-id"))
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    CallerRequest {
        id: ctx.id.to_string(),
        session,
    }
}

fn request_trace(ctx: &RequestContext<RoleServer>) -> Option<TraceContext> {
    if let Some(parent) = ctx.meta.get_traceparent() {
        return TraceContext::new(parent, ctx.meta.get_tracestate());
    }
    let headers = &ctx.extensions.get::<http::request::Parts>()?.headers;
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    TraceContext::new(header("traceparent")?, header("tracestate"))
}
