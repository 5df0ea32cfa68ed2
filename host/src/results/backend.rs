//! Where retained results are kept: the [`Backend`] trait, and the record each output is
//! stored with. Two backends: [`super::local::LocalBackend`] (the `outputs/` folder of
//! the data directory, the default) and [`super::s3::S3Backend`] (an S3 bucket, shared
//! by several hosts).
//!
//! Every output is two objects under `<service folder>/`: `<id>.txt`, the text, and
//! `<id>.json`, its [`StoredRecord`] (the local backend keeps outputs up to 64 KiB as one
//! database row holding both instead). The record is written after the text is durable,
//! so a record always names a text that was kept. The record holds a SHA-256 per
//! [`BLOCK`] bytes of the text: a page is read as the whole blocks it touches, and each
//! is checked before a byte of it is served.

use std::ops::Range;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::Retained;

/// Bytes per checked block of a retained text (a 48 KiB page reads at most two).
pub const BLOCK: usize = 64 << 10;

/// One output to keep.
pub(crate) struct Item<'a> {
    /// The service's folder name.
    pub dir_name: &'a str,
    /// The output id.
    pub id: &'a str,
    /// The text.
    pub text: &'a [u8],
    /// The record, serialized.
    pub record: Vec<u8>,
}

/// A place retained results are kept. Methods block: they run on the retention writer's
/// thread or where blocking is allowed.
pub(crate) trait Backend: Send + Sync {
    /// Keeps a batch: each text durably, then its record. One outcome per item.
    fn put_batch(&self, items: &[Item<'_>]) -> Vec<std::io::Result<()>>;
    /// Keeps a batch like [`Backend::put_batch`], but may leave it written and not yet
    /// durable (safe from a crash of this process, not from a power loss) until the
    /// next [`Backend::sync`]. By default, the same as `put_batch`.
    fn put_batch_unsynced(&self, items: &[Item<'_>]) -> Vec<std::io::Result<()>> {
        self.put_batch(items)
    }
    /// Makes every batch kept so far durable. By default there is nothing to do.
    fn sync(&self) -> std::io::Result<()> {
        Ok(())
    }
    /// Whether [`Backend::put_batch_unsynced`] leaves anything for [`Backend::sync`]
    /// (else the writer reports each batch at once).
    fn defers_sync(&self) -> bool {
        false
    }
    /// The record of an output (`NotFound` when there is none).
    fn record(&self, dir_name: &str, id: &str) -> std::io::Result<Vec<u8>>;
    /// Every output that has a record, as (service folder, id): the whole store listed.
    fn list(&self) -> std::io::Result<Vec<(String, String)>>;
    /// Bytes `range` of an output's text (fewer when the text is shorter).
    fn text_range(&self, dir_name: &str, id: &str, range: Range<u64>) -> std::io::Result<Vec<u8>>;
    /// An output's whole text.
    fn text(&self, dir_name: &str, id: &str) -> std::io::Result<Vec<u8>>;
    /// Where outputs are kept, for messages (no credentials).
    fn describe(&self) -> String;
    /// Whether other hosts read this store: then an output id is handed out only once
    /// its text is kept, so any of them can page it at once.
    fn shared(&self) -> bool;
    /// Whether the store answers now (a cheap probe, for readiness checks).
    fn reachable(&self) -> std::io::Result<()>;
}

/// What `<id>.json` holds: the record callers see, and the digest of each block.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct StoredRecord {
    /// The record.
    #[serde(flatten)]
    pub record: Retained,
    /// `sha256` (hex) of each [`BLOCK`] bytes of the text, in order (absent in records
    /// written before blocks were checked).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocks: Vec<String>,
}

impl StoredRecord {
    /// The stored record of `text`, its blocks digested.
    pub fn new(record: Retained, text: &[u8]) -> StoredRecord {
        StoredRecord {
            record,
            blocks: text
                .chunks(BLOCK)
                .map(|block| hex::encode(Sha256::digest(block)))
                .collect(),
        }
    }

    /// The block-aligned byte range that holds `range` of the text.
    pub fn covering(&self, range: Range<usize>) -> Range<usize> {
        let size = self.record.size;
        let start = range.start / BLOCK * BLOCK;
        let end = range.end.div_ceil(BLOCK).saturating_mul(BLOCK).min(size);
        start.min(size)..end.max(start.min(size))
    }

    /// Checks `bytes`, read from byte `start` (a block boundary) of the text, against
    /// the block digests. The error says which block, and what was expected and found.
    pub fn check(&self, start: usize, bytes: &[u8]) -> Result<(), DigestError> {
        if self.blocks.is_empty() {
            return Ok(());
        }
        for (i, block) in bytes.chunks(BLOCK).enumerate() {
            let n = start / BLOCK + i;
            let expected = self
                .blocks
                .get(n)
                .ok_or(DigestError::PastEnd { block: n })?;
            let found = hex::encode(Sha256::digest(block));
            if &found != expected {
                let from = n * BLOCK;
                return Err(DigestError::Mismatch {
                    block: n,
                    from,
                    to: from + block.len(),
                    recorded: expected.clone(),
                    read: found,
                });
            }
        }
        Ok(())
    }
}

/// Why bytes read back do not match what was stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DigestError {
    /// The bytes run past the last recorded block.
    #[error("block {block} is past the recorded end")]
    PastEnd {
        /// The block's index.
        block: usize,
    },
    /// A block's digest differs from the recorded one.
    #[error(
        "block {block} (bytes {from}..{to}) fails its digest check: recorded sha256:{recorded}, read sha256:{read}"
    )]
    Mismatch {
        /// The block's index.
        block: usize,
        /// Its first byte.
        from: usize,
        /// The byte after its last.
        to: usize,
        /// The digest recorded when it was stored.
        recorded: String,
        /// The digest of what was read.
        read: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_cover_ranges_and_catch_changed_bytes() {
        let text = vec![b'a'; BLOCK * 2 + 10];
        let (record, _) = super::super::describe(None, "", false, 4);
        let mut record = record;
        record.size = text.len();
        let stored = StoredRecord::new(record, &text);
        assert_eq!(stored.blocks.len(), 3);
        assert_eq!(stored.covering(5..10), 0..BLOCK);
        assert_eq!(stored.covering(BLOCK + 1..BLOCK * 2 + 3), BLOCK..text.len());
        assert!(stored.check(BLOCK, &text[BLOCK..]).is_ok());
        let mut changed = text[BLOCK..BLOCK * 2].to_vec();
        changed[7] = b'b';
        let error = stored.check(BLOCK, &changed).unwrap_err().to_string();
        assert!(error.contains("block 1"), "{error}");
    }
}
