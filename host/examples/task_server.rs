//! A task-capable MCP server (the `io.modelcontextprotocol/tasks` extension, SEP-2663)
//! over stdio, on rmcp's types: no official server implements tasks yet, and Airlock's
//! tests need one (tests/protocol.rs).
//!
//! Its one tool, `report`, answers a client that declared the tasks extension with a
//! task handle, and completes the task `ms` milliseconds later (300 unless the call
//! says) with a text that carries `SERVICE_TOKEN` (so a test sees it redacted). A client without the extension gets
//! the result at once. `tasks/get` reports the task (its result once completed);
//! `tasks/cancel` cancels it.
//!
//! ```sh
//! SERVICE_TOKEN=… target/debug/examples/task_server
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ContentBlock,
    CreateTaskResult, DetailedTask, GetTaskParams, GetTaskResult, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Task, TaskPayload, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};

/// The tasks this server runs, by id.
#[derive(Clone, Default)]
struct Tasks(Arc<Mutex<HashMap<String, DetailedTask>>>);

impl Tasks {
    fn set(&self, id: &str, payload: TaskPayload) {
        let mut tasks = self.0.lock().expect("tasks");
        if let Some(task) = tasks.get_mut(id)
            && !task.status().is_terminal()
        {
            *task = DetailedTask::new(task.task.clone(), payload);
        }
    }
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339()
}

fn report_text() -> String {
    format!(
        "report ready, signed with {}",
        std::env::var("SERVICE_TOKEN").unwrap_or_default()
    )
}

#[derive(Clone, Default)]
struct TaskServer {
    tasks: Tasks,
}

impl ServerHandler for TaskServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build(),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let schema = serde_json::json!({
            "type": "object",
            "properties": {"ms": {"type": "integer", "description": "How long the report takes"}},
        });
        let tool = Tool::new(
            "report",
            "Writes a report, as a task when the client takes tasks",
            Arc::new(schema.as_object().cloned().unwrap_or_default()),
        );
        Ok(ListToolsResult::with_all_items(vec![tool]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if request.name != "report" {
            return Err(McpError::invalid_params("no such tool", None));
        }
        let takes_tasks = ctx
            .client_capabilities()
            .is_some_and(|c| c.supports_tasks());
        let ms = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("ms"))
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(300);
        if !takes_tasks {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            return Ok(CallToolResult::success(vec![ContentBlock::text(report_text())]).into());
        }
        let id = uuid::Uuid::new_v4().simple().to_string();
        let task = Task::new(&id, Default::default(), now(), now()).with_poll_interval_ms(100);
        self.tasks.0.lock().expect("tasks").insert(
            id.clone(),
            DetailedTask::new(task.clone(), TaskPayload::Working),
        );
        let tasks = self.tasks.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            let result = CallToolResult::success(vec![ContentBlock::text(report_text())]);
            let result = serde_json::to_value(result)
                .ok()
                .and_then(|v| v.as_object().cloned())
                .unwrap_or_default();
            tasks.set(&id, TaskPayload::Completed { result });
        });
        Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        let tasks = self.tasks.0.lock().expect("tasks");
        let task = tasks
            .get(&request.task_id)
            .cloned()
            .ok_or_else(|| McpError::invalid_params("no such task", None))?;
        Ok(GetTaskResult::new(task))
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.tasks.set(&request.task_id, TaskPayload::Cancelled);
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let running = TaskServer::default()
        .serve(rmcp::transport::stdio())
        .await?;
    running.waiting().await?;
    Ok(())
}
