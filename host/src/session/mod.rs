//! One MCP session with one server: the handshake (asking for 2025-11-25 and accepting
//! the older versions Airlock supports), paging through `tools/list`, `tools/call` with
//! a timeout that sends the server a cancellation, and a close that ends the process.

mod client;

use std::sync::Arc;
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest, ServerResult};
use rmcp::service::{PeerRequestOptions, RunningService, ServiceError, serve_client};
use serde_json::{Map, Value};

pub use client::{AirlockClient, ClientEvents};

use crate::error::{CallError, ErrorCode};
use crate::launch::{DEFAULT_KILL_GRACE, LaunchSpec, ServerProcess};

/// The protocol versions Airlock speaks, newest first. The handshake asks for the first.
pub const SUPPORTED_PROTOCOL_VERSIONS: &[&str] =
    &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// Why a session could not be opened or used.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The process could not be started.
    #[error(transparent)]
    Launch(#[from] crate::launch::LaunchError),
    /// The handshake did not finish in time.
    #[error("no MCP handshake within {0:?}{1}")]
    HandshakeTimeout(Duration, String),
    /// The handshake failed.
    #[error("MCP handshake failed: {0}{1}")]
    Handshake(String, String),
    /// The server answered with a protocol version Airlock does not speak.
    #[error(
        "the server answered protocol version {found}; Airlock asked for {asked} and supports {supported}"
    )]
    UnsupportedVersion {
        /// What the server said.
        found: String,
        /// What Airlock asked for.
        asked: String,
        /// All supported versions.
        supported: String,
    },
    /// A request after the handshake failed.
    #[error("{0}")]
    Request(String),
    /// The transport is not implemented yet for this server type.
    #[error("{0}")]
    Unsupported(String),
}

/// What the server said about itself in the handshake.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ServerIdentity {
    /// The negotiated protocol version.
    pub protocol_version: String,
    /// `serverInfo.name`.
    pub name: String,
    /// `serverInfo.title`.
    pub title: Option<String>,
    /// `serverInfo.version`.
    pub version: String,
    /// The server's instructions, if any.
    pub instructions: Option<String>,
}

/// An open session.
pub struct Session {
    service: RunningService<RoleClient, AirlockClient>,
    process: Option<ServerProcess>,
    identity: ServerIdentity,
}

fn stderr_suffix(process: &ServerProcess) -> String {
    let tail = process.stderr_tail();
    let tail = tail.trim();
    if tail.is_empty() {
        String::new()
    } else {
        let start = tail
            .char_indices()
            .rev()
            .nth(1999)
            .map(|(i, _)| i)
            .unwrap_or(0);
        format!("; server stderr: {}", &tail[start..])
    }
}

impl Session {
    /// Spawns a stdio server and performs the handshake within `timeout`.
    pub async fn connect_stdio(
        spec: &LaunchSpec,
        timeout: Duration,
        client: AirlockClient,
    ) -> Result<Session, SessionError> {
        let (mut process, stdout, stdin) = ServerProcess::spawn(spec)?;
        let transport = crate::transport::stdio(stdout, stdin);
        let outcome = tokio::time::timeout(timeout, serve_client(client, transport)).await;
        let service = match outcome {
            Ok(Ok(service)) => service,
            Ok(Err(e)) => {
                // Give a crashing server a moment to finish writing its stderr.
                tokio::time::sleep(Duration::from_millis(100)).await;
                let exit = process
                    .try_exit_status()
                    .map(|s| format!(" (process exited: {s})"))
                    .unwrap_or_default();
                let suffix = format!("{exit}{}", stderr_suffix(&process));
                process.terminate(DEFAULT_KILL_GRACE).await;
                return Err(SessionError::Handshake(e.to_string(), suffix));
            }
            Err(_) => {
                let suffix = stderr_suffix(&process);
                process.terminate(DEFAULT_KILL_GRACE).await;
                return Err(SessionError::HandshakeTimeout(timeout, suffix));
            }
        };
        let mut session = Session {
            identity: ServerIdentity::default(),
            service,
            process: Some(process),
        };
        match session.read_identity() {
            Ok(identity) => session.identity = identity,
            Err(e) => {
                session.close().await;
                return Err(e);
            }
        }
        Ok(session)
    }

