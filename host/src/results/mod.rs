//! Retained results: every completed call's converted, redacted text is kept under the
//! data directory (`outputs/`), up to a size limit, with an `output_id`, its size, a
//! `sha256:` digest and whether it was redacted; callers see a preview and page through
//! the rest. Files are reached only through a `cap_std` directory handle, and an
//! `output_id` must be one Airlock made, so no caller-supplied text names a path.
//!
//! Layer 4 (storage). May import: `digest`.

mod export;

use std::io::Write;

pub use export::{Export, ExportError, ExportedPart, MAX_EXPORT_PARTS};

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

/// The store under `<data dir>/outputs`.
pub struct ResultStore {
    dir: Dir,
    limits: ResultLimits,
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
    /// Opens (creating) `outputs/` inside the data directory.
    pub fn open(data_dir: &Dir, limits: ResultLimits) -> std::io::Result<Self> {
        data_dir.create_dir_all(OUTPUTS_DIR)?;
        Ok(ResultStore {
            dir: data_dir.open_dir(OUTPUTS_DIR)?,
            limits,
        })
    }

    /// The limits in force.
    pub fn limits(&self) -> ResultLimits {
        self.limits
    }

    /// Keeps `text` (already redacted) for `service` and returns its record and the
    /// preview of at most `preview_limit` bytes.
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
        let preview = cut_at_char_boundary(text, preview_limit).to_string();
        let mut record = Retained {
            output_id: None,
            size: text.len(),
            digest: digest(text.as_bytes()),
            complete: preview.len() == text.len(),
            redacted,
            not_retained_reason: None,
            agent: agent.map(str::to_string),
        };
        if text.len() > self.limits.max_retained {
            record.not_retained_reason = Some(format!(
                "the result is {} bytes, over the retention limit of {} bytes; it was not kept",
                text.len(),
                self.limits.max_retained
            ));
            return Ok((record, preview));
        }
        let id = uuid::Uuid::new_v4().simple().to_string();
        let sub = service_dir_name(service);
        self.dir.create_dir_all(&sub)?;
        let dir = self.dir.open_dir(&sub)?;
        record.output_id = Some(id.clone());
        let tmp = format!("{id}.tmp");
        {
            let mut file = dir.create(&tmp)?;
            file.write_all(text.as_bytes())?;
            file.sync_all()?;
        }
        dir.rename(&tmp, &dir, format!("{id}.txt"))?;
        dir.write(
            format!("{id}.json"),
            serde_json::to_vec(&record).map_err(std::io::Error::other)?,
        )?;
        Ok((record, preview))
    }

    /// The record of a retained output.
    pub fn record(&self, service: &str, output_id: &str) -> Result<Retained, ReadError> {
        let not_found = || ReadError::NotFound {
            service: service.into(),
            output_id: output_id.into(),
        };
        if !valid_output_id(output_id) {
            return Err(not_found());
        }
        let dir = self
            .dir
            .open_dir(service_dir_name(service))
            .map_err(|_| not_found())?;
        let bytes = dir
            .read(format!("{output_id}.json"))
            .map_err(|_| not_found())?;
        serde_json::from_slice(&bytes).map_err(|e| ReadError::Io {
            output_id: output_id.into(),
            message: e.to_string(),
        })
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

    /// The whole retained text of an output.
    pub(crate) fn full_text(&self, service: &str, output_id: &str) -> Result<String, ReadError> {
        let not_found = || ReadError::NotFound {
            service: service.into(),
            output_id: output_id.into(),
        };
        if !valid_output_id(output_id) {
            return Err(not_found());
        }
        let dir = self
            .dir
            .open_dir(service_dir_name(service))
            .map_err(|_| not_found())?;
        let bytes = dir
            .read(format!("{output_id}.txt"))
            .map_err(|_| not_found())?;
        String::from_utf8(bytes).map_err(|e| ReadError::Io {
            output_id: output_id.into(),
            message: e.to_string(),
        })
    }

    /// Reads the page of at most `page_size` bytes starting at byte `offset`, ending on a
    /// character boundary.
    pub fn read(
        &self,
        service: &str,
        output_id: &str,
        offset: usize,
        page_size: usize,
    ) -> Result<Page, ReadError> {
        let text = self.full_text(service, output_id)?;
        if offset > text.len() || !text.is_char_boundary(offset) {
            return Err(ReadError::BadOffset {
                output_id: output_id.into(),
                offset,
                size: text.len(),
            });
        }
        let mut page = cut_at_char_boundary(&text[offset..], page_size.max(4));
        if page.is_empty() && offset < text.len() {
            // A page smaller than one character still returns that character.
            let ch = text[offset..].chars().next().expect("offset < len");
            page = &text[offset..offset + ch.len_utf8()];
        }
        let end = offset + page.len();
        let eof = end >= text.len();
        Ok(Page {
            text: page.to_string(),
            next_offset: (!eof).then_some(end),
            eof,
        })
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
