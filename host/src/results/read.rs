//! Reading retained outputs back: records, pages cut on character boundaries (only the
//! blocks a page touches are read, each checked against its digest), whole texts, and
//! why a read fails. A result not yet kept is read from the retention writer's memory.

use std::sync::Arc;

use serde::Serialize;

use super::backend::StoredRecord;
use super::{ResultStore, Retained, digest, service_dir_name, valid_output_id, writer};

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

    /// Where an output is: waiting in memory for the store, or kept (its record read
    /// once, for every check and read a request makes).
    fn find(&self, service: &str, output_id: &str) -> Result<Found, ReadError> {
        match self.pending(output_id) {
            Some(pending) => Ok(Found::Pending(pending)),
            None => Ok(Found::Stored(self.stored(service, output_id)?)),
        }
    }

    /// [`ResultStore::find`] for `agent`: refused unless the output was produced by that
    /// agent's call (outputs kept without an owner are readable by any agent).
    fn find_for(&self, agent: &str, service: &str, output_id: &str) -> Result<Found, ReadError> {
        let found = self.find(service, output_id)?;
        if let Some(owner) = &found.record().agent
            && owner != agent
        {
            return Err(ReadError::NotOwner {
                output_id: output_id.into(),
                agent: agent.into(),
            });
        }
        Ok(found)
    }

    /// The record of a retained output.
    pub fn record(&self, service: &str, output_id: &str) -> Result<Retained, ReadError> {
        Ok(self.find(service, output_id)?.record().clone())
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
        let found = self.find_for(agent, service, output_id)?;
        self.read_found(&found, service, output_id, offset, page_size)
    }

    /// The whole retained text of an output for `agent` (owner checked as for a page),
    /// checked against its digest.
    pub(crate) fn full_text_for(
        &self,
        agent: &str,
        service: &str,
        output_id: &str,
    ) -> Result<String, ReadError> {
        let stored = match self.find_for(agent, service, output_id)? {
            Found::Pending(pending) => return Ok(pending.text.to_string()),
            Found::Stored(stored) => stored,
        };
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
        let found = self.find(service, output_id)?;
        self.read_found(&found, service, output_id, offset, page_size)
    }

    fn read_found(
        &self,
        found: &Found,
        service: &str,
        output_id: &str,
        offset: usize,
        page_size: usize,
    ) -> Result<Page, ReadError> {
        let page_size = page_size.max(4);
        let (mut window, size) = match found {
            Found::Pending(pending) => {
                let bytes = pending.text.as_bytes();
                let from = offset.min(bytes.len());
                let to = bytes.len().min(from.saturating_add(page_size + 4));
                (bytes[from..to].to_vec(), bytes.len())
            }
            Found::Stored(stored) => {
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
                        .map_err(|e| self.corrupt(output_id, e.to_string()))?;
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

/// An output found: waiting in memory, or kept with its stored record.
enum Found {
    Pending(Arc<writer::Pending>),
    Stored(StoredRecord),
}

impl Found {
    fn record(&self) -> &Retained {
        match self {
            Found::Pending(pending) => &pending.record,
            Found::Stored(stored) => &stored.record,
        }
    }
}

fn io_error(output_id: &str, error: impl std::fmt::Display) -> ReadError {
    ReadError::Io {
        output_id: output_id.into(),
        message: error.to_string(),
    }
}
