//! The default results backend: the `outputs/` folder of the data directory. Outputs up
//! to [`SMALL_MAX`] bytes are rows of its database ([`super::small`]); larger ones are
//! files, one folder per service, reached only through a `cap_std` directory handle: a
//! batch of texts is written to temporary files, made durable with one `syncfs` (Linux;
//! one `fsync` per file elsewhere), renamed into place, and then each record is written.
//! Reads look in the database first, then for files (where every output was kept before
//! the database, and still is when it is opened without one).

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::ops::Range;

use cap_std::fs::Dir;

use super::backend::{Backend, Item};
use super::small::{SMALL_MAX, SmallStore};

/// A column of the small-outputs database ([`SmallStore::record`], [`SmallStore::text`]).
type Column = fn(&SmallStore, &str, &str) -> std::io::Result<Option<Vec<u8>>>;

/// The `outputs/` folder.
pub(crate) struct LocalBackend {
    dir: Dir,
    small: Option<SmallStore>,
}

impl LocalBackend {
    /// Keeps outputs in `dir`, the small ones in `small` when given.
    pub fn new(dir: Dir, small: Option<SmallStore>) -> LocalBackend {
        LocalBackend { dir, small }
    }

    fn open(
        &self,
        dir_name: &str,
        id: &str,
        extension: &str,
    ) -> std::io::Result<cap_std::fs::File> {
        self.dir
            .open_dir(dir_name)
            .and_then(|dir| dir.open(format!("{id}.{extension}")))
    }

    /// The whole of one of an output's files.
    fn read_whole(&self, dir_name: &str, id: &str, extension: &str) -> std::io::Result<Vec<u8>> {
        let mut bytes = Vec::new();
        self.open(dir_name, id, extension)?
            .read_to_end(&mut bytes)?;
        Ok(bytes)
    }

    /// The whole of one column of an output: its row's, or else its file's (`<id>.<extension>`).
    fn whole(
        &self,
        dir_name: &str,
        id: &str,
        column: Column,
        extension: &str,
    ) -> std::io::Result<Vec<u8>> {
        self.row_or_file(dir_name, id, column, std::convert::identity, || {
            self.read_whole(dir_name, id, extension)
        })
    }

    /// Keeps a batch: rows in one transaction (synced now, or at the next
    /// [`Backend::sync`] when `synced` is false), files written, synced and renamed.
    fn put(&self, items: &[Item<'_>], synced: bool) -> Vec<std::io::Result<()>> {
        let Some(small) = &self.small else {
            return write_batch(&self.dir, &items.iter().collect::<Vec<_>>());
        };
        let (rows, files): (Vec<&Item<'_>>, Vec<&Item<'_>>) =
            items.iter().partition(|item| item.text.len() <= SMALL_MAX);
        let mut in_files = write_batch(&self.dir, &files).into_iter();
        let in_rows = if rows.is_empty() {
            Ok(())
        } else {
            small.put(&rows, synced)
        };
        items
            .iter()
            .map(|item| {
                if item.text.len() <= SMALL_MAX {
                    in_rows.as_ref().map_err(copy_error).copied()
                } else {
                    in_files.next().expect("one outcome per file")
                }
            })
            .collect()
    }

    /// One column of an output: from its database row (through `row`), or else from its
    /// files. A database error does not hide outputs kept as files; when there is no
    /// file either, the database's error is reported, not a bare "not found".
    fn row_or_file(
        &self,
        dir_name: &str,
        id: &str,
        column: Column,
        row: impl FnOnce(Vec<u8>) -> Vec<u8>,
        file: impl FnOnce() -> std::io::Result<Vec<u8>>,
    ) -> std::io::Result<Vec<u8>> {
        let database_error = match self.small.as_ref().map(|small| column(small, dir_name, id)) {
            Some(Ok(Some(bytes))) => return Ok(row(bytes)),
            Some(Err(e)) => Some(e),
            Some(Ok(None)) | None => None,
        };
        match (file(), database_error) {
            (Err(e), Some(database)) if e.kind() == std::io::ErrorKind::NotFound => Err(database),
            (outcome, _) => outcome,
        }
    }
}

/// A copy of `e` (same kind and message), for outcomes shared by several items.
fn copy_error(e: &std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), e.to_string())
}

