//! Transports to MCP servers:
//! - stdio: the spawned child's stdout/stdin, newline-delimited JSON-RPC (rmcp's
//!   async read/write transport);
//! - streamable HTTP: rmcp's client over reqwest, with the configured headers;
//! - legacy HTTP+SSE (2024-11-05): [`sse::LegacySseTransport`], ours, since rmcp no
//!   longer ships one.
//!
//! Layer 2 (reach). May import nothing of Airlock's.

pub mod guard;
#[cfg(feature = "http")]
pub mod sse;
#[cfg(feature = "http")]
pub mod traced;

use std::collections::{BTreeMap, HashMap};

use rmcp::RoleClient;
#[cfg(feature = "http")]
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::async_rw::AsyncRwTransport;
#[cfg(feature = "http")]
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use tokio::process::{ChildStdin, ChildStdout};

/// Largest message Airlock reads from a server: the retention limit (32 MiB) with room
/// for JSON escaping and the envelope.
pub const MAX_MESSAGE_BYTES: usize = 40 << 20;

/// The transport for a stdio server: reads its stdout through a [`guard::FrameGuard`],
/// writes its stdin.
pub fn stdio(
    stdout: ChildStdout,
    stdin: ChildStdin,
) -> AsyncRwTransport<RoleClient, guard::FrameGuard<ChildStdout>, ChildStdin> {
    // The guard enforces the limit (answering over-long lines with an error); the codec's
    // own limit only needs to admit what the guard passes.
    AsyncRwTransport::new_client(guard::FrameGuard::new(stdout, MAX_MESSAGE_BYTES), stdin)
        .with_max_line_length(MAX_MESSAGE_BYTES + 4096)
}

/// A configured header that HTTP cannot carry. The message names the header, never its
/// value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// The name is not a valid header name.
    #[error("header name {0:?} is not valid")]
    Name(String),
    /// The value is not a valid header value.
    #[error("the value of header {0:?} is not valid")]
    Value(String),
}

/// Converts configured headers to HTTP header types, naming a header that is not valid.
pub fn header_map(
    headers: &BTreeMap<String, String>,
) -> Result<HashMap<http::HeaderName, http::HeaderValue>, HeaderError> {
    headers
        .iter()
        .map(|(k, v)| {
            let name = http::HeaderName::from_bytes(k.as_bytes())
                .map_err(|_| HeaderError::Name(k.clone()))?;
            let value =
                http::HeaderValue::from_str(v).map_err(|_| HeaderError::Value(k.clone()))?;
            Ok((name, value))
        })
        .collect()
}

#[cfg(feature = "http")]
/// The streamable HTTP transport for `url` with `headers` on every request (and a
/// call's trace context as `traceparent`/`tracestate`, see [`traced`]).
pub fn streamable_http(
    url: &str,
    headers: &BTreeMap<String, String>,
) -> Result<StreamableHttpClientTransport<traced::TracedClient>, HeaderError> {
    let config = StreamableHttpClientTransportConfig::with_uri(url.to_string())
        .custom_headers(header_map(headers)?)
        .max_json_response_size(MAX_MESSAGE_BYTES)
        .max_sse_event_size(MAX_MESSAGE_BYTES);
    Ok(StreamableHttpClientTransport::with_client(
        traced::TracedClient::default(),
        config,
    ))
}
