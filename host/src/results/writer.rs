//! The retention writer: results are made durable off the caller's path. A call hands
//! its redacted text to [`Writer::submit`] and returns at once; a dedicated thread
//! hands the texts that arrived meanwhile to the store's [`Backend`] as one batch
//! (each text before its record), syncs the batches written within [`SYNC_EVERY`]
//! together, then reports them to the [`ResultIndex`]. Until a text is written, reads
//! are served from memory, so an `output_id` is readable the moment it is handed out.
//!
//! Memory is bounded: texts waiting for the disk hold a share of a byte budget, and a
//! caller whose text does not fit waits (asynchronously) for earlier writes to finish.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};

use super::Retained;
use super::backend::{Backend, Item, StoredRecord};

/// Bytes that may wait for the disk at once: two results at the default 32 MiB
/// retention limit. Past it, callers wait for the disk rather than grow the heap.
const PENDING_BUDGET: usize = 64 << 20;
/// The budget is counted in units of this many bytes.
const PERMIT_BYTES: usize = 1 << 10;
/// What one waiting result holds besides its text (its record, ids, queue and map
/// entries), counted against the budget: a stream of small results is bounded by count
/// as well as by size (at most 32,768 results of a few bytes wait at once).
const PER_RESULT_BYTES: usize = 1 << 10;

/// The budget units a text of `len` bytes holds while it waits for the disk.
fn budget_units(len: usize) -> u32 {
    len.saturating_add(PER_RESULT_BYTES)
        .div_ceil(PERMIT_BYTES)
        .min(PENDING_BUDGET / PERMIT_BYTES) as u32
}
/// Failed writes remembered, so a read of one says why it is missing.
const FAILED_KEPT: usize = 1024;

/// Where durable results are reported (the registry's index, in the full host).
pub trait ResultIndex: Send + Sync {
    /// Records a batch of results that are now on disk, with their service names.
    fn index(&self, batch: &[(String, Retained)]);
}

/// A text waiting for the disk, as readers see it meanwhile.
pub(super) struct Pending {
    pub record: Retained,
    pub text: Arc<String>,
}

/// One write for the writer thread.
struct Job {
    dir_name: String,
    id: String,
    service: String,
    record: Retained,
    text: Arc<String>,
    _budget: OwnedSemaphorePermit,
    /// Told once the result is kept (or failed), when the caller waits for it.
    kept: Option<oneshot::Sender<()>>,
}

/// What the writer thread is sent. A job travels by value: boxing it would cost an
/// allocation per kept output for a channel slot that is freed at once.
#[allow(clippy::large_enum_variant)]
enum Message {
    Write(Job),
    /// Answered once every job sent before it is on disk.
    Flush(oneshot::Sender<()>),
}

/// The state shared by callers, readers and the writer thread.
#[derive(Default)]
pub(super) struct Shared {
    /// Texts not yet on disk, by output id.
    pub pending: Mutex<HashMap<String, Arc<Pending>>>,
    /// Outputs whose write failed, by id, with the reason.
    pub failed: Mutex<HashMap<String, String>>,
}

/// The handle callers use; dropping it lets the thread finish what it holds and exit.
pub(super) struct Writer {
    sender: mpsc::Sender<Message>,
    budget: Arc<Semaphore>,
    pub shared: Arc<Shared>,
}

impl Writer {
    /// Starts the writer thread over `backend`.
    pub fn start(
        backend: Arc<dyn Backend>,
        index: Option<Arc<dyn ResultIndex>>,
    ) -> std::io::Result<Writer> {
        let (sender, receiver) = mpsc::channel();
        let shared = Arc::new(Shared::default());
        let thread_shared = shared.clone();
        std::thread::Builder::new()
            .name("airlock-retain".into())
            .spawn(move || run(backend, receiver, thread_shared, index))?;
        Ok(Writer {
            sender,
            budget: Arc::new(Semaphore::new(PENDING_BUDGET / PERMIT_BYTES)),
            shared,
        })
    }

