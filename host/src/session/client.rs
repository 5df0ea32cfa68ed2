//! [`AirlockClient`]: Airlock's side of an MCP session — its identity and capabilities,
//! answers to `roots/list`, server logging routed to `tracing` and to the agent's own
//! client (secrets scrubbed), sampling and elicitation passed to the agent's client when
//! it has one, progress routed to the call that asked for it, and change notifications
//! passed on.

// Roots and server logging are deprecated in the 2026 spec drafts (SEP-2577) but the
// supported protocol versions still use them; they stay confined to the session layer so
// they can be retired cleanly.
#![allow(deprecated)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use rmcp::ClientHandler;
use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, ElicitationCapability, Implementation, ListRootsResult,
    LoggingLevel, LoggingMessageNotificationParam, ProgressNotificationParam, ProgressToken,
    ProtocolVersion, ResourceUpdatedNotificationParam, Root, SamplingCapability,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData as McpError, RoleClient};
use serde::Serialize;
use tokio::sync::mpsc;

use super::agent::{AgentCapabilities, AgentClient, AgentLink};
use crate::secrets::KnownSecrets;

/// A progress notification for a running call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProgressUpdate {
    /// Progress so far (what the server reports, not necessarily a percentage).
    pub progress: f64,
    /// The total, if the server knows it.
    pub total: Option<f64>,
    /// The server's message.
    pub message: Option<String>,
}

/// Notifications a session passes on to its owner.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerNotice {
    /// `notifications/tools/list_changed`.
    ToolsChanged,
    /// `notifications/resources/updated`.
    ResourceUpdated {
        /// The resource URI.
        uri: String,
    },
    /// `notifications/resources/list_changed`.
    ResourcesChanged,
    /// `notifications/prompts/list_changed`.
    PromptsChanged,
}

type ProgressRoutes = Arc<Mutex<HashMap<ProgressToken, mpsc::UnboundedSender<ProgressUpdate>>>>;

/// The calls in flight on a session, each with the client that answers its own
/// questions, when its caller gave one (a 2026-07-28 client of the gateway).
type InFlight = Arc<Mutex<HashMap<u64, Option<Arc<dyn AgentClient>>>>>;

/// One call in flight on a session; it leaves the session's list when dropped.
pub(super) struct InFlightCall {
    calls: InFlight,
    id: u64,
}

impl Drop for InFlightCall {
    fn drop(&mut self) {
        self.calls
            .lock()
            .expect("calls in flight poisoned")
            .remove(&self.id);
    }
}

/// Airlock's client handler for one session.
#[derive(Clone)]
pub struct AirlockClient {
    service: String,
    roots: Arc<RwLock<Vec<String>>>,
    secrets: KnownSecrets,
    progress: ProgressRoutes,
    notices: Option<mpsc::UnboundedSender<ServerNotice>>,
    agent: Option<Arc<AgentLink>>,
    /// What the handshake declared the agent's client answers (fixed for the session).
    declared: AgentCapabilities,
    /// The calls in flight, for attributing a question the server sends on its own.
    in_flight: InFlight,
    next_call: Arc<AtomicU64>,
}

impl AirlockClient {
    /// A handler for `service`, answering `roots/list` with `roots` (folder paths or
    /// URIs) and scrubbing `secrets` from logged server messages.
    pub fn new(service: &str, roots: Vec<String>, secrets: KnownSecrets) -> Self {
        AirlockClient {
            service: service.to_string(),
            roots: Arc::new(RwLock::new(roots)),
            secrets,
            progress: Arc::default(),
            notices: None,
            agent: None,
            declared: AgentCapabilities::default(),
            in_flight: Arc::default(),
            next_call: Arc::default(),
        }
    }

    /// Passes sampling, elicitation and server logs to the agent's own client, found
    /// through `link` when a server asks.
    pub fn with_agent(mut self, link: Option<Arc<AgentLink>>) -> Self {
        self.declared = link.as_ref().map(|l| l.capabilities()).unwrap_or_default();
        self.agent = link;
        self
    }

    /// What this client declared it answers for the agent (sampling, elicitation).
    pub fn declared(&self) -> AgentCapabilities {
        self.declared
    }

    fn agent_client(&self) -> Option<Arc<dyn super::AgentClient>> {
        self.agent.as_ref().and_then(|l| l.get())
    }

    /// `text` with the session's known secrets scrubbed.
    pub fn scrub(&self, text: &str) -> String {
        self.secrets.scrub_owned(text)
    }

    /// `value` with the known secrets scrubbed from every string, through JSON.
    fn scrubbed<T: serde::Serialize + serde::de::DeserializeOwned>(&self, value: T) -> T {
        let Ok(mut json) = serde_json::to_value(&value) else {
            return value;
        };
        if self.secrets.scrub_json(&mut json) == 0 {
            return value;
        }
        serde_json::from_value(json).unwrap_or(value)
    }

    /// Passes change notifications to `tx`.
    pub fn with_notices(mut self, tx: mpsc::UnboundedSender<ServerNotice>) -> Self {
        self.notices = Some(tx);
        self
    }

    /// Replaces the roots answered to `roots/list`.
    pub fn set_roots(&self, roots: Vec<String>) {
        *self.roots.write().expect("roots lock poisoned") = roots;
    }

    /// The roots answered to `roots/list`.
    pub fn roots(&self) -> Vec<String> {
        self.roots.read().expect("roots lock poisoned").clone()
    }

    pub(super) fn route_progress(
        &self,
        token: ProgressToken,
        tx: mpsc::UnboundedSender<ProgressUpdate>,
    ) {
        self.progress
            .lock()
            .expect("progress routes poisoned")
            .insert(token, tx);
    }

