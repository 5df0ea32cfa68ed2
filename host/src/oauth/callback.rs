//! The one-shot loopback HTTP listener that receives the browser's redirect: reading
//! requests, answering them with small pages, and parsing the callback and the state.

use std::time::Duration;

use rmcp::transport::auth::AuthorizationCallback;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::{CALLBACK_PATH, StepFailure, clip};

/// Longest request head read from one loopback connection.
const MAX_REQUEST_BYTES: usize = 16 * 1024;

/// How long one loopback connection may take to send its request line.
const REQUEST_READ_TIMEOUT: Duration = Duration::from_secs(10);

pub(super) const SUCCESS_PAGE: &str = "<!doctype html><html><head><meta charset=\"utf-8\"><title>Airlock</title></head><body><p>Airlock: authorized, you can close this tab.</p></body></html>";
pub(super) const FAILURE_PAGE: &str = "<!doctype html><html><head><meta charset=\"utf-8\"><title>Airlock</title></head><body><p>Airlock: authorization failed; the terminal says why. You can close this tab.</p></body></html>";
const NOT_FOUND_PAGE: &str = "<!doctype html><html><head><meta charset=\"utf-8\"><title>Airlock</title></head><body><p>Not found.</p></body></html>";

/// The `state` parameter of an authorization URL.
pub(super) fn state_of(auth_url: &str) -> Option<String> {
    let url = reqwest::Url::parse(auth_url).ok()?;
    url.query_pairs()
        .find(|(k, _)| k == "state")
        .map(|(_, v)| v.into_owned())
}

/// What a browser coming back with `error` (and `error_description`) is told, clipped:
/// the authorization server's refusal (the user said no, say).
pub fn server_refusal(error: &str, description: Option<&str>) -> String {
    let detail = description
        .map(|d| format!(": {}", clip(d, 200)))
        .unwrap_or_default();
    format!(
        "the authorization server answered error \"{}\"{detail}",
        clip(error, 100)
    )
}

/// What one request to the loopback listener carried.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Callback {
    /// Not the callback path (a favicon…): answered 404, the wait goes on.
    Other,
    /// The authorization code, and the RFC 9207 issuer if the server sent one.
    Code {
        code: String,
        issuer: Option<String>,
    },
}

/// Reads a request target (`/callback?code=…&state=…`). An `error=` answer, a missing
/// code or state, or a state other than `expected_state` is an error message (never
/// carrying the code).
pub(super) fn parse_callback(target: &str, expected_state: &str) -> Result<Callback, StepFailure> {
    if !target.starts_with('/') {
        return Ok(Callback::Other);
    }
    let Ok(url) = reqwest::Url::parse(&format!("http://127.0.0.1{target}")) else {
        return Ok(Callback::Other);
    };
    if url.path() != CALLBACK_PATH {
        return Ok(Callback::Other);
    }
    let pairs: Vec<(String, String)> = url.query_pairs().into_owned().collect();
    let param = |name: &str| {
        pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    if let Some(error) = param("error") {
        return Err(server_refusal(&error, param("error_description").as_deref()).into());
    }
    let callback = AuthorizationCallback::from_redirect_url(url.as_str())
        .map_err(|e| format!("the callback is incomplete: {e}"))?;
    if callback.csrf_token != expected_state {
        return Err("the callback's state does not match this authorization request".into());
    }
    Ok(Callback::Code {
        code: callback.code,
        issuer: callback.issuer,
    })
}

/// The callback request that carried the code; its connection waits for the answer page.
pub(super) struct CallbackHit {
    pub(super) code: String,
    pub(super) issuer: Option<String>,
    pub(super) stream: TcpStream,
}

/// Accepts loopback connections until one brings a request for [`CALLBACK_PATH`]; other
/// paths get a 404. Connections are read concurrently, so a browser's idle preconnect
/// does not hold the real request up.
pub(super) async fn wait_for_callback(
    listener: &TcpListener,
    expected_state: &str,
) -> Result<CallbackHit, StepFailure> {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(Option<(String, String)>, TcpStream)>(8);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((mut stream, _peer)) => {
                    let tx = tx.clone();
                    tokio::spawn(async move {
                        let request =
                            tokio::time::timeout(REQUEST_READ_TIMEOUT, read_request_line(&mut stream))
                                .await
                                .ok()
                                .flatten();
                        let _ = tx.send((request, stream)).await;
                    });
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            },
            Some((request, stream)) = rx.recv() => {
                let Some((method, target)) = request else {
                    continue;
                };
                if method != "GET" {
                    respond(stream, "405 Method Not Allowed", NOT_FOUND_PAGE).await;
                    continue;
                }
                match parse_callback(&target, expected_state) {
                    Ok(Callback::Other) => respond(stream, "404 Not Found", NOT_FOUND_PAGE).await,
                    Ok(Callback::Code { code, issuer }) => {
                        return Ok(CallbackHit { code, issuer, stream });
                    }
                    Err(message) => {
                        respond(stream, "400 Bad Request", FAILURE_PAGE).await;
                        return Err(message);
                    }
                }
            }
        }
    }
}

/// The method and target of an HTTP/1 request (reads the head, up to
/// [`MAX_REQUEST_BYTES`]).
async fn read_request_line(stream: &mut TcpStream) -> Option<(String, String)> {
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_REQUEST_BYTES {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&chunk[..n]);
    }
    let head = String::from_utf8_lossy(&head);
    let line = head.split("\r\n").next()?;
    let mut parts = line.split_ascii_whitespace();
    let method = parts.next()?.to_string();
    let target = parts.next()?.to_string();
    Some((method, target))
}

/// Answers a loopback request with an HTML page and closes the connection.
pub(super) async fn respond(mut stream: TcpStream, status: &str, body: &str) {
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}
