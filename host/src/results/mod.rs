//! Retained results: every completed call's converted, redacted text is kept, up to a
//! size limit, with an `output_id`, its size, a `sha256:` digest and whether it was
//! redacted; callers see a preview and page through the rest.
//!
//! Where they are kept is a [`backend`]: the data directory's `outputs/` folder (the
//! default, reached only through a `cap_std` directory handle) or an S3 bucket
//! (`[results] store = "s3://…"`). An `output_id` must be one Airlock made, so no
//! caller-supplied text names a path or a key. Writes are durable and happen off the
//! caller's path, on the retention writer's thread; until a text is kept it is read
//! from memory. Every byte read back is checked against the digests of its blocks.
//!
//! Layer 4 (storage). May import: `digest`, `config`, `storage`.

mod backend;
mod export;
mod local;
mod s3;
mod writer;

use std::sync::Arc;

pub use backend::BLOCK;
use backend::{Backend, Item, StoredRecord};
pub use export::{Export, ExportError, ExportedPart, MAX_EXPORT_PARTS};
pub use writer::ResultIndex;
use writer::Writer;

use cap_std::fs::Dir;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Largest result kept by default (32 MiB).
pub const DEFAULT_MAX_RETAINED: usize = 32 << 20;
/// Preview size for the model (48 KiB).
pub const DEFAULT_PREVIEW: usize = 48 << 10;
/// Preview size on the compact surface (4 KiB).
pub const COMPACT_PREVIEW: usize = 4 << 10;
const OUTPUTS_DIR: &str = "outputs";

/// Limits for retention and previews.
#[derive(Debug, Clone, Copy)]
pub struct ResultLimits {
    /// Largest result kept, in bytes.
    pub max_retained: usize,
    /// Preview size, in bytes.
    pub preview: usize,
}

impl Default for ResultLimits {
    fn default() -> Self {
        ResultLimits {
            max_retained: DEFAULT_MAX_RETAINED,
            preview: DEFAULT_PREVIEW,
        }
    }
}

/// The record of one retained (or too large to retain) result.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Retained {
    /// The id to read the output with; `None` when the result was too large to keep.
    pub output_id: Option<String>,
    /// Size of the full text in UTF-8 bytes.
    pub size: usize,
    /// `sha256:<hex>` of the full text.
    pub digest: String,
    /// Whether the preview holds the whole text.
    pub complete: bool,
    /// Whether anything was redacted.
    pub redacted: bool,
    /// Why the result was not kept, when it was not.
    pub not_retained_reason: Option<String>,
    /// The agent whose call produced it (only that agent may read it).
    #[serde(default)]
    pub agent: Option<String>,
}

/// A page of a retained output.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Page {
    /// The text of the page.
    pub text: String,
    /// Where the next page starts, or `None` at the end.
    pub next_offset: Option<usize>,
    /// Whether this page reaches the end.
    pub eof: bool,
}

/// Why a read failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// No such output (or a malformed id).
    #[error("no output \"{output_id}\" for service \"{service}\"")]
    NotFound {
        /// The service.
        service: String,
        /// The id asked for.
        output_id: String,
    },
    /// The offset is past the end or inside a character.
    #[error("offset {offset} is not a character boundary of output \"{output_id}\" ({size} bytes)")]
    BadOffset {
        /// The id.
        output_id: String,
        /// The offset asked for.
        offset: usize,
        /// The output's size.
        size: usize,
    },
    /// The output belongs to another agent.
    #[error("output \"{output_id}\" belongs to another agent; agent \"{agent}\" may not read it")]
    NotOwner {
        /// The id.
        output_id: String,
        /// The agent asking.
        agent: String,
    },
    /// The output is recorded but its text is gone from the store.
    #[error(
        "output \"{output_id}\" is missing from {store}: its record is there but its text is not (deleted outside Airlock?)"
    )]
    Missing {
        /// The id.
        output_id: String,
        /// Where outputs are kept.
        store: String,
    },
    /// What was read back is not what was kept.
    #[error("output \"{output_id}\" in {store} is corrupt: {message}")]
    Corrupt {
        /// The id.
        output_id: String,
        /// Where outputs are kept.
        store: String,
        /// Which block failed, with both digests.
        message: String,
    },
    /// The file could not be read.
    #[error("cannot read output \"{output_id}\": {message}")]
    Io {
        /// The id.
        output_id: String,
        /// The OS error.
        message: String,
    },
}