    /// Hands a progress notification to the call it belongs to (scrubbed), if that call
    /// is still listening.
    pub(super) fn deliver_progress(&self, params: &ProgressNotificationParam) {
        let route = self
            .progress
            .lock()
            .expect("progress routes poisoned")
            .get(&params.progress_token)
            .cloned();
        if let Some(tx) = route {
            let message = params.message.as_ref().map(|m| self.secrets.scrub_owned(m));
            let _ = tx.send(ProgressUpdate {
                progress: params.progress,
                total: params.total,
                message,
            });
        }
    }

    pub(super) fn unroute_progress(&self, token: &ProgressToken) {
        self.progress
            .lock()
            .expect("progress routes poisoned")
            .remove(token);
    }

    /// Reports a server's change notice to whoever listens for this session's notices.
    pub(super) fn notice(&self, notice: ServerNotice) {
        if let Some(tx) = &self.notices {
            let _ = tx.send(notice);
        }
    }
}

/// A root as a `file://` URI (anything that already has a scheme is kept).
pub fn root_uri(path: &str) -> String {
    if path.contains("://") {
        path.to_string()
    } else {
        format!("file://{path}")
    }
}

impl AirlockClient {
    /// A server's sampling request, answered by the agent's client (its text scrubbed of
    /// the service's secrets on the way); refused when the agent's client cannot sample.
    pub(super) async fn answer_sampling(
        &self,
        params: CreateMessageRequestParams,
        own: Option<&Arc<dyn AgentClient>>,
    ) -> Result<CreateMessageResult, McpError> {
        match self.asker(own) {
            Some(agent) if agent.capabilities().sampling => {
                agent
                    .create_message(self.service.clone(), self.scrubbed(params))
                    .await
            }
            _ => Err(McpError::method_not_found::<
                rmcp::model::CreateMessageRequestMethod,
            >()),
        }
    }

    /// A server's question for the user, asked through the agent's client (its text
    /// scrubbed of the service's secrets on the way); refused when the agent's client
    /// cannot be asked.
    pub(super) async fn answer_elicitation(
        &self,
        request: ElicitRequestParams,
        own: Option<&Arc<dyn AgentClient>>,
    ) -> Result<ElicitResult, McpError> {
        match self.asker(own) {
            Some(agent) if agent.capabilities().elicitation => {
                agent
                    .elicit(self.service.clone(), self.scrubbed(request))
                    .await
            }
            _ => Err(McpError::method_not_found::<
                rmcp::model::ElicitationCreateRequestMethod,
            >()),
        }
    }

    /// A call starting on this session; `asker` answers the questions it gives rise to.
    pub(super) fn call_started(&self, asker: Option<Arc<dyn AgentClient>>) -> InFlightCall {
        let id = self.next_call.fetch_add(1, Ordering::Relaxed);
        self.in_flight
            .lock()
            .expect("calls in flight poisoned")
            .insert(id, asker);
        InFlightCall {
            calls: self.in_flight.clone(),
            id,
        }
    }

    /// Who answers a question: the asking call's own client (`own`, known for a
    /// 2026-07-28 server's `input_required`); else, for a request the server sends on its
    /// own (which names no call), the own client of the one call in flight, when exactly
    /// one is; else the agent's client.
    fn asker(&self, own: Option<&Arc<dyn AgentClient>>) -> Option<Arc<dyn AgentClient>> {
        if let Some(own) = own {
            return Some(own.clone());
        }
        let sole = {
            let calls = self.in_flight.lock().expect("calls in flight poisoned");
            match calls.values().collect::<Vec<_>>().as_slice() {
                [Some(only)] => Some(only.clone()),
                _ => None,
            }
        };
        sole.or_else(|| self.agent_client())
    }

    /// The roots this session answers `roots/list` with.
    pub(super) fn roots_result(&self) -> ListRootsResult {
        ListRootsResult::new(
            self.roots()
                .iter()
                .map(|p| Root::new(root_uri(p)))
                .collect(),
        )
    }
}

impl ClientHandler for AirlockClient {
    fn get_info(&self) -> ClientConfig {
        // Tasks (SEP-2663): a server may answer a call with a task, which the session
        // follows to its end (`tasks.rs`).
        let mut capabilities = ClientCapabilities::builder()
            .enable_roots()
            .enable_roots_list_changed()
            .enable_tasks()
            .build();
        {
            let can = self.declared;
            if can.sampling {
                capabilities.sampling = Some(SamplingCapability::default());
            }
            if can.elicitation {
                capabilities.elicitation = Some(ElicitationCapability::default());
            }
        }
        ClientConfig::new(
            capabilities,
            Implementation::new("airlock", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, McpError> {
        Ok(self.roots_result())
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, McpError> {
        self.answer_sampling(params, None).await
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, McpError> {
        self.answer_elicitation(request, None).await
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let params = self.scrubbed(params);
        if let Some(agent) = self.agent_client() {
            agent.log(&self.service, params.clone());
        }
        let text = params.data.to_string();
        let service = &self.service;
        match params.level {
            LoggingLevel::Debug => tracing::debug!(service, "server log: {text}"),
            LoggingLevel::Info | LoggingLevel::Notice => {
                tracing::info!(service, "server log: {text}")
            }
            LoggingLevel::Warning => tracing::warn!(service, "server log: {text}"),
            _ => tracing::error!(service, "server log: {text}"),
        }
    }

    // Progress is routed by the transport tap (`session/progress.rs`), in order with
    // the responses; the handler's own callback would run on a task of its own, too late
    // for the last notifications of a call.

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.notice(ServerNotice::ResourceUpdated { uri: params.uri });
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.notice(ServerNotice::ResourcesChanged);
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.notice(ServerNotice::ToolsChanged);
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.notice(ServerNotice::PromptsChanged);
    }
}
