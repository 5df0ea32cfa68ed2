//! Small outputs in one SQLite database (`outputs/small.sqlite3`), for the local backend.
//!
//! Kept as two files each, a 16-byte output cost the writer two inodes, two directory
//! entries and a rename — about a hundred microseconds of CPU per call on a 2-core
//! machine, taken from the calls themselves. Outputs up to [`SMALL_MAX`] bytes are
//! instead rows of one table: a batch is one transaction, and [`SmallStore::sync`]
//! makes every transaction since the last one durable with one sync of the
//! write-ahead log. Record and text are one row, so neither is ever seen without the
//! other. Larger outputs stay files, which page without reading the whole text.
//!
//! Output ids are time-ordered (UUID v7), so new keys go to the end of each service's
//! range in the `(dir, id)` index: a batch rewrites a page or two of it, not one page
//! per row.

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
    writer: Mutex<Writing>,
    reader: Mutex<Connection>,
}

/// The writing connection and what it has committed without a sync.
struct Writing {
    db: Connection,
    /// The connection's `synchronous` setting is `FULL` (else `NORMAL`).
    full: bool,
    /// Transactions were committed since the last sync.
    unsynced: bool,
}

impl Writing {
    /// Sets `synchronous`: `FULL` syncs the write-ahead log at each commit (which makes
    /// every earlier commit durable too); `NORMAL` leaves commits written, not synced.
    fn synchronous(&mut self, full: bool) -> rusqlite::Result<()> {
        if self.full != full {
            let mode = if full { "FULL" } else { "NORMAL" };
            self.db.pragma_update(None, "synchronous", mode)?;
            self.full = full;
        }
        Ok(())
    }
}

fn io(e: rusqlite::Error) -> std::io::Error {
    std::io::Error::other(format!("the small-outputs database: {e}"))
}

fn connect(path: &Path) -> std::io::Result<Connection> {
    let opened = crate::storage::open_sqlite(path).and_then(|db| {
        // A commit syncs the log unless the writer says otherwise (see `Writing`).
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
                );
                CREATE TABLE IF NOT EXISTS synced (
                    id INTEGER PRIMARY KEY CHECK (id = 0),
                    at_ms INTEGER NOT NULL
                )",
            )
            .map_err(io)?;
        let reader = connect(path)?;
        Ok(SmallStore {
            writer: Mutex::new(Writing {
                db: writer,
                full: true,
                unsynced: false,
            }),
            reader: Mutex::new(reader),
        })
    }

    /// Keeps `items` (each at most [`SMALL_MAX`] bytes) in one transaction: durable when
    /// this returns if `synced`, else written (safe from a crash of this process) and
    /// made durable by the next [`SmallStore::sync`].
    pub fn put(&self, items: &[&Item<'_>], synced: bool) -> std::io::Result<()> {
        let mut writing = self.writer.lock().expect("small outputs writer poisoned");
        writing.synchronous(synced).map_err(io)?;
        let tx = writing.db.transaction().map_err(io)?;
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
        tx.commit().map_err(io)?;
        // A synced commit syncs the log, with every commit before it.
        writing.unsynced = !synced;
        Ok(())
    }

    /// Makes every transaction committed so far durable: one small commit with the log
    /// synced (which syncs the commits before it too). Nothing to do when there are none.
    pub fn sync(&self) -> std::io::Result<()> {
        let mut writing = self.writer.lock().expect("small outputs writer poisoned");
        if !writing.unsynced {
            return Ok(());
        }
        writing.synchronous(true).map_err(io)?;
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        writing
            .db
            .execute(
                "INSERT OR REPLACE INTO synced (id, at_ms) VALUES (0, ?1)",
                params![now_ms],
            )
            .map_err(io)?;
        writing.unsynced = false;
        Ok(())
    }

    /// When the last [`SmallStore::sync`] ran (milliseconds since the epoch), if ever.
    #[cfg(test)]
    pub fn last_sync_ms(&self) -> std::io::Result<Option<i64>> {
        let db = self.reader.lock().expect("small outputs reader poisoned");
        db.query_row("SELECT at_ms FROM synced WHERE id = 0", [], |row| {
            row.get(0)
        })
        .optional()
        .map_err(io)
    }

    /// Every output row, as (service folder, id).
    pub fn list(&self) -> std::io::Result<Vec<(String, String)>> {
        let reader = self.reader.lock().expect("small outputs reader poisoned");
        let mut statement = reader.prepare("SELECT dir, id FROM outputs").map_err(io)?;
        statement
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
            .map_err(io)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(io)
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
        store.put(&items.iter().collect::<Vec<_>>(), true).unwrap();
        // Another process's view: a fresh connection.
        let other = SmallStore::open(&path).unwrap();
        assert_eq!(other.text("svc", "b").unwrap().unwrap(), b"hello");
        assert_eq!(other.record("svc", "c").unwrap().unwrap(), b"{\"n\":2}");
        assert!(other.record("svc", "d").unwrap().is_none());
        assert!(other.record("other", "a").unwrap().is_none());
    }

    /// A batch committed without a sync is readable at once by another connection (the
    /// retention writer's batches are, between syncs); `sync` then commits once with
    /// the log synced, and only when something was committed unsynced since.
    #[test]
    fn unsynced_batches_are_readable_and_sync_settles_them_once() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join(SMALL_DB);
        let store = SmallStore::open(&path).unwrap();
        store.sync().unwrap();
        assert_eq!(store.last_sync_ms().unwrap(), None, "nothing to sync yet");
        let item = |id| Item {
            dir_name: "svc",
            id,
            text: b"unsynced",
            record: b"{}".to_vec(),
        };
        let (a, b) = (item("a"), item("b"));
        store.put(&[&a], false).unwrap();
        store.put(&[&b], false).unwrap();
        let other = SmallStore::open(&path).unwrap();
        assert_eq!(other.text("svc", "a").unwrap().unwrap(), b"unsynced");
        assert_eq!(other.text("svc", "b").unwrap().unwrap(), b"unsynced");
        store.sync().unwrap();
        let first = store.last_sync_ms().unwrap().expect("a sync was committed");
        std::thread::sleep(std::time::Duration::from_millis(5));
        store.sync().unwrap();
        assert_eq!(
            store.last_sync_ms().unwrap(),
            Some(first),
            "a second sync with nothing new commits nothing"
        );
        // A synced batch leaves nothing for the next sync.
        let c = item("c");
        store.put(&[&c], true).unwrap();
        store.sync().unwrap();
        assert_eq!(store.last_sync_ms().unwrap(), Some(first));
    }
}