pub use crate::digest::sha256 as digest;

/// The longest prefix of `text` of at most `max` bytes that ends on a character boundary.
pub fn cut_at_char_boundary(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// A result ready to keep: its record (without an id yet), its preview and its text.
/// Made by [`prepare`], on a blocking thread: it digests the whole text.
#[derive(Debug)]
pub struct Prepared {
    record: Retained,
    preview: String,
    text: String,
}

/// Digests `text` and cuts its preview of at most `preview_limit` bytes, for `agent`.
/// CPU work in proportion to the text: call it where blocking is allowed.
pub fn prepare(
    agent: Option<&str>,
    text: String,
    redacted: bool,
    preview_limit: usize,
) -> Prepared {
    let (record, preview) = describe(agent, &text, redacted, preview_limit);
    Prepared {
        record,
        preview,
        text,
    }
}

/// The record (without an id) and the preview of `text`.
fn describe(
    agent: Option<&str>,
    text: &str,
    redacted: bool,
    preview_limit: usize,
) -> (Retained, String) {
    let preview = cut_at_char_boundary(text, preview_limit).to_string();
    let record = Retained {
        output_id: None,
        size: text.len(),
        digest: digest(text.as_bytes()),
        complete: preview.len() == text.len(),
        redacted,
        not_retained_reason: None,
        agent: agent.map(str::to_string),
    };
    (record, preview)
}

/// The retained results, wherever they are kept.
pub struct ResultStore {
    backend: Arc<dyn Backend>,
    limits: ResultLimits,
    writer: Writer,
}

fn service_dir_name(service: &str) -> String {
    let clean: String = service
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    format!(
        "{clean}-{}",
        &hex::encode(Sha256::digest(service.as_bytes()))[..8]
    )
}

fn valid_output_id(id: &str) -> bool {
    id.len() == 32
        && id
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

fn is_continuation(byte: u8) -> bool {
    byte & 0xC0 == 0x80
}

/// The length of the page that starts `window` (the bytes from the page's offset on,
/// at least `page_size + 4` of them unless the text ends sooner): at most `page_size`
/// bytes ending on a character boundary, or one whole character when `page_size` is
/// smaller than it.
fn page_len(window: &[u8], page_size: usize) -> usize {
    let mut cut = page_size.min(window.len());
    while cut > 0 && cut < window.len() && is_continuation(window[cut]) {
        cut -= 1;
    }
    if cut == 0 && !window.is_empty() {
        cut = 1;
        while cut < window.len() && is_continuation(window[cut]) {
            cut += 1;
        }
    }
    cut
}

impl ResultStore {
    /// Opens (creating) `outputs/` inside the data directory.
    pub fn open(data_dir: &Dir, limits: ResultLimits) -> std::io::Result<Self> {
        Self::open_indexed(data_dir, limits, None)
    }

    /// [`ResultStore::open`], reporting every result that reaches the disk to `index`.
    pub fn open_indexed(
        data_dir: &Dir,
        limits: ResultLimits,
        index: Option<Arc<dyn ResultIndex>>,
    ) -> std::io::Result<Self> {
        data_dir.create_dir_all(OUTPUTS_DIR)?;
        let dir = data_dir.open_dir(OUTPUTS_DIR)?;
        Self::with_backend(Arc::new(local::LocalBackend::new(dir)), limits, index)
    }

    /// Opens the store `location` names: the data directory's `outputs/` folder, or an
    /// S3 bucket (`secret_access_key` is the resolved value of its secret key).
    pub fn open_at(
        data_dir: &Dir,
        location: &crate::config::ResultsLocation,
        secret_access_key: Option<String>,
        limits: ResultLimits,
        index: Option<Arc<dyn ResultIndex>>,
    ) -> std::io::Result<Self> {
        match location {
            crate::config::ResultsLocation::Local => Self::open_indexed(data_dir, limits, index),
            crate::config::ResultsLocation::S3(s3) => {
                let backend =
                    s3::S3Backend::new(s3, secret_access_key).map_err(std::io::Error::other)?;
                Self::with_backend(Arc::new(backend), limits, index)
            }
        }
    }

    fn with_backend(
        backend: Arc<dyn Backend>,
        limits: ResultLimits,
        index: Option<Arc<dyn ResultIndex>>,
    ) -> std::io::Result<Self> {
        let writer = Writer::start(backend.clone(), index)?;
        Ok(ResultStore {
            backend,
            limits,
            writer,
        })
    }

    /// Where outputs are kept, for messages (no credentials).
    pub fn describe(&self) -> String {
        self.backend.describe()
    }

    /// The limits in force.
    pub fn limits(&self) -> ResultLimits {
        self.limits
    }

    /// Keeps `text` (already redacted) for `service` now, durably, and returns its
    /// record and the preview of at most `preview_limit` bytes. Blocking (it writes and
    /// `fsync`s); the data path uses [`prepare`] and [`ResultStore::keep`] instead.
    pub fn retain(
        &self,
        service: &str,
        text: &str,
        redacted: bool,
        preview_limit: usize,
    ) -> std::io::Result<(Retained, String)> {
        self.retain_for(None, service, text, redacted, preview_limit)
    }

    /// [`ResultStore::retain`] on behalf of `agent`, who alone may read it back.
    pub fn retain_for(
        &self,
        agent: Option<&str>,
        service: &str,
        text: &str,
        redacted: bool,
        preview_limit: usize,
    ) -> std::io::Result<(Retained, String)> {
        let (mut record, preview_text) = describe(agent, text, redacted, preview_limit);
        if let Some(reason) = self.over_limit(record.size) {
            record.not_retained_reason = Some(reason);
            return Ok((record, preview_text));
        }
        let id = new_output_id();
        record.output_id = Some(id.clone());
        let stored = StoredRecord::new(record.clone(), text.as_bytes());
        let item = Item {
            dir_name: &service_dir_name(service),
            id: &id,
            text: text.as_bytes(),
            record: serde_json::to_vec(&stored).map_err(std::io::Error::other)?,
        };
        self.backend.put_batch(&[item]).remove(0)?;
        Ok((record, preview_text))
    }

    /// Keeps a prepared result for `service`: it gets its `output_id` and is readable at
    /// once, and reaches the disk on the retention writer's thread. Waits when the
    /// results already waiting for the disk fill the writer's memory budget, and, in a
    /// store other hosts share, until a result the preview does not hold whole is kept
    /// (so another host can page it the moment its id is handed out).
    pub async fn keep(&self, service: &str, prepared: Prepared) -> (Retained, String) {
        let Prepared {
            mut record,
            preview,
            text,
        } = prepared;
        if let Some(reason) = self.over_limit(record.size) {
            record.not_retained_reason = Some(reason);
            return (record, preview);
        }
        let id = new_output_id();
        record.output_id = Some(id.clone());
        let until_kept = self.backend.shared() && !record.complete;
        self.writer
            .submit(
                service_dir_name(service),
                service,
                id,
                record.clone(),
                Arc::new(text),
                until_kept,
            )
            .await;
        (record, preview)
    }

    /// Waits until every result kept so far is on disk (and indexed).
    pub async fn flush(&self) {
        self.writer.flush().await;
    }

    fn over_limit(&self, size: usize) -> Option<String> {
        (size > self.limits.max_retained).then(|| {
            format!(
                "the result is {size} bytes, over the retention limit of {} bytes; it was not kept",
                self.limits.max_retained
            )
        })
    }

    /// The text of an output not yet on disk, if it is one.
    fn pending(&self, output_id: &str) -> Option<Arc<writer::Pending>> {
        self.writer
            .shared
            .pending
            .lock()
            .expect("pending lock poisoned")
            .get(output_id)
            .cloned()
    }

    /// Why an output is missing when its write failed.
    fn failed(&self, output_id: &str) -> Option<ReadError> {
        let failed = self
            .writer
            .shared
            .failed
            .lock()
            .expect("failed lock poisoned");
        failed.get(output_id).map(|message| ReadError::Io {
            output_id: output_id.into(),
            message: format!("it could not be written: {message}"),
        })
    }

    /// The stored record of an output that is kept (not pending).
    fn stored(&self, service: &str, output_id: &str) -> Result<StoredRecord, ReadError> {
        let not_found = || ReadError::NotFound {
            service: service.into(),
            output_id: output_id.into(),
        };
        if !valid_output_id(output_id) {
            return Err(not_found());
        }
        let bytes = match self.backend.record(&service_dir_name(service), output_id) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(self.failed(output_id).unwrap_or_else(not_found));
            }
            Err(e) => return Err(io_error(output_id, e)),
        };
        serde_json::from_slice(&bytes).map_err(|e| ReadError::Corrupt {
            output_id: output_id.into(),
            store: self.backend.describe(),
            message: format!("its record does not parse: {e}"),
        })
    }

    /// A text read error: a missing text is [`ReadError::Missing`].
    fn text_error(&self, output_id: &str, e: std::io::Error) -> ReadError {
        if e.kind() == std::io::ErrorKind::NotFound {
            ReadError::Missing {
                output_id: output_id.into(),
                store: self.backend.describe(),
            }
        } else {
            io_error(output_id, e)
        }
    }

    fn corrupt(&self, output_id: &str, message: String) -> ReadError {
        ReadError::Corrupt {
            output_id: output_id.into(),
            store: self.backend.describe(),
            message,
        }
    }

    /// The record of a retained output.
    pub fn record(&self, service: &str, output_id: &str) -> Result<Retained, ReadError> {
        if let Some(pending) = self.pending(output_id) {
            return Ok(pending.record.clone());
        }
        Ok(self.stored(service, output_id)?.record)
    }

    /// Reads a page for `agent`: refused unless the output was produced by that agent's
    /// call (outputs kept without an owner are readable by any agent).
    pub fn read_for(
        &self,
        agent: &str,
        service: &str,
        output_id: &str,
        offset: usize,
        page_size: usize,
    ) -> Result<Page, ReadError> {
        let record = self.record(service, output_id)?;
        if let Some(owner) = &record.agent
            && owner != agent
        {
            return Err(ReadError::NotOwner {
                output_id: output_id.into(),
                agent: agent.into(),
            });
        }
        self.read(service, output_id, offset, page_size)
    }

    /// The whole retained text of an output, checked against its digest.
    pub(crate) fn full_text(&self, service: &str, output_id: &str) -> Result<String, ReadError> {
        if let Some(pending) = self.pending(output_id) {
            return Ok(pending.text.to_string());
        }
        let stored = self.stored(service, output_id)?;
        let bytes = self
            .backend
            .text(&service_dir_name(service), output_id)
            .map_err(|e| self.text_error(output_id, e))?;
        let found = digest(&bytes);
        if found != stored.record.digest {
            return Err(self.corrupt(
                output_id,
                format!(
                    "its text fails its digest check: recorded {}, read {found} ({} of {} bytes)",
                    stored.record.digest,
                    bytes.len(),
                    stored.record.size
                ),
            ));
        }
        String::from_utf8(bytes).map_err(|e| io_error(output_id, e))
    }

    /// Reads the page of at most `page_size` bytes starting at byte `offset`, ending on a
    /// character boundary. Only the blocks the page touches are read, and each is
    /// checked against its digest first.
    pub fn read(
        &self,
        service: &str,
        output_id: &str,
        offset: usize,
        page_size: usize,
    ) -> Result<Page, ReadError> {
        let page_size = page_size.max(4);
        let (mut window, size) = match self.pending(output_id) {
            Some(pending) => {
                let bytes = pending.text.as_bytes();
                let from = offset.min(bytes.len());
                let to = bytes.len().min(from.saturating_add(page_size + 4));
                (bytes[from..to].to_vec(), bytes.len())
            }
            None => {
                let stored = self.stored(service, output_id)?;
                let size = stored.record.size;
                let mut window = Vec::new();
                if offset < size {
                    let wanted = offset..size.min(offset.saturating_add(page_size + 4));
                    let blocks = stored.covering(wanted.clone());
                    let bytes = self
                        .backend
                        .text_range(
                            &service_dir_name(service),
                            output_id,
                            blocks.start as u64..blocks.end as u64,
                        )
                        .map_err(|e| self.text_error(output_id, e))?;
                    if bytes.len() != blocks.len() {
                        return Err(self.corrupt(
                            output_id,
                            format!(
                                "bytes {}..{} of its text were asked for and {} came back (the text is shorter than its record's {size} bytes)",
                                blocks.start,
                                blocks.end,
                                bytes.len()
                            ),
                        ));
                    }
                    stored
                        .check(blocks.start, &bytes)
                        .map_err(|m| self.corrupt(output_id, m))?;
                    window = bytes[wanted.start - blocks.start..wanted.end - blocks.start].to_vec();
                }
                (window, size)
            }
        };
        if offset > size || window.first().is_some_and(|&b| is_continuation(b)) {
            return Err(ReadError::BadOffset {
                output_id: output_id.into(),
                offset,
                size,
            });
        }
        let len = page_len(&window, page_size);
        window.truncate(len);
        let text = String::from_utf8(window).map_err(|e| io_error(output_id, e))?;
        let end = offset + len;
        let eof = end >= size;
        Ok(Page {
            text,
            next_offset: (!eof).then_some(end),
            eof,
        })
    }
}

