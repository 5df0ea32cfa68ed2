//! The storage runtime (with the `postgres` or `s3` feature): one small tokio runtime, started on first use, on which the
//! remote storage backends (PostgreSQL for the registry, S3 for retained results) do
//! their network I/O, and [`wait`], which runs one such job for synchronous code; and
//! [`open_sqlite`], how the local SQLite databases (the registry, small outputs) open.
//!
//! The registry and the results store keep synchronous interfaces (SQLite and the local
//! folder are synchronous, and their callers already run where blocking is allowed).
//! A remote job runs on this runtime's own threads; the caller's thread only waits. On a
//! worker of a multi-threaded tokio runtime the wait is wrapped in `block_in_place`, so
//! other tasks move to another worker instead of stalling behind the network.
//!
//! Layer 0 (leaf). Imports nothing of the crate.

#[cfg(any(feature = "postgres", feature = "s3"))]
use std::future::Future;
#[cfg(any(feature = "postgres", feature = "s3"))]
use std::sync::OnceLock;

#[cfg(any(feature = "postgres", feature = "s3"))]
use tokio::runtime::{Handle, Runtime, RuntimeFlavor};

/// The runtime's worker threads: network I/O waits, it does not compute.
#[cfg(any(feature = "postgres", feature = "s3"))]
const WORKERS: usize = 2;

#[cfg(any(feature = "postgres", feature = "s3"))]
fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(WORKERS)
            .thread_name("airlock-storage")
            .enable_all()
            .build()
            .expect("the storage runtime starts (threads and an I/O driver)")
    })
}

/// The storage runtime's handle, for a backend that keeps tasks running on it (a
/// PostgreSQL connection's driver).
#[cfg(any(feature = "postgres", feature = "s3"))]
pub fn handle() -> Handle {
    runtime().handle().clone()
}

/// Runs `job` on the storage runtime and waits for its output on this thread. A panic
/// in the job is raised again here.
///
/// The output comes back over a plain channel, not a tokio `JoinHandle`: polling a
/// `JoinHandle` from a thread inside a current-thread runtime spends that runtime's
/// cooperative budget, and once it is spent the wake-up is deferred to a scheduler
/// that is blocked right here, waiting.
#[cfg(any(feature = "postgres", feature = "s3"))]
pub fn wait<F>(job: F) -> F::Output
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    use futures::FutureExt;
    let (sender, receiver) = std::sync::mpsc::sync_channel(1);
    runtime().spawn(async move {
        let outcome = std::panic::AssertUnwindSafe(job).catch_unwind().await;
        let _ = sender.send(outcome);
    });
    let receive = || receiver.recv();
    let received = match Handle::try_current() {
        Ok(current) if current.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(receive)
        }
        _ => receive(),
    };
    match received {
        Ok(Ok(output)) => output,
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(_) => panic!("the storage runtime dropped a job (it is shutting down)"),
    }
}

#[cfg(all(test, any(feature = "postgres", feature = "s3")))]
mod tests {
    use super::*;

    #[test]
    fn jobs_run_from_plain_threads_and_from_runtime_workers() {
        assert_eq!(wait(async { 2 + 2 }), 4);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        assert_eq!(rt.block_on(async { wait(async { "inside" }) }), "inside");
        let current = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        assert_eq!(current.block_on(async { wait(async { 7 }) }), 7);
    }
}

/// Opens (creating) the SQLite database at `path` as every local database is used:
/// write-ahead log (readers never wait for the writer, other processes included), and
/// a writer waits up to five seconds for another's lock before failing.
pub fn open_sqlite(path: &std::path::Path) -> rusqlite::Result<rusqlite::Connection> {
    let db = rusqlite::Connection::open(path)?;
    db.busy_timeout(std::time::Duration::from_secs(5))?;
    db.pragma_update(None, "journal_mode", "WAL")?;
    Ok(db)
}
