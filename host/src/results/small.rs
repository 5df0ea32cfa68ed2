//! Small outputs in one SQLite database (`outputs/small.sqlite3`), for the local backend.
//!
//! Kept as two files each, a 16-byte output cost the writer two inodes, two directory
//! entries and a rename — about a hundred microseconds of CPU per call on a 2-core
//! machine, taken from the calls themselves. Outputs up to [`SMALL_MAX`] bytes are
//! instead rows of one table: a batch is one transaction, made durable by one sync of
//! the write-ahead log. Record and text are one row, so neither is ever seen without the
//! other. Larger outputs stay files, which page without reading the whole text.

use std::path::Path;
use std::sync::Mutex;

use rusqlite::{Connection, OptionalExtension, params};

use super::backend::Item;

/// The largest text kept in the database; larger ones are files.
pub const SMALL_MAX: usize = 64 << 10;
/// The database file, inside `outputs/`.
pub const SMALL_DB: &str = "small.sqlite3";

/// The small-outputs database: one connection writes (the retention writer), one reads.
pub(crate) struct SmallStore {
    writer: Mutex<Connection>,
    reader: Mutex<Connection>,
}

fn io(e: rusqlite::Error) -> std::io::Error {
    std::io::Error::other(format!("the small-outputs database: {e}"))
}

fn connect(path: &Path) -> std::io::Result<Connection> {
    let opened = crate::storage::open_sqlite(path).and_then(|db| {
        // Every commit syncs the log: a batch is durable when its transaction returns.
        db.pragma_update(None, "synchronous", "FULL")?;
        Ok(db)
    });
    opened.map_err(|e| {
        std::io::Error::other(format!(
            "cannot open the small-outputs database {}: {e}",
            path.display()
        ))
    })
}

impl SmallStore {
    /// Opens (creating) the database at `path`.
    pub fn open(path: &Path) -> std::io::Result<SmallStore> {
        let writer = connect(path)?;
        writer
            .execute_batch(
                "CREATE TABLE IF NOT EXISTS outputs (
                    dir TEXT NOT NULL,
                    id TEXT NOT NULL,
                    record BLOB NOT NULL,
                    text BLOB NOT NULL,
                    PRIMARY KEY (dir, id)
                )",
            )
            .map_err(io)?;
        let reader = connect(path)?;
        Ok(SmallStore {
            writer: Mutex::new(writer),
            reader: Mutex::new(reader),
        })
    }

    /// Keeps `items` (each at most [`SMALL_MAX`] bytes) in one transaction.
    pub fn put(&self, items: &[&Item<'_>]) -> std::io::Result<()> {
        let mut db = self.writer.lock().expect("small outputs writer poisoned");
        let tx = db.transaction().map_err(io)?;
        {
            let mut insert = tx
                .prepare_cached(
                    "INSERT OR REPLACE INTO outputs (dir, id, record, text) VALUES (?1, ?2, ?3, ?4)",
                )
                .map_err(io)?;
            for item in items {
                insert
                    .execute(params![item.dir_name, item.id, item.record, item.text])
                    .map_err(io)?;
            }
        }
        tx.commit().map_err(io)
    }

    /// The record of an output, if it is here.
    pub fn record(&self, dir_name: &str, id: &str) -> std::io::Result<Option<Vec<u8>>> {
        self.column("record", dir_name, id)
    }

    /// The text of an output, if it is here.
    pub fn text(&self, dir_name: &str, id: &str) -> std::io::Result<Option<Vec<u8>>> {
        self.column("text", dir_name, id)
    }

    fn column(&self, column: &str, dir_name: &str, id: &str) -> std::io::Result<Option<Vec<u8>>> {
        let db = self.reader.lock().expect("small outputs reader poisoned");
        db.prepare_cached(&format!(
            "SELECT {column} FROM outputs WHERE dir = ?1 AND id = ?2"
        ))
        .and_then(|mut select| {
            select
                .query_row(params![dir_name, id], |row| row.get(0))
                .optional()
        })
        .map_err(io)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_is_read_back_by_another_connection() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join(SMALL_DB);
        let store = SmallStore::open(&path).unwrap();
        let items: Vec<Item<'_>> = (0..3)
            .map(|i| Item {
                dir_name: "svc",
                id: ["a", "b", "c"][i],
                text: b"hello",
                record: format!("{{\"n\":{i}}}").into_bytes(),
            })
            .collect();
        store.put(&items.iter().collect::<Vec<_>>()).unwrap();
        // Another process's view: a fresh connection.
        let other = SmallStore::open(&path).unwrap();
        assert_eq!(other.text("svc", "b").unwrap().unwrap(), b"hello");
        assert_eq!(other.record("svc", "c").unwrap().unwrap(), b"{\"n\":2}");
        assert!(other.record("svc", "d").unwrap().is_none());
        assert!(other.record("other", "a").unwrap().is_none());
    }
}
