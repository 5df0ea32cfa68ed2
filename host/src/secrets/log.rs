//! The process's log scrubber: every secret any Airlock in this process knows is
//! registered here, and [`scrub_log`] removes them from a formatted log record. The
//! `airlock` binary routes all of its `tracing` output (every crate, every level) through
//! it, in either log format (text, or JSON with `--log-format json`); an embedder can do
//! the same with its own writer ([`ScrubbingWriter`]).

use std::borrow::Cow;
use std::io::Write;
use std::sync::{OnceLock, RwLock};

use super::KnownSecrets;

fn registry() -> &'static RwLock<KnownSecrets> {
    static SECRETS: OnceLock<RwLock<KnownSecrets>> = OnceLock::new();
    SECRETS.get_or_init(|| RwLock::new(KnownSecrets::new()))
}

/// Adds `secrets` to what log output is scrubbed of, each also as it appears escaped
/// inside a JSON string or a `Debug`-formatted field (`\"`, `\\`, `\n`…), so neither
/// the text nor the JSON log format lets one through.
pub fn register_log_secrets(secrets: &KnownSecrets) {
    if secrets.is_empty() {
        return;
    }
    let mut added = secrets.clone();
    for secret in secrets.iter() {
        let quoted = serde_json::to_string(&secret.value).unwrap_or_default();
        let escaped = quoted
            .get(1..quoted.len().saturating_sub(1))
            .unwrap_or_default();
        if !escaped.is_empty() && escaped != secret.value {
            added = added.with(&secret.name, escaped);
        }
    }
    let mut all = registry().write().expect("log secrets poisoned");
    *all = all.union(&added);
}

/// Every secret registered so far (a snapshot): what the span exporter scrubs a batch
/// of, in the same forms as log output.
pub fn log_secrets() -> KnownSecrets {
    registry().read().expect("log secrets poisoned").clone()
}

/// `text` (a formatted log record) without any registered secret.
pub fn scrub_log(text: &str) -> Cow<'_, str> {
    let all = registry().read().expect("log secrets poisoned").clone();
    match all.scrub(text) {
        Cow::Borrowed(_) => Cow::Borrowed(text),
        Cow::Owned(s) => Cow::Owned(s),
    }
}

/// A writer that scrubs each record written through it, then passes it to `inner`.
/// `tracing_subscriber`'s fmt layer writes one whole record per call.
pub struct ScrubbingWriter<W: Write> {
    inner: W,
}

impl<W: Write> ScrubbingWriter<W> {
    /// Wraps `inner`.
    pub fn new(inner: W) -> Self {
        ScrubbingWriter { inner }
    }
}

impl<W: Write> Write for ScrubbingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        self.inner.write_all(scrub_log(&text).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}