    /// Queues `text` to be kept as output `id` of `service`; readable at once here.
    /// Waits when the texts already waiting for the disk fill the budget, and, with
    /// `until_kept`, until this one is kept (readable from every host sharing the
    /// store).
    pub async fn submit(
        &self,
        dir_name: String,
        service: &str,
        id: String,
        record: Retained,
        text: Arc<String>,
        until_kept: bool,
    ) {
        let budget = self
            .budget
            .clone()
            .acquire_many_owned(budget_units(text.len()))
            .await
            .expect("the retention budget is never closed");
        {
            let mut pending = self.shared.pending.lock().expect("pending lock poisoned");
            pending.insert(
                id.clone(),
                Arc::new(Pending {
                    record: record.clone(),
                    text: text.clone(),
                }),
            );
            metrics::gauge!(crate::telemetry::RETENTION_QUEUE).set(pending.len() as f64);
        }
        let job = Job {
            dir_name,
            id: id.clone(),
            service: service.to_string(),
            record,
            text,
            _budget: budget,
            kept: None,
        };
        let (kept, wait) = oneshot::channel();
        let mut job = job;
        if until_kept {
            job.kept = Some(kept);
        }
        if self.sender.send(Message::Write(job)).is_err() {
            // The thread is gone (it only exits when this handle drops): keep the text
            // readable from memory and say so.
            tracing::error!(output_id = %id, "the retention writer has stopped; the result is kept in memory only");
        } else if until_kept {
            let _ = wait.await;
        }
    }

    /// Waits until every result submitted so far is on disk.
    pub async fn flush(&self) {
        let (done, wait) = oneshot::channel();
        if self.sender.send(Message::Flush(done)).is_ok() {
            let _ = wait.await;
        }
    }
}

/// Hands a batch to the backend, each record with its block digests, to be made durable
/// at the next [`Backend::sync`]. One outcome per job.
fn write_batch(backend: &dyn Backend, jobs: &[Job]) -> Vec<std::io::Result<()>> {
    let items: Vec<std::io::Result<Item<'_>>> = jobs
        .iter()
        .map(|job| {
            let stored = StoredRecord::new(job.record.clone(), job.text.as_bytes());
            Ok(Item {
                dir_name: &job.dir_name,
                id: &job.id,
                text: job.text.as_bytes(),
                record: serde_json::to_vec(&stored).map_err(std::io::Error::other)?,
            })
        })
        .collect();
    if items.iter().all(Result::is_ok) {
        return backend.put_batch_unsynced(&items.into_iter().flatten().collect::<Vec<_>>());
    }
    items
        .into_iter()
        .map(|item| item.map(|item| backend.put_batch_unsynced(&[item]).remove(0))?)
        .collect()
}

/// Most results one batch writes.
const BATCH_MAX: usize = 256;
/// How long a batch, once it has taken every write queued, waits once for more before it
/// is written: a stream of calls then shares one transaction and one wake-up of this
/// thread. Readers are served from memory meanwhile; a batch with a flush in it does
/// not wait.
const LINGER: Duration = Duration::from_millis(2);
/// How long a written batch may wait for its sync (group commit). A sync costs the
/// same for one result as for a thousand, and on a small machine its CPU comes from
/// the calls themselves: syncing every batch made a stream of 16-byte calls about a
/// quarter slower end to end. A written batch already survives a crash of this process
/// (it is in the operating system's hands); only a power loss or an operating-system
/// crash within this window can lose it. A caller that needs more calls
/// [`Writer::flush`]: it syncs at once. A backend with nothing to defer (S3, durable
/// once written) is settled after every batch.
const SYNC_EVERY: Duration = Duration::from_millis(50);

/// Written results not yet synced: since when, and their index entries (the index
/// names only durable results).
#[derive(Default)]
struct Unsynced {
    since: Option<Instant>,
    written: Vec<(String, Retained)>,
}