    fn read_identity(&self) -> Result<ServerIdentity, SessionError> {
        let info = self.service.peer().peer_info().ok_or_else(|| {
            SessionError::Handshake("the server sent no initialize result".into(), String::new())
        })?;
        let value = serde_json::to_value(&*info).unwrap_or_default();
        let version = value
            .get("protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if !SUPPORTED_PROTOCOL_VERSIONS.contains(&version.as_str()) {
            return Err(SessionError::UnsupportedVersion {
                found: version,
                asked: SUPPORTED_PROTOCOL_VERSIONS[0].into(),
                supported: SUPPORTED_PROTOCOL_VERSIONS.join(", "),
            });
        }
        let server_info = value.get("serverInfo").cloned().unwrap_or_default();
        let s = |k: &str| {
            server_info
                .get(k)
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        Ok(ServerIdentity {
            protocol_version: version,
            name: s("name").unwrap_or_default(),
            title: s("title"),
            version: s("version").unwrap_or_default(),
            instructions: value
                .get("instructions")
                .and_then(Value::as_str)
                .map(str::to_string),
        })
    }

    /// What the server said about itself.
    pub fn identity(&self) -> &ServerIdentity {
        &self.identity
    }

    /// Every tool the server lists (all pages), as MCP JSON.
    pub async fn list_tools(&self) -> Result<Vec<Value>, SessionError> {
        let tools = self
            .service
            .peer()
            .list_all_tools()
            .await
            .map_err(|e| SessionError::Request(format!("tools/list failed: {e}")))?;
        Ok(tools
            .into_iter()
            .map(|t| serde_json::to_value(t).unwrap_or_default())
            .collect())
    }

    /// Calls a tool. The result is the server's `CallToolResult` as JSON (whatever its
    /// blocks, none dropped). On timeout the server is sent `notifications/cancelled`.
    pub async fn call_tool(
        &self,
        raw_name: &str,
        arguments: Map<String, Value>,
        timeout: Duration,
    ) -> Result<Value, CallError> {
        let params = CallToolRequestParams::new(raw_name.to_string()).with_arguments(arguments);
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let options = PeerRequestOptions::with_timeout(timeout);
        let handle = self
            .service
            .peer()
            .send_request_with_option(request, options)
            .await
            .map_err(|e| service_error(e, raw_name))?;
        match handle.await_response().await {
            Ok(ServerResult::CallToolResult(result)) => {
                Ok(serde_json::to_value(result).unwrap_or_default())
            }
            Ok(ServerResult::CustomResult(custom)) => Ok(custom.0),
            Ok(other) => Err(CallError::new(
                ErrorCode::ToolError,
                format!(
                    "the server answered tools/call with an unexpected result: {}",
                    serde_json::to_string(&other).unwrap_or_default()
                ),
            )),
            Err(e) => Err(service_error(e, raw_name)),
        }
    }

    /// Whether the connection is still up.
    pub fn is_closed(&self) -> bool {
        self.service.is_transport_closed()
    }

    /// Ends the session and the server process (and its process group).
    pub async fn close(self) {
        let Session {
            service, process, ..
        } = self;
        let _ = tokio::time::timeout(Duration::from_secs(2), service.cancel()).await;
        if let Some(process) = process {
            process.terminate(DEFAULT_KILL_GRACE).await;
        }
    }
}

/// Maps an rmcp error on a call to Airlock's error codes.
fn service_error(error: ServiceError, tool: &str) -> CallError {
    match error {
        ServiceError::Timeout { timeout } => CallError::new(
            ErrorCode::Timeout,
            format!(
                "tool \"{tool}\" did not answer within {:.1} s; the server was sent a cancellation",
                timeout.as_secs_f64()
            ),
        ),
        ServiceError::Cancelled { reason } => CallError::new(
            ErrorCode::Cancelled,
            format!("the call was cancelled: {}", reason.unwrap_or_default()),
        ),
        ServiceError::McpError(e) if e.code == rmcp::model::ErrorCode::INVALID_PARAMS => {
            CallError::new(
                ErrorCode::InvalidArguments,
                format!("the server rejected the arguments: {}", e.message),
            )
        }
        ServiceError::McpError(e) => CallError::new(
            ErrorCode::ToolError,
            format!("the server reported an error: {}", e.message),
        ),
        ServiceError::TransportClosed | ServiceError::TransportSend(_) => CallError::new(
            ErrorCode::ServiceUnavailable,
            "the connection to the server closed during the call".to_string(),
        ),
        other => CallError::new(ErrorCode::ToolError, other.to_string()),
    }
}

/// Shared so the library can hand sessions to concurrent callers.
pub type SharedSession = Arc<Session>;
