//! One MCP session with one server: the start (`server/discover` at 2026-07-28, else the
//! `initialize` handshake at 2025-11-25, accepting the older versions Airlock supports), over stdio or HTTP (streamable HTTP first, legacy
//! SSE as the fallback); `tools/list`, `tools/call` with timeout, cancellation and
//! progress; resources and prompts; roots updates; and a close that ends the process.
//!
//! Cancellation: a cancelled or timed-out call sends `notifications/cancelled` and is
//! abandoned (never repeated). Later calls wait through a grace period unless the server
//! answers the cancelled request first; if it never does, the next result carries a
//! warning that the cancelled work may still be running.
//!
//! Layer 3 (sessions). May import: `launch`, `transport`, `oauth`, `config`, `secrets`, `events`, `error`, `mcp`, `telemetry` (the `traceparent` reader).

mod agent;
mod client;
mod connect;
mod drain;
mod errors;
mod guard;
#[cfg(feature = "http")]
mod http;
mod identity;
mod input;
mod listen;
pub mod pool;
mod probe;
mod progress;
mod tasks;
mod trace;

use std::collections::HashMap;
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientNotification, ClientRequest, CustomNotification,
    GetPromptRequest, GetPromptRequestParams, ReadResourceRequest, ReadResourceRequestParams,
    ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, RunningService, ServiceError};
use serde_json::{Map, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub use agent::{AgentCapabilities, AgentClient, AgentFuture, AgentLink, PerCallAskers};
pub use client::{AirlockClient, ProgressUpdate, ServerNotice, root_uri};
pub use connect::{ConnectOptions, Connected, connect};
pub use drain::DEFAULT_CANCEL_GRACE;
use errors::{cancelled, service_error, timed_out, until};
pub use guard::{ConnectAttempt, GuardReport, Permit, UpstreamGuard};
pub use identity::ServerIdentity;
use identity::{placeholder_identity, read_identity};
pub use pool::{AcquireError, LiveSession, SessionPool};
pub use trace::TraceContext;

use crate::error::{CallError, ErrorCode};
use crate::launch::{DEFAULT_KILL_GRACE, ServerProcess};

/// The protocol versions Airlock speaks, newest first. A session probes `server/discover`
/// at the first and falls back to `initialize` at the second.
pub const SUPPORTED_PROTOCOL_VERSIONS: &[&str] = &[
    "2026-07-28",
    "2025-11-25",
    "2025-06-18",
    "2025-03-26",
    "2024-11-05",
];

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
    /// The HTTP server refused the connection for want of (valid) credentials.
    #[error("the server at {url} requires authorization{}", challenge.as_deref().map(|c| format!(" ({c})")).unwrap_or_default())]
    Unauthorized {
        /// The endpoint.
        url: String,
        /// The `WWW-Authenticate` challenge, when the server sent one.
        challenge: Option<String>,
    },
    /// The service needs a person to authorize it (the message names the command).
    #[error("{0}")]
    Authorization(String),
    /// A service reached as each calling agent has nothing of this agent's to call it
    /// with (no access token to exchange, or no authorization of its own): a refusal of
    /// this agent, not a failure of the service.
    #[error("{0}")]
    AgentUnauthorized(String),
    /// A request after the handshake failed.
    #[error("{0}")]
    Request(String),
}

/// How the session reaches its server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TransportKind {
    /// A child process over stdin/stdout.
    Stdio,
    /// Streamable HTTP.
    StreamableHttp,
    /// Legacy HTTP+SSE (2024-11-05).
    Sse,
}

impl TransportKind {
    /// The wire name: `stdio`, `streamable-http` or `sse`.
    pub fn as_str(self) -> &'static str {
        match self {
            TransportKind::Stdio => "stdio",
            TransportKind::StreamableHttp => "streamable-http",
            TransportKind::Sse => "sse",
        }
    }
}

/// Per-call controls.
#[derive(Debug, Clone, Default)]
pub struct CallControl {
    /// The call's timeout (a cancellation is sent when it passes).
    pub timeout: Option<Duration>,
    /// Cancels the call when triggered.
    pub cancel: Option<CancellationToken>,
    /// Receives the server's progress notifications for this call.
    pub progress: Option<mpsc::UnboundedSender<ProgressUpdate>>,
    /// The caller's trace, passed on in the request's `_meta`.
    pub trace: Option<TraceContext>,
    /// Answers the questions the server asks during this call (else the agent's client
    /// does).
    pub asker: Option<std::sync::Arc<dyn AgentClient>>,
}

/// A `tools/call` outcome: the result, plus a warning when an earlier cancelled call on
/// this session never answered.
#[derive(Debug, Clone)]
pub struct CallReply {
    /// The server's result, every block kept.
    pub result: crate::mcp::ToolResult,
    /// Set when cancelled work may still be running on the server.
    pub warning: Option<String>,
}

