//! [`FrameGuard`]: what a stdio server writes, checked line by line before the MCP codec
//! sees it. A line over the size limit, or one that is not JSON Airlock can decode
//! (invalid UTF-8, nested deeper than the parser allows, cut off), would otherwise be
//! dropped silently and leave the call waiting for its timeout. The guard replaces such
//! an answer with a JSON-RPC error for the same request id, naming what was wrong, so
//! the call fails at once and the session stays usable. A bad line with no request id
//! (garbage, a broken notification) is dropped, as before.
//!
//! It works inside `poll_read`, with no task or thread hop, and holds at most one line
//! (bounded by the limit) at a time.

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};

/// The JSON-RPC error code of an answer the guard replaced.
pub const UNREADABLE_ANSWER: i32 = -32099;

/// How many leading bytes of an over-long line are kept to find its request id.
const HEAD: usize = 1024;
const SCRATCH: usize = 64 << 10;

/// An [`AsyncRead`] that passes complete, decodable lines through and replaces the rest.
pub struct FrameGuard<R> {
    inner: R,
    max: usize,
    line: Vec<u8>,
    /// Set while the rest of an over-long line is being discarded; holds its head.
    oversized: Option<Vec<u8>>,
    out: Vec<u8>,
    out_pos: usize,
    scratch: Box<[u8]>,
    eof: bool,
}

impl<R> FrameGuard<R> {
    /// Guards `inner`, allowing lines of at most `max` bytes.
    pub fn new(inner: R, max: usize) -> Self {
        FrameGuard {
            inner,
            max,
            line: Vec::new(),
            oversized: None,
            out: Vec::new(),
            out_pos: 0,
            scratch: vec![0; SCRATCH].into_boxed_slice(),
            eof: false,
        }
    }

    /// Takes in bytes read from the server, moving finished lines to `out`.
    fn take_in(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let newline = bytes.iter().position(|b| *b == b'\n');
            let (piece, rest) = match newline {
                Some(i) => (&bytes[..=i], &bytes[i + 1..]),
                None => (bytes, &[][..]),
            };
            bytes = rest;
            if let Some(head) = self.oversized.as_mut() {
                let room = HEAD.saturating_sub(head.len());
                head.extend_from_slice(&piece[..piece.len().min(room)]);
                if newline.is_some() {
                    let head = self.oversized.take().expect("checked above");
                    let message = format!(
                        "the server's answer is larger than the {} MiB message limit; it was discarded",
                        self.max >> 20
                    );
                    self.reject(&head, &message);
                }
                continue;
            }
            if self.line.len() + piece.len() > self.max + 1 {
                let mut head = std::mem::take(&mut self.line);
                head.truncate(HEAD);
                let room = HEAD.saturating_sub(head.len());
                head.extend_from_slice(&piece[..piece.len().min(room)]);
                self.line = Vec::new();
                if newline.is_some() {
                    let message = format!(
                        "the server's answer is larger than the {} MiB message limit; it was discarded",
                        self.max >> 20
                    );
                    self.reject(&head, &message);
                } else {
                    self.oversized = Some(head);
                }
                continue;
            }
            self.line.extend_from_slice(piece);
            if newline.is_some() {
                let line = std::mem::take(&mut self.line);
                self.finish_line(line);
            }
        }
    }

    /// A complete line: passed on when it decodes, replaced when it does not.
    fn finish_line(&mut self, line: Vec<u8>) {
        let body = line.trim_ascii();
        if body.is_empty() {
            return;
        }
        match decodable(body) {
            Ok(()) => {
                if self.out.is_empty() {
                    self.out = line;
                } else {
                    self.out.extend_from_slice(&line);
                }
            }
            Err(e) => {
                let message =
                    format!("the server's answer cannot be decoded ({e}); it was discarded");
                self.reject(&line, &message);
            }
        }
    }

    /// Replaces a bad answer (its first bytes in `head`) with a JSON-RPC error for the
    /// same request id, when one can be found; drops it otherwise.
    fn reject(&mut self, head: &[u8], message: &str) {
        let head = &head[..head.len().min(HEAD)];
        match answer_id(head) {
            Some(id) => {
                let error = serde_json::json!({
                    "jsonrpc": "2.0",
                    "id": id,
                    "error": {"code": UNREADABLE_ANSWER, "message": message},
                });
                self.out.extend_from_slice(error.to_string().as_bytes());
                self.out.push(b'\n');
            }
            None => tracing::warn!("dropped a message from the server: {message}"),
        }
    }
}

/// Deepest nesting accepted; the MCP codec's JSON parser refuses a little deeper.
const MAX_DEPTH: usize = 120;

/// Why the codec would refuse a line, in words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
struct Undecodable(String);

impl From<String> for Undecodable {
    fn from(message: String) -> Self {
        Undecodable(message)
    }
}

impl From<&str> for Undecodable {
    fn from(message: &str) -> Self {
        Undecodable(message.to_string())
    }
}

/// Whether the codec will decode `line`: UTF-8, nested at most [`MAX_DEPTH`] levels,
/// and well-formed JSON.
fn decodable(line: &[u8]) -> Result<(), Undecodable> {
    std::str::from_utf8(line).map_err(|e| format!("not UTF-8: {e}"))?;
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &b in line {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(format!("nested deeper than {MAX_DEPTH} levels").into());
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    serde_json::from_slice::<serde::de::IgnoredAny>(line)
        .map(|_| ())
        .map_err(|e| Undecodable(e.to_string()))
}

/// The request id of a JSON-RPC answer, read from its first bytes: the top-level `"id"`
/// of a message that is not itself a request or notification.
fn answer_id(head: &[u8]) -> Option<serde_json::Value> {
    let text = String::from_utf8_lossy(head);
    if text.contains("\"method\"") {
        return None;
    }
    let at = text.find("\"id\"")?;
    let rest = text[at + 4..].trim_start().strip_prefix(':')?.trim_start();
    if let Some(quoted) = rest.strip_prefix('"') {
        let end = quoted.find('"')?;
        return Some(serde_json::Value::String(quoted[..end].to_string()));
    }
    let digits: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '-')
        .collect();
    digits.parse::<i64>().ok().map(serde_json::Value::from)
}

impl<R: AsyncRead + Unpin> AsyncRead for FrameGuard<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        loop {
            if this.out_pos < this.out.len() {
                let n = buf.remaining().min(this.out.len() - this.out_pos);
                buf.put_slice(&this.out[this.out_pos..this.out_pos + n]);
                this.out_pos += n;
                if this.out_pos == this.out.len() {
                    this.out.clear();
                    this.out_pos = 0;
                }
                return Poll::Ready(Ok(()));
            }
            if this.eof {
                return Poll::Ready(Ok(()));
            }
            let mut read = ReadBuf::new(&mut this.scratch);
            match Pin::new(&mut this.inner).poll_read(cx, &mut read) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(())) => {
                    let n = read.filled().len();
                    if n == 0 {
                        this.eof = true;
                        continue;
                    }
                    let scratch = std::mem::take(&mut this.scratch);
                    this.take_in(&scratch[..n]);
                    this.scratch = scratch;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
