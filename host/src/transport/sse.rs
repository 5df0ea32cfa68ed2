//! The legacy HTTP+SSE transport (protocol 2024-11-05), client side: a long-lived GET
//! event stream that first names the endpoint to POST messages to (`event: endpoint`),
//! then carries the server's messages (`event: message`). On a dropped stream it
//! reconnects after the server's `retry` delay, sending `Last-Event-ID`.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use rmcp::RoleClient;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Default delay before reconnecting when the server sent no `retry`.
const DEFAULT_RETRY: Duration = Duration::from_secs(1);
/// Consecutive failed reconnections before the transport gives up.
const MAX_RECONNECTS: u32 = 5;

/// A legacy SSE transport error.
#[derive(Debug, thiserror::Error)]
pub enum SseTransportError {
    /// The HTTP request failed.
    #[error("HTTP request to {url} failed: {message}")]
    Http {
        /// The URL.
        url: String,
        /// What happened.
        message: String,
    },
    /// The server did not behave like an HTTP+SSE MCP server.
    #[error("{0}")]
    Protocol(String),
}

/// A connected legacy SSE transport.
pub struct LegacySseTransport {
    client: reqwest::Client,
    headers: reqwest::header::HeaderMap,
    endpoint: reqwest::Url,
    incoming: mpsc::Receiver<ServerJsonRpcMessage>,
    reader: JoinHandle<()>,
}

impl Drop for LegacySseTransport {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

fn header_map(
    headers: &BTreeMap<String, String>,
) -> Result<reqwest::header::HeaderMap, SseTransportError> {
    let mut map = reqwest::header::HeaderMap::new();
    for (k, v) in
        super::header_map(headers).map_err(|e| SseTransportError::Protocol(e.to_string()))?
    {
        map.insert(k, v);
    }
    Ok(map)
}

/// One open event stream.
type EventStream = std::pin::Pin<
    Box<dyn futures::Stream<Item = Result<sse_stream::Sse, sse_stream::Error>> + Send>,
>;

async fn open_stream(
    client: &reqwest::Client,
    url: &reqwest::Url,
    headers: &reqwest::header::HeaderMap,
    last_event_id: Option<&str>,
) -> Result<EventStream, SseTransportError> {
    let mut request = client
        .get(url.clone())
        .headers(headers.clone())
        .header(reqwest::header::ACCEPT, "text/event-stream");
    if let Some(id) = last_event_id {
        request = request.header("Last-Event-ID", id);
    }
    let http = |e: reqwest::Error| SseTransportError::Http {
        url: url.to_string(),
        message: e.to_string(),
    };
    let response = request
        .send()
        .await
        .map_err(http)?
        .error_for_status()
        .map_err(http)?;
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    if !content_type.starts_with("text/event-stream") {
        return Err(SseTransportError::Protocol(format!(
            "{url} answered with content type {content_type:?}, not an SSE stream"
        )));
    }
    Ok(Box::pin(sse_stream::SseStream::from_bytes_stream(
        response.bytes_stream(),
    )))
}

impl LegacySseTransport {
    /// Opens the event stream at `url` and waits for the server to name its message
    /// endpoint.
    pub async fn connect(
        url: &str,
        headers: &BTreeMap<String, String>,
    ) -> Result<Self, SseTransportError> {
        let url = reqwest::Url::parse(url)
            .map_err(|e| SseTransportError::Protocol(format!("invalid URL {url:?}: {e}")))?;
        let headers = header_map(headers)?;
        let client = reqwest::Client::new();
        let mut stream = open_stream(&client, &url, &headers, None).await?;
        let mut retry = DEFAULT_RETRY;
        let mut last_id: Option<String> = None;
        let endpoint = loop {
            match stream.next().await {
                Some(Ok(event)) => {
                    if let Some(ms) = event.retry {
                        retry = Duration::from_millis(ms);
                    }
                    if event.id.is_some() {
                        last_id = event.id.clone();
                    }
                    if event.event.as_deref() == Some("endpoint") {
                        let data = event.data.unwrap_or_default();
                        break url.join(data.trim()).map_err(|e| {
                            SseTransportError::Protocol(format!(
                                "the endpoint event {data:?} is not a URL: {e}"
                            ))
                        })?;
                    }
                }
                Some(Err(e)) => {
                    return Err(SseTransportError::Protocol(format!(
                        "malformed event stream from {url}: {e}"
                    )));
                }
                None => {
                    return Err(SseTransportError::Protocol(format!(
                        "{url} closed the event stream before naming an endpoint"
                    )));
                }
            }
        };
        let (tx, incoming) = mpsc::channel(64);
        let reader = tokio::spawn(read_events(
            client.clone(),
            url,
            headers.clone(),
            stream,
            tx,
            retry,
            last_id,
        ));
        Ok(LegacySseTransport {
            client,
            headers,
            endpoint,
            incoming,
            reader,
        })
    }

    /// Where messages are POSTed.
    pub fn endpoint(&self) -> &reqwest::Url {
        &self.endpoint
    }
}

/// Forwards `message` events to `tx`, reconnecting (after `retry`, with `Last-Event-ID`)
/// when the stream drops.
async fn read_events(
    client: reqwest::Client,
    url: reqwest::Url,
    headers: reqwest::header::HeaderMap,
    mut stream: EventStream,
    tx: mpsc::Sender<ServerJsonRpcMessage>,
    mut retry: Duration,
    mut last_id: Option<String>,
) {
    let mut failures = 0;
    loop {
        while let Some(item) = stream.next().await {
            let Ok(event) = item else { break };
            failures = 0;
            if let Some(ms) = event.retry {
                retry = Duration::from_millis(ms);
            }
            if event.id.is_some() {
                last_id = event.id.clone();
            }
            if matches!(event.event.as_deref(), None | Some("message")) {
                let Some(data) = event.data.filter(|d| !d.trim().is_empty()) else {
                    continue;
                };
                match serde_json::from_str::<ServerJsonRpcMessage>(&data) {
                    Ok(message) => {
                        if tx.send(message).await.is_err() {
                            return;
                        }
                    }
                    Err(e) => {
                        tracing::warn!(%url, "ignoring an SSE message that is not JSON-RPC: {e}")
                    }
                }
            }
        }
        // The stream ended: reconnect after the server's retry delay.
        loop {
            if tx.is_closed() || failures >= MAX_RECONNECTS {
                return;
            }
            tokio::time::sleep(retry).await;
            match open_stream(&client, &url, &headers, last_id.as_deref()).await {
                Ok(s) => {
                    stream = s;
                    break;
                }
                Err(e) => {
                    failures += 1;
                    tracing::warn!(%url, attempt = failures, "SSE reconnection failed: {e}");
                }
            }
        }
    }
}

impl Transport<RoleClient> for LegacySseTransport {
    type Error = SseTransportError;

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let (client, endpoint, headers) = (
            self.client.clone(),
            self.endpoint.clone(),
            self.headers.clone(),
        );
        async move {
            let http = |e: reqwest::Error| SseTransportError::Http {
                url: endpoint.to_string(),
                message: e.to_string(),
            };
            client
                .post(endpoint.clone())
                .headers(headers)
                .json(&item)
                .send()
                .await
                .map_err(http)?
                .error_for_status()
                .map_err(http)?;
            Ok(())
        }
    }

    async fn receive(&mut self) -> Option<ServerJsonRpcMessage> {
        self.incoming.recv().await
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.reader.abort();
        Ok(())
    }
}