impl Backend for LocalBackend {
    fn put_batch(&self, items: &[Item<'_>]) -> Vec<std::io::Result<()>> {
        self.put(items, true)
    }

    /// Rows are committed without a sync (files are synced as always: they are large,
    /// and their rename must not come before their data).
    fn put_batch_unsynced(&self, items: &[Item<'_>]) -> Vec<std::io::Result<()>> {
        self.put(items, false)
    }

    fn sync(&self) -> std::io::Result<()> {
        self.small.as_ref().map_or(Ok(()), SmallStore::sync)
    }

    fn defers_sync(&self) -> bool {
        self.small.is_some()
    }

    fn record(&self, dir_name: &str, id: &str) -> std::io::Result<Vec<u8>> {
        self.whole(dir_name, id, SmallStore::record, "json")
    }

    fn text_range(&self, dir_name: &str, id: &str, range: Range<u64>) -> std::io::Result<Vec<u8>> {
        let cut = |text: Vec<u8>| {
            let len = text.len() as u64;
            let (start, end) = (range.start.min(len), range.end.min(len));
            text[start as usize..end.max(start) as usize].to_vec()
        };
        self.row_or_file(dir_name, id, SmallStore::text, cut, || {
            let mut file = self.open(dir_name, id, "txt")?;
            let mut bytes = Vec::new();
            file.seek(SeekFrom::Start(range.start))?;
            file.take(range.end.saturating_sub(range.start))
                .read_to_end(&mut bytes)?;
            Ok(bytes)
        })
    }

    fn text(&self, dir_name: &str, id: &str) -> std::io::Result<Vec<u8>> {
        self.whole(dir_name, id, SmallStore::text, "txt")
    }

    fn list(&self) -> std::io::Result<Vec<(String, String)>> {
        let mut found = match &self.small {
            Some(small) => small.list()?,
            None => Vec::new(),
        };
        for folder in self.dir.entries()? {
            let folder = folder?;
            if !folder.file_type()?.is_dir() {
                continue;
            }
            let Ok(dir_name) = folder.file_name().into_string() else {
                continue;
            };
            for file in folder.open_dir()?.entries()? {
                let name = file?.file_name();
                if let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".json")) {
                    found.push((dir_name.clone(), id.to_string()));
                }
            }
        }
        Ok(found)
    }

    fn describe(&self) -> String {
        "the data directory's outputs folder".into()
    }

    fn shared(&self) -> bool {
        false
    }

    fn reachable(&self) -> std::io::Result<()> {
        self.dir.dir_metadata().map(|_| ())
    }
}