/// An open session.
pub struct Session {
    service: RunningService<RoleClient, AirlockClient>,
    client: AirlockClient,
    process: Option<ServerProcess>,
    identity: ServerIdentity,
    drain: drain::DrainGate,
    /// The `subscriptions/listen` stream of a 2026-07-28 server.
    _changes: Option<listen::ChangeListener>,
    /// Whether the server speaks 2026-07-28 (resource updates come on listen streams).
    modern: bool,
    /// A 2026-07-28 server's update streams, one per subscribed resource URI.
    updates: std::sync::Mutex<HashMap<String, listen::ChangeListener>>,
}

pub(crate) fn stderr_suffix(process: &ServerProcess) -> String {
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
    async fn finish(
        service: RunningService<RoleClient, AirlockClient>,
        client: AirlockClient,
        process: Option<ServerProcess>,
        transport: TransportKind,
    ) -> Result<Session, SessionError> {
        match read_identity(&service, transport) {
            Ok(mut identity) => {
                // What the server says about itself is shown in status and stored with
                // tested catalogs: it leaves through the host's scrubber.
                for text in [&mut identity.name, &mut identity.version] {
                    *text = client.scrub(text);
                }
                identity.title = identity.title.map(|t| client.scrub(&t));
                identity.instructions = identity.instructions.map(|t| client.scrub(&t));
                // The newest revision Airlock speaks is the first it lists.
                let modern = identity.protocol_version.as_str() >= SUPPORTED_PROTOCOL_VERSIONS[0];
                let changes = if modern {
                    listen::listen_for_changes(service.peer(), client.clone()).await
                } else {
                    None
                };
                Ok(Session {
                    service,
                    client,
                    process,
                    identity,
                    drain: drain::DrainGate::default(),
                    _changes: changes,
                    modern,
                    updates: Default::default(),
                })
            }
            Err(e) => {
                Session {
                    service,
                    client,
                    process,
                    identity: placeholder_identity(transport),
                    drain: Default::default(),
                    _changes: None,
                    modern: false,
                    updates: Default::default(),
                }
                .close()
                .await;
                Err(e)
            }
        }
    }

    /// Sets how long calls wait after a cancelled call (default 10 s).
    pub fn set_cancel_grace(&mut self, grace: Duration) {
        self.drain.set_grace(grace);
    }

    /// What the server said about itself.
    pub fn identity(&self) -> &ServerIdentity {
        &self.identity
    }

    /// The process id of a stdio server.
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().map(ServerProcess::pid)
    }

    /// Every tool the server lists (all pages), as MCP JSON.
    pub async fn list_tools(&self) -> Result<Vec<Value>, SessionError> {
        self.handle().list_tools().await
    }

    /// A cheap handle that can list the server's tools while the session lives, without
    /// holding the session itself (what a notification listener keeps).
    pub fn handle(&self) -> SessionHandle {
        SessionHandle {
            peer: self.service.peer().clone(),
        }
    }

    /// Every resource the server lists (all pages), as MCP JSON.
    pub async fn list_resources(&self) -> Result<Vec<Value>, CallError> {
        let items = self
            .service
            .peer()
            .list_all_resources()
            .await
            .map_err(|e| service_error(e, "resources/list"))?;
        Ok(items
            .into_iter()
            .map(|r| serde_json::to_value(r).unwrap_or_default())
            .collect())
    }

    /// `resources/read` for `uri`; the result as MCP JSON.
    pub async fn read_resource(&self, uri: &str, timeout: Duration) -> Result<Value, CallError> {
        let request = ClientRequest::ReadResourceRequest(ReadResourceRequest::new(
            ReadResourceRequestParams::new(uri.to_string()),
        ));
        self.request(request, timeout, "resources/read").await
    }

    /// Every resource template the server lists (all pages), as MCP JSON.
    pub async fn list_resource_templates(&self) -> Result<Vec<Value>, CallError> {
        let items = self
            .service
            .peer()
            .list_all_resource_templates()
            .await
            .map_err(|e| service_error(e, "resources/templates/list"))?;
        Ok(items
            .into_iter()
            .map(|r| serde_json::to_value(r).unwrap_or_default())
            .collect())
    }

    /// `completion/complete` with `params` (the request's params as MCP JSON); the
    /// result as MCP JSON.
    pub async fn complete(&self, params: Value, timeout: Duration) -> Result<Value, CallError> {
        let params: rmcp::model::CompleteRequestParams =
            serde_json::from_value(params).map_err(|e| {
                CallError::new(
                    ErrorCode::InvalidArguments,
                    format!("completion/complete parameters are not valid: {e}"),
                )
            })?;
        self.request(
            ClientRequest::CompleteRequest(rmcp::model::CompleteRequest::new(params)),
            timeout,
            "completion/complete",
        )
        .await
    }

    /// `logging/setLevel` to `level` (an MCP logging level name).
    #[allow(deprecated)]
    pub async fn set_log_level(&self, level: &str, timeout: Duration) -> Result<(), CallError> {
        let level: rmcp::model::LoggingLevel = serde_json::from_value(Value::String(level.into()))
            .map_err(|_| {
                CallError::new(
                    ErrorCode::InvalidArguments,
                    format!("\"{level}\" is not an MCP logging level"),
                )
            })?;
        self.request(
            ClientRequest::SetLevelRequest(rmcp::model::SetLevelRequest::new(
                rmcp::model::SetLevelRequestParams::new(level),
            )),
            timeout,
            "logging/setLevel",
        )
        .await
        .map(|_| ())
    }

    /// Whether the server declared a capability (`tools`, `resources`, `prompts`,
    /// `logging`, `completions`), from its handshake.
    pub fn server_supports(&self, capability: &str) -> bool {
        self.service
            .peer()
            .peer_info()
            .and_then(|info| serde_json::to_value(&info.capabilities).ok())
            .is_some_and(|caps| caps.get(capability).is_some_and(|c| !c.is_null()))
    }

    /// Every prompt the server lists (all pages), as MCP JSON.
    pub async fn list_prompts(&self) -> Result<Vec<Value>, CallError> {
        let items = self
            .service
            .peer()
            .list_all_prompts()
            .await
            .map_err(|e| service_error(e, "prompts/list"))?;
        Ok(items
            .into_iter()
            .map(|p| serde_json::to_value(p).unwrap_or_default())
            .collect())
    }

    /// `prompts/get`; the result as MCP JSON.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        timeout: Duration,
    ) -> Result<Value, CallError> {
        let mut params = GetPromptRequestParams::new(name.to_string());
        if !arguments.is_empty() {
            params = params.with_arguments(arguments);
        }
        self.request(
            ClientRequest::GetPromptRequest(GetPromptRequest::new(params)),
            timeout,
            "prompts/get",
        )
        .await
    }

    /// Sends `request` and reads its result as MCP JSON; a 2026-07-28 server's
    /// `input_required` answers are given through the agent's client, each round within
    /// `timeout`.
    async fn request(
        &self,
        mut request: ClientRequest,
        timeout: Duration,
        what: &str,
    ) -> Result<Value, CallError> {
        for round in 0..=input::MAX_INPUT_ROUNDS {
            let handle = self
                .service
                .peer()
                .send_request_with_option(
                    request.clone(),
                    PeerRequestOptions::with_timeout(timeout),
                )
                .await
                .map_err(|e| service_error(e, what))?;
            let answer = handle
                .await_response()
                .await
                .map_err(|e| service_error(e, what))?;
            if round == input::MAX_INPUT_ROUNDS && input::asks(&answer) {
                break;
            }
            match self.client.next_round(request, answer, what, None).await? {
                input::Round::Again(again) => request = again,
                input::Round::Done(result) => {
                    return Ok(serde_json::to_value(result).unwrap_or_default());
                }
            }
        }
        Err(input::too_many_rounds(what))
    }

    /// Calls a tool. The result is the server's, typed (whatever its blocks, none
    /// dropped: rmcp hands a result its model cannot hold over as JSON, read exactly). Timeout and cancellation send `notifications/cancelled`.
    /// A 2026-07-28 server's `input_required` answers are given through the agent's
    /// client and the call goes on, within the same timeout.
    pub async fn call_tool(
        &self,
        raw_name: &str,
        arguments: Map<String, Value>,
        control: CallControl,
    ) -> Result<CallReply, CallError> {
        let warning = self.drain.wait_turn(control.cancel.as_ref()).await?;
        let mut params = CallToolRequestParams::new(raw_name.to_string()).with_arguments(arguments);
        if let Some(trace) = &control.trace {
            trace.stamp(&mut params);
        }
        let mut request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let deadline = control.timeout.map(|t| tokio::time::Instant::now() + t);
        let cancel = control.cancel.clone().unwrap_or_default();
        let _in_flight = self.client.call_started(control.asker.clone());
        for round in 0..=input::MAX_INPUT_ROUNDS {
            let answer = self
                .call_round(request.clone(), raw_name, &control, deadline, &cancel)
                .await?;
            if round == input::MAX_INPUT_ROUNDS && input::asks(&answer) {
                break;
            }
            let next = tokio::select! {
                next = self.client.next_round(request, answer, raw_name, control.asker.as_ref()) => next?,
                _ = until(deadline) => return Err(timed_out(raw_name, control.timeout)),
                _ = cancel.cancelled() => return Err(cancelled(raw_name)),
            };
            let result = match next {
                input::Round::Again(again) => {
                    request = again;
                    continue;
                }
                input::Round::Done(ServerResult::CallToolResult(result)) => {
                    crate::mcp::rmcp_model::result_from_rmcp(result)
                }
                input::Round::Done(ServerResult::CustomResult(custom)) => {
                    crate::mcp::wire::result_from_wire(custom.0)
                }
                input::Round::Done(ServerResult::CreateTaskResult(created)) => {
                    let follow = tasks::Follow {
                        peer: self.service.peer(),
                        client: &self.client,
                        asker: control.asker.as_ref(),
                        deadline,
                        timeout: control.timeout,
                        cancel: &cancel,
                        tool: raw_name,
                    };
                    crate::mcp::wire::result_from_wire(follow.run(created).await?)
                }
                input::Round::Done(other) => {
                    return Err(CallError::new(
                        ErrorCode::ToolError,
                        format!(
                            "the server answered tools/call with an unexpected result: {}",
                            serde_json::to_string(&other).unwrap_or_default()
                        ),
                    ));
                }
            };
            return Ok(CallReply { result, warning });
        }
        Err(input::too_many_rounds(raw_name))
    }

    /// Sends one round of a `tools/call` and waits for its answer, its progress routed to
    /// the caller; at the deadline or on cancellation the server is sent
    /// `notifications/cancelled` and the call is abandoned (the grace period then watches
    /// for its late answer).
    async fn call_round(
        &self,
        request: ClientRequest,
        raw_name: &str,
        control: &CallControl,
        deadline: Option<tokio::time::Instant>,
        cancel: &CancellationToken,
    ) -> Result<ServerResult, CallError> {
        let handle = self
            .service
            .peer()
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await
            .map_err(|e| service_error(e, raw_name))?;
        let token = handle.progress_token.clone();
        if let Some(tx) = control.progress.clone() {
            self.client.route_progress(token.clone(), tx);
        }
        let id = handle.id.clone();
        let mut rx = handle.rx;
        let outcome = tokio::select! {
            response = &mut rx => Some(response),
            _ = until(deadline) => None,
            _ = cancel.cancelled() => None,
        };
        self.client.unroute_progress(&token);
        let Some(response) = outcome else {
            let reason = if cancel.is_cancelled() {
                "cancelled by the caller"
            } else {
                "timed out"
            };
            // Sent as a raw notification: rmcp would otherwise drop the pending
            // response on its own cancellation, and the grace period needs to see
            // whether the server still answers.
            let params = serde_json::json!({"requestId": id, "reason": reason});
            let notification = ClientNotification::CustomNotification(CustomNotification::new(
                "notifications/cancelled",
                Some(params),
            ));
            let _ = self.service.peer().send_notification(notification).await;
            self.drain.start(rx);
            return Err(if cancel.is_cancelled() {
                cancelled(raw_name)
            } else {
                timed_out(raw_name, control.timeout)
            });
        };
        response
            .map_err(|_| ServiceError::TransportClosed)
            .and_then(|r| r)
            .map_err(|e| service_error(e, raw_name))
    }

    /// Replaces the roots and tells the server (`notifications/roots/list_changed`).
    pub async fn set_roots(&self, roots: Vec<String>) -> Result<(), SessionError> {
        self.client.set_roots(roots);
        self.service
            .peer()
            .notify_roots_list_changed()
            .await
            .map_err(|e| SessionError::Request(format!("cannot send roots/list_changed: {e}")))
    }

    /// What the session declared, in its handshake, that the agent's client answers.
    pub fn agent_capabilities(&self) -> AgentCapabilities {
        self.client.declared()
    }

    /// The roots this session answers with.
    pub fn roots(&self) -> Vec<String> {
        self.client.roots()
    }

    /// Whether the connection has closed (the server exited, the stream dropped).
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

/// A handle on a live session's connection (see [`Session::handle`]). Requests through it
/// fail once the session has closed.
#[derive(Clone)]
pub struct SessionHandle {
    peer: Peer<RoleClient>,
}

impl SessionHandle {
    /// Every tool the server lists (all pages), as MCP JSON.
    pub async fn list_tools(&self) -> Result<Vec<Value>, SessionError> {
        let tools = self
            .peer
            .list_all_tools()
            .await
            .map_err(|e| SessionError::Request(format!("tools/list failed: {e}")))?;
        Ok(tools
            .into_iter()
            .map(|t| serde_json::to_value(t).unwrap_or_default())
            .collect())
    }
}
