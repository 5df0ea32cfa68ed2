//! [`AirlockClient`]: Airlock's side of an MCP session — its identity and capabilities,
//! answers to `roots/list`, server logging routed to `tracing` (secrets scrubbed),
//! progress routed to the call that asked for it, and change notifications passed on.

// Roots and server logging are deprecated in the 2026 spec drafts (SEP-2577) but the
// supported protocol versions still use them; they stay confined to the session layer so
// they can be retired cleanly.
#![allow(deprecated)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use rmcp::ClientHandler;
use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, ListRootsResult, LoggingLevel,
    LoggingMessageNotificationParam, ProgressNotificationParam, ProgressToken, ProtocolVersion,
    ResourceUpdatedNotificationParam, Root,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData as McpError, RoleClient};
use serde::Serialize;
use tokio::sync::mpsc;

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

/// Airlock's client handler for one session.
#[derive(Clone)]
pub struct AirlockClient {
    service: String,
    roots: Arc<RwLock<Vec<String>>>,
    secrets: Arc<Vec<(String, String)>>,
    progress: ProgressRoutes,
    notices: Option<mpsc::UnboundedSender<ServerNotice>>,
}

impl AirlockClient {
    /// A handler for `service`, answering `roots/list` with `roots` (folder paths or
    /// URIs) and scrubbing `secrets` from logged server messages.
    pub fn new(service: &str, roots: Vec<String>, secrets: Vec<(String, String)>) -> Self {
        AirlockClient {
            service: service.to_string(),
            roots: Arc::new(RwLock::new(roots)),
            secrets: Arc::new(secrets),
            progress: Arc::default(),
            notices: None,
        }
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

    pub(super) fn unroute_progress(&self, token: &ProgressToken) {
        self.progress
            .lock()
            .expect("progress routes poisoned")
            .remove(token);
    }

    fn notice(&self, notice: ServerNotice) {
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

impl ClientHandler for AirlockClient {
    fn get_info(&self) -> ClientConfig {
        let capabilities = ClientCapabilities::builder()
            .enable_roots()
            .enable_roots_list_changed()
            .build();
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
        let roots = self.roots();
        Ok(ListRootsResult::new(
            roots.iter().map(|p| Root::new(root_uri(p))).collect(),
        ))
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let text = crate::launch::scrub(&params.data.to_string(), &self.secrets);
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

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let route = self
            .progress
            .lock()
            .expect("progress routes poisoned")
            .get(&params.progress_token)
            .cloned();
        if let Some(tx) = route {
            let message = params
                .message
                .map(|m| crate::launch::scrub(&m, &self.secrets));
            let _ = tx.send(ProgressUpdate {
                progress: params.progress,
                total: params.total,
                message,
            });
        }
    }

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