fn new_output_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

fn io_error(output_id: &str, error: impl std::fmt::Display) -> ReadError {
    ReadError::Io {
        output_id: output_id.into(),
        message: error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_reassemble_exactly_on_char_boundaries() {
        let tmp = tempfile::tempdir().unwrap();
        let data = Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority()).unwrap();
        let store = ResultStore::open(
            &data,
            ResultLimits {
                max_retained: 1 << 20,
                preview: 10,
            },
        )
        .unwrap();
        let text = "héllo wörld ✓ ".repeat(50);
        let (record, preview) = store.retain("svc/../x", &text, false, 10).unwrap();
        assert!(!record.complete);
        assert!(preview.len() <= 10 && text.starts_with(&preview));
        let id = record.output_id.unwrap();
        let (mut offset, mut joined) = (0, String::new());
        loop {
            let page = store.read("svc/../x", &id, offset, 7).unwrap();
            joined.push_str(&page.text);
            match page.next_offset {
                Some(n) => offset = n,
                None => break,
            }
        }
        assert_eq!(joined, text);
        assert_eq!(digest(joined.as_bytes()), record.digest);
        assert!(matches!(
            store.read("svc/../x", "../../etc/passwd", 0, 7),
            Err(ReadError::NotFound { .. })
        ));
        assert!(matches!(
            store.read("svc/../x", &id, 2, 7),
            Err(ReadError::BadOffset { .. })
        ));
    }

    #[test]
    fn oversize_results_are_not_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let data = Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority()).unwrap();
        let store = ResultStore::open(
            &data,
            ResultLimits {
                max_retained: 8,
                preview: 4,
            },
        )
        .unwrap();
        let (record, _) = store.retain("s", "0123456789", false, 4).unwrap();
        assert!(record.output_id.is_none());
        assert!(
            record
                .not_retained_reason
                .unwrap()
                .contains("retention limit")
        );
    }
}
