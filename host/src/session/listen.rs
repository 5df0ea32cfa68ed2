//! Change notices from a 2026-07-28 server. Such a server sends list changes and
//! resource updates only on `subscriptions/listen` streams, not on its own: a session on
//! that revision keeps one open for its lifetime, so the catalog hears of new tools,
//! prompts and resources as it does from a handshake-era server, and one more per
//! resource an agent subscribes to (that revision has no `resources/subscribe`).

use rmcp::RoleClient;
use rmcp::model::{ServerNotification, SubscriptionFilter};
use rmcp::service::Peer;
use tokio::task::JoinHandle;

use std::time::Duration;

use rmcp::model::ClientRequest;

use super::{AirlockClient, ServerNotice, Session};
use crate::error::{CallError, ErrorCode};

/// The listening task of one session; it stops when the session is dropped.
pub(super) struct ChangeListener(JoinHandle<()>);

impl Drop for ChangeListener {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// How long a session waits for the server to acknowledge its stream.
const ACKNOWLEDGED_WITHIN: std::time::Duration = std::time::Duration::from_secs(10);

/// Opens a stream of `peer`'s list changes, reported through `client`. It is
/// acknowledged before this returns, so no change made by a call on the new session is
/// missed; a server that opens no stream gets none.
pub(super) async fn listen_for_changes(
    peer: &Peer<RoleClient>,
    client: AirlockClient,
) -> Option<ChangeListener> {
    let filter = SubscriptionFilter::builder()
        .tools_list_changed()
        .prompts_list_changed()
        .resources_list_changed()
        .build();
    match listen(peer, client, filter).await {
        Ok(listener) => Some(listener),
        Err(e) => {
            tracing::debug!("{e}");
            None
        }
    }
}

/// Why a `subscriptions/listen` stream could not be opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum ListenError {
    /// The server answered with an error.
    #[error("the server opened no subscriptions/listen stream: {0}")]
    Refused(String),
    /// The server did not answer in time.
    #[error("the server did not acknowledge subscriptions/listen in time")]
    NotAcknowledged,
}

/// Opens a stream of updates to the resource `uri`, reported through `client`;
/// acknowledged before this returns.
pub(super) async fn listen_for_updates(
    peer: &Peer<RoleClient>,
    client: AirlockClient,
    uri: &str,
) -> Result<ChangeListener, ListenError> {
    let filter = SubscriptionFilter::builder()
        .resource_subscriptions([uri])
        .build();
    listen(peer, client, filter).await
}

/// Opens a `subscriptions/listen` stream with `filter`, its notices reported through
/// `client`, once the server acknowledged it.
async fn listen(
    peer: &Peer<RoleClient>,
    client: AirlockClient,
    filter: SubscriptionFilter,
) -> Result<ChangeListener, ListenError> {
    let mut subscription =
        match tokio::time::timeout(ACKNOWLEDGED_WITHIN, peer.listen(filter)).await {
            Ok(Ok(subscription)) => subscription,
            Ok(Err(e)) => return Err(ListenError::Refused(e.to_string())),
            Err(_) => return Err(ListenError::NotAcknowledged),
        };
    Ok(ChangeListener(tokio::spawn(async move {
        loop {
            let notification = match subscription.next().await {
                Ok(Some(notification)) => notification,
                Ok(None) => break,
                Err(e) => {
                    tracing::debug!("a subscriptions/listen stream ended: {e}");
                    break;
                }
            };
            let notice = match notification {
                ServerNotification::ToolListChangedNotification(_) => ServerNotice::ToolsChanged,
                ServerNotification::PromptListChangedNotification(_) => {
                    ServerNotice::PromptsChanged
                }
                ServerNotification::ResourceListChangedNotification(_) => {
                    ServerNotice::ResourcesChanged
                }
                ServerNotification::ResourceUpdatedNotification(update) => {
                    ServerNotice::ResourceUpdated {
                        uri: update.params.uri,
                    }
                }
                _ => continue,
            };
            client.notice(notice);
        }
    })))
}

impl Session {
    /// `resources/subscribe` (or `unsubscribe` when `subscribe` is false) for `uri`; on
    /// a 2026-07-28 server, a `subscriptions/listen` stream for `uri` opened (or closed).
    pub async fn subscribe(
        &self,
        uri: &str,
        subscribe: bool,
        timeout: Duration,
    ) -> Result<(), CallError> {
        if self.modern {
            if !subscribe {
                self.updates.lock().expect("updates poisoned").remove(uri);
                return Ok(());
            }
            let peer = self.service.peer();
            let stream = listen_for_updates(peer, self.client.clone(), uri)
                .await
                .map_err(|e| {
                    CallError::new(
                        ErrorCode::ServiceUnavailable,
                        format!("cannot subscribe to {uri}: {e}"),
                    )
                })?;
            self.updates
                .lock()
                .expect("updates poisoned")
                .insert(uri.to_string(), stream);
            return Ok(());
        }
        #[allow(deprecated)]
        let request = if subscribe {
            ClientRequest::SubscribeRequest(rmcp::model::SubscribeRequest::new(
                rmcp::model::SubscribeRequestParams::new(uri.to_string()),
            ))
        } else {
            ClientRequest::UnsubscribeRequest(rmcp::model::UnsubscribeRequest::new(
                rmcp::model::UnsubscribeRequestParams::new(uri.to_string()),
            ))
        };
        let what = if subscribe {
            "resources/subscribe"
        } else {
            "resources/unsubscribe"
        };
        self.request(request, timeout, what).await.map(|_| ())
    }
}
