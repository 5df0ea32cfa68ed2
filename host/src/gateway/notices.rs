//! Which of Airlock's events a downstream client hears, as MCP notifications — on a
//! handshake-era session (its watcher) or on a 2026-07-28 `subscriptions/listen` stream
//! alike: tool list changes (on the full tool surface; a grant change only for the agent
//! it concerns), resource and prompt list changes, and updates of the resources the
//! client subscribed to, named by the URIs the client knows them by.

use rmcp::model::{
    PromptListChangedNotification, ResourceListChangedNotification, ResourceUpdatedNotification,
    ResourceUpdatedNotificationParam, ServerNotification, ToolListChangedNotification,
};

use super::ToolSurface;
use super::routes::Routes;
use crate::events::Event;

/// What one client hears.
pub struct Audience<'a> {
    /// Its agent.
    pub agent: &'a str,
    /// The tools it is shown.
    pub surface: ToolSurface,
    /// How its resource URIs map to services.
    pub routes: &'a Routes,
}

impl Audience<'_> {
    /// The notification `event` means for this client, if any; `subscribed` says whether
    /// it asked for updates of a (service, server URI), and by which URI.
    pub fn notification(
        &self,
        event: &Event,
        subscribed: impl Fn(&str, &str) -> Option<String>,
    ) -> Option<ServerNotification> {
        let tools = self.surface == ToolSurface::All;
        Some(match event {
            Event::ToolsChanged { .. } if tools => ServerNotification::ToolListChangedNotification(
                ToolListChangedNotification::default(),
            ),
            Event::GrantsChanged { agent, .. } if tools && agent == self.agent => {
                ServerNotification::ToolListChangedNotification(
                    ToolListChangedNotification::default(),
                )
            }
            Event::ResourcesChanged { .. } => ServerNotification::ResourceListChangedNotification(
                ResourceListChangedNotification::default(),
            ),
            Event::PromptsChanged { .. } => ServerNotification::PromptListChangedNotification(
                PromptListChangedNotification::default(),
            ),
            Event::ResourceUpdated { service, uri } => {
                let exposed = subscribed(service, uri)?;
                ServerNotification::ResourceUpdatedNotification(ResourceUpdatedNotification::new(
                    ResourceUpdatedNotificationParam::new(exposed),
                ))
            }
            _ => return None,
        })
    }
}

/// Serves one `subscriptions/listen` stream of `agent` until the client ends it: the
/// resources it names are subscribed to upstream for the stream's lifetime.
pub async fn listen(
    airlock: &crate::Airlock,
    audience: Audience<'_>,
    subscription: rmcp::service::SubscriptionContext,
    subscribing: Option<&super::subscribing::Subscribing>,
) -> Result<(), rmcp::ErrorData> {
    use rmcp::service::SubscriptionSendError;
    use std::collections::HashMap;
    use tokio::sync::broadcast::error::RecvError;

    let agent = audience.agent;
    let mut events = airlock.changes();
    // (service, server URI) → the URI the client subscribed with: a stateless request
    // has learned no listing, so the way back is what the client said.
    let mut watched: HashMap<(String, String), String> = HashMap::new();
    let wanted = subscription.accepted().resource_subscriptions.clone();
    let subscribed = async {
        for exposed in wanted.iter().flatten() {
            let (service, uri) = audience.routes.resource(airlock, agent, exposed).await?;
            if let Err(e) = airlock
                .resources()
                .subscribe_resource(agent, &service, &uri, true)
                .await
            {
                tracing::warn!(
                    agent,
                    service,
                    "cannot subscribe to {uri} upstream: {}",
                    e.message
                );
            }
            watched.insert((service, uri), exposed.clone());
        }
        Ok::<(), rmcp::ErrorData>(())
    }
    .await;
    // The upstream subscriptions are open (or failed): calls held back go on.
    if let Some(subscribing) = subscribing {
        subscribing.end();
    }
    subscribed?;
    loop {
        let event = tokio::select! {
            _ = subscription.cancelled() => break,
            event = events.recv() => match event {
                Ok(event) => event,
                Err(RecvError::Lagged(_)) => continue,
                Err(RecvError::Closed) => break,
            },
        };
        let subscribed = |service: &str, uri: &str| {
            watched
                .get(&(service.to_string(), uri.to_string()))
                .cloned()
        };
        let Some(notification) = audience.notification(&event, subscribed) else {
            continue;
        };
        match subscription.sink().send(notification).await {
            Ok(()) | Err(SubscriptionSendError::NotificationNotAccepted(_)) => {}
            Err(_) => break,
        }
    }
    for (service, uri) in watched.into_keys() {
        let _ = airlock
            .resources()
            .subscribe_resource(agent, &service, &uri, false)
            .await;
    }
    Ok(())
}
