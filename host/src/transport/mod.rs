//! Transports to MCP servers:
//! - stdio: the spawned child's stdout/stdin, newline-delimited JSON-RPC (rmcp's
//!   async read/write transport);
//! - streamable HTTP: rmcp's client over reqwest, with the configured headers;
//! - legacy HTTP+SSE (2024-11-05): [`sse::LegacySseTransport`], ours, since rmcp no
//!   longer ships one.

pub mod sse;

use std::collections::{BTreeMap, HashMap};

use rmcp::RoleClient;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use tokio::process::{ChildStdin, ChildStdout};

/// The transport for a stdio server: reads its stdout, writes its stdin.
pub fn stdio(
    stdout: ChildStdout,
    stdin: ChildStdin,
) -> AsyncRwTransport<RoleClient, ChildStdout, ChildStdin> {
    AsyncRwTransport::new_client(stdout, stdin)
}

/// Converts configured headers to HTTP header types, naming a header that is not valid.
pub fn header_map(
    headers: &BTreeMap<String, String>,
) -> Result<HashMap<http::HeaderName, http::HeaderValue>, String> {
    headers
        .iter()
        .map(|(k, v)| {
            let name = http::HeaderName::from_bytes(k.as_bytes())
                .map_err(|_| format!("header name {k:?} is not valid"))?;
            let value = http::HeaderValue::from_str(v)
                .map_err(|_| format!("the value of header {k:?} is not valid"))?;
            Ok((name, value))
        })
        .collect()
}

/// The streamable HTTP transport for `url` with `headers` on every request.
pub fn streamable_http(
    url: &str,
    headers: &BTreeMap<String, String>,
) -> Result<StreamableHttpClientTransport<reqwest::Client>, String> {
    let config = StreamableHttpClientTransportConfig::with_uri(url.to_string())
        .custom_headers(header_map(headers)?);
    Ok(StreamableHttpClientTransport::with_client(
        reqwest::Client::new(),
        config,
    ))
}

/// Whether a failed streamable-HTTP connection attempt means "this is not a streamable
/// HTTP endpoint" (so the legacy SSE transport is worth trying), rather than a failure
/// the fallback would only hide (refused connection, authentication, timeout).
pub fn suggests_legacy_sse(error: &str) -> bool {
    let e = error.to_ascii_lowercase();
    [
        "404",
        "405",
        "406",
        "415",
        "501",
        "400 bad request",
        "unexpected content type",
        "unexpected server response",
        "method not allowed",
        "not found",
    ]
    .iter()
    .any(|needle| e.contains(needle))
}
