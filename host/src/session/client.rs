//! [`AirlockClient`]: Airlock's side of an MCP session — its identity and capabilities,
//! answers to `roots/list`, and server notifications routed to `tracing`.

// Roots and server logging are deprecated in the 2026 spec drafts (SEP-2577) but the
// supported protocol versions still use them; they stay confined to this file so they can
// be retired cleanly.
#![allow(deprecated)]

use std::sync::{Arc, RwLock};

use rmcp::ClientHandler;
use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, ListRootsResult, LoggingLevel,
    LoggingMessageNotificationParam, ProgressNotificationParam, ProtocolVersion, Root,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData as McpError, RoleClient};

/// Notifications a session passes on.
#[derive(Debug, Clone)]
pub enum ClientEvents {
    /// A progress notification for a running request.
    Progress {
        /// Progress so far.
        progress: f64,
        /// The total, if known.
        total: Option<f64>,
        /// The server's message.
        message: Option<String>,
    },
}

/// Airlock's client handler for one session.
#[derive(Clone)]
pub struct AirlockClient {
    service: String,
    roots: Arc<RwLock<Vec<String>>>,
    secrets: Arc<Vec<(String, String)>>,
}

impl AirlockClient {
    /// A handler for `service`, answering `roots/list` with `roots` (folder paths) and
    /// scrubbing `secrets` from logged server messages.
    pub fn new(service: &str, roots: Vec<String>, secrets: Vec<(String, String)>) -> Self {
        AirlockClient {
            service: service.to_string(),
            roots: Arc::new(RwLock::new(roots)),
            secrets: Arc::new(secrets),
        }
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
        let roots = self.roots.read().expect("roots lock poisoned").clone();
        Ok(ListRootsResult::new(
            roots
                .into_iter()
                .map(|path| {
                    let uri = if path.contains("://") {
                        path
                    } else {
                        format!("file://{path}")
                    };
                    Root::new(uri)
                })
                .collect(),
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
        tracing::debug!(service = %self.service, progress = params.progress, total = ?params.total, message = ?params.message, "progress");
    }
}
