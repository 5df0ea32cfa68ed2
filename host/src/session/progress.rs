//! Progress notifications routed as they come off the transport, in order with the
//! responses.
//!
//! rmcp hands each notification to the client handler on a task of its own, which may
//! run after the call's response has been delivered — and by then the call has stopped
//! listening, so its last progress notifications were lost (the conformance scenario
//! `tools-call-with-progress` failed that way under load). [`ProgressTap`] wraps a
//! transport and routes each progress notification the moment it is received, before
//! the messages after it, so every progress notification of a call reaches the caller
//! ahead of its result.

use std::borrow::Cow;
use std::future::Future;

use rmcp::RoleClient;
use rmcp::model::{JsonRpcMessage, ServerNotification};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;

use super::AirlockClient;

/// A transport whose received progress notifications are routed at once.
pub(super) struct ProgressTap<T> {
    inner: T,
    client: AirlockClient,
}

impl<T> ProgressTap<T> {
    /// Wraps `inner`, routing through `client`'s progress routes.
    pub(super) fn new(inner: T, client: AirlockClient) -> Self {
        ProgressTap { inner, client }
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for ProgressTap<T> {
    type Error = T::Error;

    fn name() -> Cow<'static, str> {
        T::name()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let message = self.inner.receive().await?;
        if let JsonRpcMessage::Notification(n) = &message
            && let ServerNotification::ProgressNotification(progress) = &n.notification
        {
            self.client.deliver_progress(&progress.params);
        }
        Some(message)
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
