//! Resource subscriptions being made upstream. A `subscriptions/listen` request is
//! acknowledged (its resources honoured) before Airlock has opened the matching
//! subscriptions upstream; a call made right after the acknowledgment could change a
//! resource before the upstream server knows anyone listens, and its update would be
//! lost. So a listen stream marks itself pending from the acknowledgment until its
//! upstream subscriptions are open, and a tool call waits for the pending ones first
//! (never longer than [`SETTLE_WITHIN`]: a stream that never got going does not hold
//! calls up for good).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// Longest a pending subscription holds a call back.
pub(super) const SETTLE_WITHIN: Duration = Duration::from_secs(5);

/// The listen streams whose upstream subscriptions are being opened.
pub(super) struct Subscribing {
    /// When each pending stream was acknowledged.
    pending: Mutex<Vec<Instant>>,
    settled: Notify,
    /// Longest a pending stream holds a call back.
    bound: Duration,
}

impl Default for Subscribing {
    fn default() -> Self {
        Subscribing::within(SETTLE_WITHIN)
    }
}

impl Subscribing {
    /// Pending streams hold calls back at most `bound`.
    fn within(bound: Duration) -> Self {
        Subscribing {
            pending: Mutex::default(),
            settled: Notify::new(),
            bound,
        }
    }

    /// A listen stream was acknowledged; its upstream subscriptions are not open yet.
    pub(super) fn begin(&self) {
        self.lock().push(Instant::now());
    }

    /// The oldest pending stream's upstream subscriptions are open (or failed).
    pub(super) fn end(&self) {
        let mut pending = self.lock();
        if !pending.is_empty() {
            pending.remove(0);
        }
        drop(pending);
        self.settled.notify_waiters();
    }

    /// Waits until no stream acknowledged within the bound is still pending.
    pub(super) async fn settled(&self) {
        loop {
            let notified = self.settled.notified();
            let wait = {
                let mut pending = self.lock();
                pending.retain(|since| since.elapsed() < self.bound);
                match pending.first() {
                    None => return,
                    Some(since) => self.bound.saturating_sub(since.elapsed()),
                }
            };
            let _ = tokio::time::timeout(wait, notified).await;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Instant>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_call_waits_for_a_pending_subscription_and_no_longer() {
        let subscribing = std::sync::Arc::new(Subscribing::default());
        subscribing.settled().await; // nothing pending: at once
        subscribing.begin();
        let waiter = {
            let subscribing = subscribing.clone();
            tokio::spawn(async move {
                let started = Instant::now();
                subscribing.settled().await;
                started.elapsed()
            })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished(), "the call waits while one is pending");
        subscribing.end();
        let waited = waiter.await.unwrap();
        assert!(waited < SETTLE_WITHIN, "released by the end, not the bound");
    }

    #[tokio::test]
    async fn a_stream_that_never_got_going_holds_calls_only_so_long() {
        let bound = Duration::from_millis(200);
        let subscribing = Subscribing::within(bound);
        subscribing.begin();
        let started = Instant::now();
        subscribing.settled().await;
        let waited = started.elapsed();
        assert!(waited >= bound && waited < bound * 10, "{waited:?}");
        subscribing.settled().await; // the stale one is forgotten: at once now
    }
}
