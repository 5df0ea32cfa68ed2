//! Change notices from a 2026-07-28 server. Such a server sends list changes only on a
//! `subscriptions/listen` stream, not on its own; a session on that revision keeps one
//! open for its lifetime, so the catalog hears of new tools, prompts and resources as it
//! does from a handshake-era server.

use rmcp::RoleClient;
use rmcp::model::{ServerNotification, SubscriptionFilter};
use rmcp::service::Peer;
use tokio::task::JoinHandle;

use super::{AirlockClient, ServerNotice};

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
    let mut subscription =
        match tokio::time::timeout(ACKNOWLEDGED_WITHIN, peer.listen(filter)).await {
            Ok(Ok(subscription)) => subscription,
            Ok(Err(e)) => {
                tracing::debug!("the server opened no subscriptions/listen stream: {e}");
                return None;
            }
            Err(_) => {
                tracing::debug!("the server did not acknowledge subscriptions/listen in time");
                return None;
            }
        };
    Some(ChangeListener(tokio::spawn(async move {
        while let Ok(Some(notification)) = subscription.next().await {
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
