//! The demo MCP server. Its tools return every kind of content block, and one of them
//! echoes the `DEMO_API_TOKEN` it was started with, so redaction has something to catch.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, EmbeddedResource,
    Implementation, JsonObject, ListToolsResult, PaginatedRequestParams, Resource,
    ResourceContents, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use serde_json::json;

/// A 4x4 PNG (a small chart), base64.
pub const DEMO_PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAQAAAAECAIAAAAmkwkpAAAAFklEQVR4nGNkYPjPwMDAxMDAwMDAAAANHQEDK+mvlgAAAABJRU5ErkJggg==";

/// The demo server's handler.
#[derive(Clone, Default)]
pub struct DemoServer;

fn schema(value: serde_json::Value) -> Arc<JsonObject> {
    Arc::new(value.as_object().cloned().unwrap_or_default())
}

fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "echo",
            "Echoes the given text back.",
            schema(
                json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
            ),
        ),
        Tool::new(
            "show_config",
            "Shows how the server is configured (including the API token it was given).",
            schema(json!({"type": "object"})),
        ),
        Tool::new(
            "render_chart",
            "Renders a small chart as a PNG image.",
            schema(json!({"type": "object"})),
        ),
        Tool::new(
            "read_docs",
            "Returns the server's documentation as embedded resources.",
            schema(json!({"type": "object"})),
        ),
        Tool::new(
            "add",
            "Adds two numbers.",
            schema(
                json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}),
            ),
        ),
        Tool::new(
            "fail",
            "Always fails, to show how tool errors look.",
            schema(json!({"type": "object"})),
        ),
    ]
}

fn text(t: impl Into<String>) -> ContentBlock {
    ContentBlock::text(t.into())
}

impl ServerHandler for DemoServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new("airlock-demo", env!("CARGO_PKG_VERSION"))
                    .with_title("Airlock demo server"),
            )
            .with_instructions("A demo server bundled with Airlock.")
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let args = request.arguments.unwrap_or_default();
        let result = match request.name.as_ref() {
            "echo" => {
                let t = args.get("text").and_then(|v| v.as_str()).ok_or_else(|| {
                    McpError::invalid_params("\"text\" (a string) is required", None)
                })?;
                CallToolResult::success(vec![text(t)])
            }
            "show_config" => {
                let token = std::env::var("DEMO_API_TOKEN").unwrap_or_else(|_| "(unset)".into());
                CallToolResult::success(vec![text(format!(
                    "region: eu-west\nendpoint: https://api.example.invalid\napi token: {token}\nvisible env vars: {}",
                    std::env::vars()
                        .map(|(k, _)| k)
                        .collect::<Vec<_>>()
                        .join(", ")
                ))])
            }
            "render_chart" => CallToolResult::success(vec![
                text("Weekly requests:"),
                ContentBlock::image(DEMO_PNG, "image/png"),
            ]),
            "read_docs" => CallToolResult::success(vec![
                ContentBlock::Resource(EmbeddedResource::new(ResourceContents::text(
                    "Airlock demo: try `airlock tools`.",
                    "demo://docs/readme",
                ))),
                ContentBlock::Resource(EmbeddedResource::new({
                    let mut blob = ResourceContents::blob("JVBERi0xLjQK", "demo://docs/manual.pdf");
                    if let ResourceContents::BlobResourceContents { mime_type, .. } = &mut blob {
                        *mime_type = Some("application/pdf".into());
                    }
                    blob
                })),
                ContentBlock::ResourceLink(Resource::new("demo://docs/changelog", "changelog")),
            ]),
            "add" => {
                let num = |k: &str| {
                    args.get(k).and_then(|v| v.as_f64()).ok_or_else(|| {
                        McpError::invalid_params(format!("\"{k}\" (a number) is required"), None)
                    })
                };
                let sum = num("a")? + num("b")?;
                let mut r = CallToolResult::success(vec![text(sum.to_string())]);
                r.structured_content = Some(json!({"sum": sum}));
                r
            }
            "fail" => CallToolResult::error(vec![text(
                "the demo backend is unreachable (this tool always fails)",
            )]),
            other => {
                return Err(McpError::invalid_params(
                    format!("unknown tool \"{other}\""),
                    None,
                ));
            }
        };
        Ok(result.into())
    }
}

/// Serves the demo server on stdin/stdout until the client disconnects.
pub async fn serve_stdio() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let service = DemoServer.serve(rmcp::transport::stdio()).await?;
    service.waiting().await?;
    Ok(())
}