impl Unsynced {
    /// Syncs what was written and reports it to the index. A failed sync keeps them
    /// unsynced and unindexed, to be tried again a window later (and at close).
    fn settle(&mut self, backend: &dyn Backend, index: Option<&dyn ResultIndex>) {
        if self.since.take().is_none() {
            return;
        }
        if let Err(e) = backend.sync() {
            // The results stay written and readable; only their durability is in doubt.
            tracing::error!(
                "cannot sync {} retained results (they are written, not yet durable; retrying in {} ms): {e}",
                self.written.len(),
                SYNC_EVERY.as_millis()
            );
            self.since = Some(Instant::now());
            return;
        }
        let written = std::mem::take(&mut self.written);
        if let Some(index) = index
            && !written.is_empty()
        {
            index.index(&written);
        }
    }
}

/// The writer thread: drains the queue in batches of up to [`BATCH_MAX`] (waiting
/// [`LINGER`] once for more when the queue runs dry), and writes each batch in one go
/// (locally: small outputs in one database transaction; larger ones written, made
/// durable with one `syncfs` and renamed into place). Written batches are synced together, at most
/// [`SYNC_EVERY`] after the first of them, at once for a flush or a caller waiting for
/// its result to be kept, and when the store closes; then reported to the index in one
/// transaction.
fn run(
    backend: Arc<dyn Backend>,
    receiver: mpsc::Receiver<Message>,
    shared: Arc<Shared>,
    index: Option<Arc<dyn ResultIndex>>,
) {
    let index = index.as_deref();
    let mut unsynced = Unsynced::default();
    loop {
        // Wait for the next message, or until the unsynced batches are due.
        let received = match unsynced.since {
            None => receiver
                .recv()
                .map_err(|_| mpsc::RecvTimeoutError::Disconnected),
            Some(since) => receiver
                .recv_timeout((since + SYNC_EVERY).saturating_duration_since(Instant::now())),
        };
        let first = match received {
            Ok(message) => message,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                unsynced.settle(backend.as_ref(), index);
                continue;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        let mut next = Some(first);
        let mut jobs = Vec::new();
        let mut flushes = Vec::new();
        let mut lingered = false;
        while let Some(message) = next.take() {
            match message {
                Message::Write(job) => jobs.push(job),
                Message::Flush(done) => flushes.push(done),
            }
            if jobs.len() < BATCH_MAX {
                next = receiver.try_recv().ok();
                if next.is_none() && !lingered && flushes.is_empty() && !jobs.is_empty() {
                    lingered = true;
                    std::thread::sleep(LINGER);
                    next = receiver.try_recv().ok();
                }
            }
        }
        let outcomes = write_batch(backend.as_ref(), &jobs);
        if !jobs.is_empty() {
            unsynced.since.get_or_insert_with(Instant::now);
        }
        for (job, outcome) in jobs.iter().zip(outcomes) {
            match outcome {
                Ok(()) => unsynced
                    .written
                    .push((job.service.clone(), job.record.clone())),
                Err(e) => {
                    tracing::error!(output_id = %job.id, service = %job.service, "cannot retain a result: {e}");
                    let mut failed = shared.failed.lock().expect("failed lock poisoned");
                    if failed.len() >= FAILED_KEPT {
                        failed.clear();
                    }
                    failed.insert(job.id.clone(), e.to_string());
                }
            }
        }
        {
            let mut pending = shared.pending.lock().expect("pending lock poisoned");
            for job in &jobs {
                pending.remove(&job.id);
            }
            metrics::gauge!(crate::telemetry::RETENTION_QUEUE).set(pending.len() as f64);
        }
        let waited_for = !flushes.is_empty() || jobs.iter().any(|job| job.kept.is_some());
        if waited_for
            || !backend.defers_sync()
            || unsynced
                .since
                .is_some_and(|since| since.elapsed() >= SYNC_EVERY)
        {
            unsynced.settle(backend.as_ref(), index);
        }
        for job in &mut jobs {
            if let Some(kept) = job.kept.take() {
                let _ = kept.send(());
            }
        }
        for done in flushes {
            let _ = done.send(());
        }
    }
    unsynced.settle(backend.as_ref(), index);
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// An index that counts the results reported to it.
    struct Count(Mutex<usize>);

    impl ResultIndex for Count {
        fn index(&self, batch: &[(String, Retained)]) {
            *self.0.lock().unwrap() += batch.len();
        }
    }

    /// A local store in `path`, with its small-outputs database.
    fn local_store(path: &std::path::Path) -> super::super::local::LocalBackend {
        let dir = cap_std::fs::Dir::open_ambient_dir(path, cap_std::ambient_authority()).unwrap();
        let small = super::super::small::SmallStore::open(&path.join("small.sqlite3")).unwrap();
        super::super::local::LocalBackend::new(dir, Some(small))
    }

    /// How many results `index` has been told of, once it reaches `n` (or after a bound
    /// of 10 s, which only keeps a broken writer from hanging CI: this is a correctness
    /// check, not a timing one).
    fn wait_for_index(index: &Count, n: usize) -> usize {
        let deadline = Instant::now() + Duration::from_secs(10);
        while *index.0.lock().unwrap() < n && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        *index.0.lock().unwrap()
    }

    /// Submits `text` as output `id` of service `svc`, not waiting for it to be kept.
    fn submit(writer: &Writer, id: &str, text: &str) {
        let (record, _) = super::super::describe(None, text, false, 64);
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(writer.submit(
                "svc".into(),
                "svc",
                id.into(),
                record,
                Arc::new(text.to_string()),
                false,
            ));
    }

    /// The budget counts a result's bytes and a fixed share per result: small results
    /// hold little of it (a stream of them is not throttled after 1,024, as with the
    /// old 64 KiB units), and the largest result fits whole.
    #[test]
    fn the_budget_counts_bytes_and_results() {
        assert_eq!(budget_units(16), 2);
        assert_eq!(budget_units(0), 1);
        assert_eq!(budget_units(4 << 10), 5);
        let whole = (PENDING_BUDGET / PERMIT_BYTES) as u32;
        assert_eq!(budget_units(32 << 20), (32 << 10) + 1);
        assert_eq!(
            budget_units(usize::MAX / 2),
            whole,
            "never more than the whole budget"
        );
        assert_eq!(whole / budget_units(16), 32_768);
    }

    /// Every result of a stream, over two services, is durable and indexed after a
    /// flush: as rows of the small-outputs database, or (without one) as text and record
    /// files in each service's folder.
    #[test]
    fn a_stream_of_results_lands_whole() {
        const SERVICES: [&str; 2] = ["svc", "other"];
        for with_database in [true, false] {
            let tmp = tempfile::tempdir().unwrap();
            let dir = cap_std::fs::Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority())
                .unwrap();
            let small = with_database.then(|| {
                super::super::small::SmallStore::open(&tmp.path().join("small.sqlite3")).unwrap()
            });
            let index = Arc::new(Count(Mutex::new(0)));
            let backend = Arc::new(super::super::local::LocalBackend::new(
                dir.try_clone().unwrap(),
                small,
            ));
            let writer = Writer::start(backend.clone(), Some(index.clone())).unwrap();
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            rt.block_on(async {
                for i in 0..300 {
                    let service = SERVICES[i % 2];
                    let text = format!("text {i:03}");
                    let (mut record, _) = super::super::describe(None, &text, false, 64);
                    record.output_id = Some(format!("id{i}"));
                    writer
                        .submit(
                            service.into(),
                            service,
                            format!("id{i}"),
                            record,
                            Arc::new(text),
                            false,
                        )
                        .await;
                }
                writer.flush().await;
            });
            assert_eq!(*index.0.lock().unwrap(), 300);
            for i in [0, 150, 299] {
                let service = SERVICES[i % 2];
                let text = backend.text(service, &format!("id{i}")).unwrap();
                assert_eq!(text, format!("text {i:03}").as_bytes());
                let record = backend.record(service, &format!("id{i}")).unwrap();
                assert!(
                    String::from_utf8(record)
                        .unwrap()
                        .contains(&format!("id{i}"))
                );
                assert_eq!(
                    dir.exists(format!("{service}/id{i}.txt")),
                    !with_database,
                    "small outputs are rows when there is a database, files otherwise"
                );
            }
            assert!(writer.shared.pending.lock().unwrap().is_empty());
        }
    }

    /// With no flush, written results are synced and indexed by the writer itself once
    /// the sync window has passed (the idle path: no later write comes to trigger it),
    /// and the database records that sync.
    #[test]
    fn results_are_synced_and_indexed_without_a_flush() {
        let tmp = tempfile::tempdir().unwrap();
        let backend = Arc::new(local_store(tmp.path()));
        let index = Arc::new(Count(Mutex::new(0)));
        let writer = Writer::start(backend.clone(), Some(index.clone())).unwrap();
        for i in 0..3 {
            submit(&writer, &format!("id{i}"), &format!("text {i}"));
        }
        assert_eq!(wait_for_index(&index, 3), 3, "indexed without a flush");
        let reopened =
            super::super::small::SmallStore::open(&tmp.path().join("small.sqlite3")).unwrap();
        assert!(
            reopened.last_sync_ms().unwrap().is_some(),
            "the writer committed a sync"
        );
        assert_eq!(backend.text("svc", "id2").unwrap(), b"text 2");
    }

    /// A local store whose first `fail` syncs fail.
    struct FailingSync {
        inner: super::super::local::LocalBackend,
        fail: Mutex<usize>,
        syncs: Mutex<usize>,
    }

    impl Backend for FailingSync {
        fn put_batch(&self, items: &[Item<'_>]) -> Vec<std::io::Result<()>> {
            self.inner.put_batch(items)
        }
        fn put_batch_unsynced(&self, items: &[Item<'_>]) -> Vec<std::io::Result<()>> {
            self.inner.put_batch_unsynced(items)
        }
        fn sync(&self) -> std::io::Result<()> {
            *self.syncs.lock().unwrap() += 1;
            let mut fail = self.fail.lock().unwrap();
            if *fail > 0 {
                *fail -= 1;
                return Err(std::io::Error::other("the disk is full"));
            }
            self.inner.sync()
        }
        fn defers_sync(&self) -> bool {
            true
        }
        fn list(&self) -> std::io::Result<Vec<(String, String)>> {
            self.inner.list()
        }
        fn record(&self, dir_name: &str, id: &str) -> std::io::Result<Vec<u8>> {
            self.inner.record(dir_name, id)
        }
        fn text_range(
            &self,
            dir_name: &str,
            id: &str,
            range: std::ops::Range<u64>,
        ) -> std::io::Result<Vec<u8>> {
            self.inner.text_range(dir_name, id, range)
        }
        fn text(&self, dir_name: &str, id: &str) -> std::io::Result<Vec<u8>> {
            self.inner.text(dir_name, id)
        }
        fn describe(&self) -> String {
            self.inner.describe()
        }
        fn shared(&self) -> bool {
            false
        }

        fn reachable(&self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// A failed sync leaves its results unindexed (the index names only durable ones)
    /// and is tried again by the writer itself, with no further write or flush.
    #[test]
    fn a_failed_sync_is_retried_and_only_then_indexed() {
        let tmp = tempfile::tempdir().unwrap();
        let backend = Arc::new(FailingSync {
            inner: local_store(tmp.path()),
            fail: Mutex::new(2),
            syncs: Mutex::new(0),
        });
        let index = Arc::new(Count(Mutex::new(0)));
        let writer = Writer::start(backend.clone(), Some(index.clone())).unwrap();
        submit(&writer, "id0", "kept");
        wait_for_index(&index, 1);
        assert_eq!(*index.0.lock().unwrap(), 1, "indexed once a sync succeeded");
        assert_eq!(
            *backend.syncs.lock().unwrap(),
            3,
            "two failures, then success"
        );
        assert_eq!(backend.text("svc", "id0").unwrap(), b"kept");
    }
}