/// Writes a batch durably: every text to a temporary file, one sync for them all, then
/// each renamed into place and its record written (a record always names a text that
/// is on disk). One outcome per job.
fn write_batch(outputs: &Dir, jobs: &[&Item<'_>]) -> Vec<std::io::Result<()>> {
    // Each service's folder is made and opened once per batch, not once per result.
    let mut dirs: HashMap<&str, std::io::Result<Dir>> = HashMap::new();
    for job in jobs {
        dirs.entry(job.dir_name)
            .or_insert_with(|| open_service_dir(outputs, job.dir_name));
    }
    let staged: Vec<std::io::Result<(&Dir, cap_std::fs::File)>> = jobs
        .iter()
        .map(|job| {
            let dir = dirs[job.dir_name].as_ref().map_err(copy_error)?;
            let mut file = dir.create(format!("{}.tmp", job.id))?;
            file.write_all(job.text)?;
            Ok((dir, file))
        })
        .collect();
    // One `syncfs` for two or more files (one `fsync` is cheaper for a single file).
    // It needs a descriptor opened for I/O: the `outputs` directory handle is `O_PATH`
    // (cap-std), on which it fails, so it is given a file just written (all the batch's
    // files are on that filesystem).
    let mut written = staged.iter().flatten().map(|(_, file)| file);
    let synced_all = match (written.next(), written.next()) {
        (Some(first), Some(_)) => sync_filesystem(first),
        _ => false,
    };
    jobs.iter()
        .zip(staged)
        .map(|(job, staged)| {
            let (dir, file) = staged?;
            if !synced_all {
                file.sync_all()?;
            }
            drop(file);
            place(dir, job.id, &job.record)
        })
        .collect()
}

/// `syncfs` on the filesystem holding `file`: every file written so far reaches the
/// disk. `false` when it is not available (then each file is synced on its own).
#[cfg(target_os = "linux")]
fn sync_filesystem(file: &cap_std::fs::File) -> bool {
    match nix::unistd::syncfs(file) {
        Ok(()) => true,
        Err(e) => {
            // Once: when it fails, it fails for every batch.
            static WARNED: std::sync::Once = std::sync::Once::new();
            WARNED.call_once(|| {
                tracing::warn!("syncfs failed ({e}); syncing each result file instead (slower)")
            });
            false
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn sync_filesystem(_file: &cap_std::fs::File) -> bool {
    false
}

fn open_service_dir(outputs: &Dir, dir_name: &str) -> std::io::Result<Dir> {
    outputs.create_dir_all(dir_name)?;
    outputs.open_dir(dir_name)
}

/// Renames a synced `<id>.tmp` into `<id>.txt` and writes its record.
fn place(dir: &Dir, id: &str, record: &[u8]) -> std::io::Result<()> {
    dir.rename(format!("{id}.tmp"), dir, format!("{id}.txt"))?;
    dir.write(format!("{id}.json"), record)
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// A batch is made durable by one `syncfs`, which must work on the descriptor it is
    /// given: when it failed (it was given cap-std's `O_PATH` directory handle), every
    /// result was `fsync`ed on its own, and the writer fell so far behind that callers
    /// waited for its budget.
    #[test]
    fn one_sync_serves_a_batch() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority()).unwrap();
        let mut file = dir.create("a.tmp").unwrap();
        file.write_all(b"text").unwrap();
        assert!(sync_filesystem(&file), "syncfs failed on a written file");
    }

    /// Outputs kept as files before the small-outputs database existed are still read,
    /// and a large output is a file beside the database's rows.
    #[test]
    fn files_from_before_the_database_are_still_read() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority()).unwrap();
        let item = |id: &'static str, text: &'static [u8]| Item {
            dir_name: "svc",
            id,
            text,
            record: format!("{{\"id\":\"{id}\"}}").into_bytes(),
        };
        let before = LocalBackend::new(dir.try_clone().unwrap(), None);
        assert!(
            before
                .put_batch(&[item("old", b"kept as files")])
                .remove(0)
                .is_ok()
        );
        let small = SmallStore::open(&tmp.path().join("small.sqlite3")).unwrap();
        let now = LocalBackend::new(dir.try_clone().unwrap(), Some(small));
        let large: &'static [u8] = Vec::leak(vec![b'x'; SMALL_MAX + 1]);
        let outcomes = now.put_batch(&[item("new", b"a row"), item("big", large)]);
        assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
        assert_eq!(now.text("svc", "old").unwrap(), b"kept as files");
        assert_eq!(now.text_range("svc", "old", 5..8).unwrap(), b"as ");
        assert_eq!(now.text_range("svc", "new", 2..99).unwrap(), b"row");
        assert_eq!(now.record("svc", "new").unwrap(), b"{\"id\":\"new\"}");
        assert_eq!(now.text("svc", "big").unwrap().len(), SMALL_MAX + 1);
        assert!(dir.exists("svc/big.txt") && !dir.exists("svc/new.txt"));
        let missing = now.record("svc", "gone").unwrap_err();
        assert_eq!(missing.kind(), std::io::ErrorKind::NotFound);
    }
}
