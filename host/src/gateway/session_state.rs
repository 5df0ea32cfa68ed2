//! What one downstream session remembers (its agent, log level, subscriptions and
//! routes), and the watcher that turns Airlock's events into its `list_changed` and
//! `resources/updated` notifications while it lives.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use rmcp::RoleServer;

use super::ToolSurface;
use super::downstream::LogFilter;
use super::notices::Audience;
use super::routes::Routes;
use super::shared::Gateway;

/// What one downstream session remembers.
#[derive(Default)]
pub(crate) struct SessionState {
    /// The agent, once known (at `initialize`, or fixed for stdio).
    pub(super) agent: OnceLock<String>,
    /// Set once the session counts as open (its close then releases the agent).
    pub(super) opened: std::sync::atomic::AtomicBool,
    /// The lowest log level the client wants (`logging/setLevel`).
    pub(super) logs: Arc<LogFilter>,
    /// The resources the client subscribed to: (service, server URI).
    pub(super) subscriptions: Mutex<HashSet<(String, String)>>,
    /// How resource URIs and prompt names map to services.
    pub(super) routes: Routes,
    pub(super) watcher: Mutex<Option<tokio::task::JoinHandle<()>>>,
    pub(super) gateway: OnceLock<Weak<Gateway>>,
}

impl Drop for SessionState {
    fn drop(&mut self) {
        if let Some(watcher) = self.watcher.lock().ok().and_then(|mut w| w.take()) {
            watcher.abort();
        }
        if !self.opened.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let (Some(agent), Some(gateway)) = (
            self.agent.get().cloned(),
            self.gateway.get().and_then(Weak::upgrade),
        ) else {
            return;
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { gateway.session_closed(&agent).await });
        }
    }
}

impl SessionState {
    /// Starts turning Airlock's events into notifications to this client.
    pub(super) fn watch(
        self: &Arc<Self>,
        mut events: tokio::sync::broadcast::Receiver<crate::events::Event>,
        peer: rmcp::Peer<RoleServer>,
        agent: String,
        surface: ToolSurface,
    ) {
        let state = Arc::downgrade(self);
        let watcher = tokio::spawn(async move {
            loop {
                let event = match events.recv().await {
                    Ok(event) => event,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(_) => return,
                };
                let Some(state) = state.upgrade() else { return };
                let audience = Audience {
                    agent: &agent,
                    surface,
                    routes: &state.routes,
                };
                let subscribed = |service: &str, uri: &str| {
                    let key = (service.to_string(), uri.to_string());
                    let subscriptions = state.subscriptions.lock().expect("subscriptions poisoned");
                    subscriptions
                        .contains(&key)
                        .then(|| state.routes.exposed(service, uri))
                };
                let Some(notification) = audience.notification(&event, subscribed) else {
                    continue;
                };
                let sent = peer.send_notification(notification).await;
                if sent.is_err() {
                    return;
                }
            }
        });
        if let Some(old) = self
            .watcher
            .lock()
            .expect("watcher poisoned")
            .replace(watcher)
        {
            old.abort();
        }
    }
}
