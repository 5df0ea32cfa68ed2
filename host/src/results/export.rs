//! Saving a retained output outside Airlock ("save as artifact"): one file, or ordered
//! parts cut on character boundaries with an index that lists their order, sizes and
//! digests. At most [`MAX_EXPORT_PARTS`] parts; a larger export is refused before
//! anything is written. Files are created new: nothing already in the folder is
//! overwritten.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{ReadError, ResultStore, cut_at_char_boundary};
use crate::digest::sha256;

/// Most parts one export may have.
pub const MAX_EXPORT_PARTS: usize = 512;

/// One file of an export.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ExportedPart {
    /// Its position (1-based).
    pub index: usize,
    /// The file's name inside the folder.
    pub file: String,
    /// Its size in bytes.
    pub size: usize,
    /// `sha256:` of its bytes.
    pub digest: String,
}

/// What an export wrote.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Export {
    /// The service whose output it is.
    pub service: String,
    /// The output id.
    pub output_id: String,
    /// The whole output's size.
    pub size: usize,
    /// `sha256:` of the whole output (the parts joined in order).
    pub digest: String,
    /// The files, in order (one when no part size was asked for, or it all fits).
    pub parts: Vec<ExportedPart>,
    /// The index file listing the parts, when there is more than one.
    pub index: Option<PathBuf>,
}

/// Why an export failed; nothing was written when one is returned, except for
/// [`ExportError::Write`] (the files written so far are named in the message).
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The output could not be read.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The part size is zero.
    #[error("the part size must be at least 1 byte")]
    PartSize,
    /// The output would need more parts than allowed.
    #[error(
        "output \"{output_id}\" ({size} bytes) would need {parts} parts of at most {part_size} bytes; the limit is {MAX_EXPORT_PARTS} parts: choose a part size of at least {minimum} bytes"
    )]
    TooManyParts {
        /// The output id.
        output_id: String,
        /// Its size.
        size: usize,
        /// The part size asked for.
        part_size: usize,
        /// The parts it would take.
        parts: usize,
        /// The smallest part size that fits.
        minimum: usize,
    },
    /// A file could not be written.
    #[error("cannot write \"{path}\": {message}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The OS error.
        message: String,
    },
}

/// `text` cut into pieces of at most `part_size` bytes on character boundaries.
fn cut_parts(text: &str, part_size: usize) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let mut piece = cut_at_char_boundary(rest, part_size);
        if piece.is_empty() {
            // A part smaller than one character still carries that character.
            let ch = rest.chars().next().expect("rest is not empty");
            piece = &rest[..ch.len_utf8()];
        }
        parts.push(piece);
        rest = &rest[piece.len()..];
    }
    if parts.is_empty() {
        parts.push("");
    }
    parts
}

fn write_new(path: &Path, bytes: &[u8]) -> Result<(), ExportError> {
    let err = |e: std::io::Error| ExportError::Write {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(err)?;
    file.write_all(bytes).map_err(err)?;
    file.sync_all().map_err(err)
}

impl ResultStore {
    /// Writes the output `output_id` of `service` (owned by `agent`) into `folder`: as
    /// `<output_id>.txt`, or, with `part_size`, as `<output_id>.part-NNNN.txt` files and
    /// `<output_id>.index.json`.
    pub fn export_for(
        &self,
        agent: &str,
        service: &str,
        output_id: &str,
        folder: &Path,
        part_size: Option<usize>,
    ) -> Result<Export, ExportError> {
        let text = self.full_text_for(agent, service, output_id)?;
        let part_size = match part_size {
            Some(0) => return Err(ExportError::PartSize),
            Some(n) => n,
            None => text.len().max(1),
        };
        let pieces = cut_parts(&text, part_size);
        if pieces.len() > MAX_EXPORT_PARTS {
            return Err(ExportError::TooManyParts {
                output_id: output_id.into(),
                size: text.len(),
                part_size,
                parts: pieces.len(),
                minimum: text.len().div_ceil(MAX_EXPORT_PARTS),
            });
        }
        std::fs::create_dir_all(folder).map_err(|e| ExportError::Write {
            path: folder.to_path_buf(),
            message: e.to_string(),
        })?;
        let mut parts = Vec::with_capacity(pieces.len());
        let single = pieces.len() == 1;
        for (i, piece) in pieces.iter().enumerate() {
            let file = if single {
                format!("{output_id}.txt")
            } else {
                format!("{output_id}.part-{:04}.txt", i + 1)
            };
            write_new(&folder.join(&file), piece.as_bytes())?;
            parts.push(ExportedPart {
                index: i + 1,
                file,
                size: piece.len(),
                digest: sha256(piece.as_bytes()),
            });
        }
        let mut export = Export {
            service: service.to_string(),
            output_id: output_id.to_string(),
            size: text.len(),
            digest: sha256(text.as_bytes()),
            parts,
            index: None,
        };
        if !single {
            let path = folder.join(format!("{output_id}.index.json"));
            let body = serde_json::to_vec_pretty(&export).expect("an export serializes");
            write_new(&path, &body)?;
            export.index = Some(path);
        }
        Ok(export)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_cut_on_character_boundaries_and_rejoin() {
        let text = "aé✓".repeat(10);
        for size in 1..8 {
            let parts = cut_parts(&text, size);
            assert_eq!(parts.concat(), text);
            assert!(parts.iter().all(|p| p.len() <= size.max(3)));
        }
        assert_eq!(cut_parts("", 4), vec![""]);
    }
}
