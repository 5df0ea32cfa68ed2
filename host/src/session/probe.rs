//! The era probe, as forgiving as the official clients': rmcp's `auto` start treats only
//! a JSON-RPC error answer to `server/discover` as "this server is of the handshake era",
//! and fails on anything else. Servers in the wild answer the unknown method otherwise —
//! the conformance suite's test servers with an empty result — or answer with a discover
//! result that names no revision Airlock can speak. [`DiscoverGuard`] sits on the
//! transport and turns either answer into the "method not found" error it means, so the
//! session falls back to `initialize` on the same connection, as the Python SDK's
//! `auto` mode does.

use std::borrow::Cow;
use std::future::Future;

use rmcp::RoleClient;
use rmcp::model::{
    ClientRequest, ErrorCode, ErrorData, JsonRpcError, JsonRpcMessage, JsonRpcVersion2_0,
    RequestId, ServerResult,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;

use super::SUPPORTED_PROTOCOL_VERSIONS;

/// A transport whose answers to `server/discover` are checked before rmcp reads them.
pub(super) struct DiscoverGuard<T> {
    inner: T,
    /// The id of the probe in flight.
    probe: Option<RequestId>,
}

impl<T> DiscoverGuard<T> {
    /// Wraps `inner`.
    pub(super) fn new(inner: T) -> Self {
        DiscoverGuard { inner, probe: None }
    }
}

/// Whether `answer` is a discover result naming a revision Airlock speaks.
fn usable(answer: &ServerResult) -> bool {
    match answer {
        ServerResult::DiscoverResult(result) => result
            .supported_versions
            .iter()
            .any(|v| SUPPORTED_PROTOCOL_VERSIONS.contains(&v.as_str())),
        _ => false,
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for DiscoverGuard<T> {
    type Error = T::Error;

    fn name() -> Cow<'static, str> {
        T::name()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        if let JsonRpcMessage::Request(request) = &item
            && matches!(request.request, ClientRequest::DiscoverRequest(_))
        {
            self.probe = Some(request.id.clone());
        }
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let message = self.inner.receive().await?;
        let JsonRpcMessage::Response(response) = &message else {
            return Some(message);
        };
        if self.probe.as_ref() != Some(&response.id) {
            return Some(message);
        }
        self.probe = None;
        if usable(&response.result) {
            return Some(message);
        }
        tracing::debug!(
            "the server answered server/discover with something other than a usable discover result; treating it as a handshake-era server"
        );
        Some(JsonRpcMessage::Error(JsonRpcError {
            jsonrpc: JsonRpcVersion2_0,
            id: Some(response.id.clone()),
            error: ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                "server/discover was not answered with a discover result",
                None,
            ),
        }))
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

/// How a session starts on stdio and streamable HTTP: `server/discover` at 2026-07-28
/// first, and the `initialize` handshake at 2025-11-25 (the server may answer an older
/// revision) when the server shows it is of the handshake era — an error answer to the
/// probe, or none within rmcp's probe timeout. This is the official clients' `auto` mode.
/// The legacy SSE transport predates 2026-07-28 and goes straight to `initialize`.
pub(super) fn newest_offered() -> rmcp::service::ClientLifecycleMode {
    use rmcp::model::ProtocolVersion;
    use rmcp::service::ClientLifecycleMode;
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    }
}
