//! Retained results: every completed call's converted, redacted text is kept, up to a
//! size limit, with an `output_id`, its size, a `sha256:` digest and whether it was
//! redacted; callers see a preview and page through the rest.
//!
//! Where they are kept is a [`backend`]: the data directory's `outputs/` folder (the
//! default: outputs up to 64 KiB as rows of its SQLite database, larger ones as files
//! reached only through a `cap_std` directory handle) or an S3 bucket
//! (`[results] store = "s3://…"`). An `output_id` must be one Airlock made, so no
//! caller-supplied text names a path or a key. Writes happen off the caller's path,
//! on the retention writer's thread, and are durable within 50 ms (at once for a
//! flush); until a text is written it is read from memory. Every byte read back is
//! checked against the digests of its blocks.
//!
//! Layer 4 (storage). May import: `digest`, `config`, `storage`.

mod backend;
mod export;
mod local;
mod read;
#[cfg(feature = "s3")]
mod s3;
mod small;
mod writer;

use std::path::Path;
use std::sync::Arc;

pub use backend::BLOCK;
use backend::{Backend, Item, StoredRecord};
pub use export::{Export, ExportError, ExportedPart, MAX_EXPORT_PARTS};
pub use read::{Page, ReadError};
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

impl ResultStore {
    /// Opens (creating) `outputs/` inside the data directory `data_dir`: small outputs in
    /// its database (`small.sqlite3`), larger ones as files.
    pub fn open(data_dir: &Path, limits: ResultLimits) -> std::io::Result<Self> {
        Self::open_indexed(data_dir, limits, None)
    }

    /// [`ResultStore::open`], reporting every result to `index` once it is durable.
    pub fn open_indexed(
        data_dir: &Path,
        limits: ResultLimits,
        index: Option<Arc<dyn ResultIndex>>,
    ) -> std::io::Result<Self> {
        let data = Dir::open_ambient_dir(data_dir, cap_std::ambient_authority())?;
        data.create_dir_all(OUTPUTS_DIR)?;
        // Opened through the data directory's handle: `outputs` may not lead out of it.
        let dir = data.open_dir(OUTPUTS_DIR)?;
        let small = small::SmallStore::open(&data_dir.join(OUTPUTS_DIR).join(small::SMALL_DB))?;
        Self::with_backend(
            Arc::new(local::LocalBackend::new(dir, Some(small))),
            limits,
            index,
        )
    }

    /// Opens the store `location` names: the data directory's `outputs/` folder, or an
    /// S3 bucket (`secret_access_key` is the resolved value of its secret key). Blocks:
    /// a bucket is checked by putting and reading back a small probe object, and one
    /// that refuses the credentials is an error (`PermissionDenied`) naming the store;
    /// one that does not answer within 5 s is logged and opened anyway.
    #[cfg_attr(not(feature = "s3"), allow(unused_variables))]
    pub fn open_at(
        data_dir: &Path,
        location: &crate::config::ResultsLocation,
        secret_access_key: Option<String>,
        limits: ResultLimits,
        index: Option<Arc<dyn ResultIndex>>,
    ) -> std::io::Result<Self> {
        match location {
            crate::config::ResultsLocation::Local => Self::open_indexed(data_dir, limits, index),
            #[cfg(not(feature = "s3"))]
            crate::config::ResultsLocation::S3(_) => Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "[results] store names an S3 bucket, and this build of Airlock has no S3 \
                 support (cargo feature `s3`, on in the `airlock` binary)",
            )),
            #[cfg(feature = "s3")]
            crate::config::ResultsLocation::S3(s3) => {
                let backend = s3::S3Backend::new(s3, secret_access_key)?;
                // Credentials the bucket refuses are an error now, not at the first call;
                // a bucket that does not answer yet is not (readiness reports it).
                match backend.verify() {
                    Ok(()) => {}
                    Err(s3::Unverified::Refused(why)) => {
                        return Err(std::io::Error::new(
                            std::io::ErrorKind::PermissionDenied,
                            why,
                        ));
                    }
                    Err(s3::Unverified::Unreachable(why)) => {
                        tracing::warn!("{why}; outputs are kept once it answers");
                    }
                }
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

    /// Every output the store holds, as (service folder, output id). Blocking: it
    /// lists the whole store (every object under the prefix, for S3).
    pub fn list_stored(&self) -> std::io::Result<Vec<(String, String)>> {
        self.backend.list()
    }

    /// The record of a stored output (blocking).
    pub fn stored_record(&self, folder: &str, id: &str) -> std::io::Result<Retained> {
        let bytes = self.backend.record(folder, id)?;
        let stored: StoredRecord = serde_json::from_slice(&bytes).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("the record of output {id} in {folder}/ does not parse: {e}"),
            )
        })?;
        Ok(stored.record)
    }

    /// The folder a service's outputs are kept under.
    pub fn folder_of(service: &str) -> String {
        service_dir_name(service)
    }

    /// Where outputs are kept, for messages (no credentials).
    pub fn describe(&self) -> String {
        self.backend.describe()
    }

    /// Whether the store answers now (blocking: a network round trip for S3).
    pub fn reachable(&self) -> std::io::Result<()> {
        self.backend.reachable()
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
    /// store other hosts share, until the result is kept (so another host can page it
    /// the moment its id is handed out, and a crash of this one cannot lose it).
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
        // In a shared store every id is handed out only once its output is kept, even
        // one the preview holds whole: another replica may be asked for it at once, and
        // a replica killed before its writer ran would take it with it.
        let until_kept = self.backend.shared();
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
}

fn new_output_id() -> String {
    // Time-ordered (new ids sort after old ones, so the small-outputs database's index
    // grows at its end), with 74 random bits: no counter shared between ids.
    uuid::Uuid::new_v7(uuid::Timestamp::now(uuid::NoContext))
        .simple()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_reassemble_exactly_on_char_boundaries() {
        let tmp = tempfile::tempdir().unwrap();
        let store = ResultStore::open(
            tmp.path(),
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
        let store = ResultStore::open(
            tmp.path(),
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
