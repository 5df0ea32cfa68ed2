//! Grant answers, and the gateway tokens requests present, kept in memory while the
//! database's change notifications are heard, so a call's access check and a request's
//! token check cost a map lookup instead of a round trip to a shared registry.
//!
//! The rule that keeps a revocation effective on every host: an answer is kept only
//! while a listener ([`super::pg_listen`]) hears the database's notifications, and every
//! notification of the `grants` or `tokens` topic forgets every kept answer. Only
//! tokens found are kept (an unknown one is asked again, so guessing fills nothing). An answer is stamped
//! with the memo's epoch read *before* its query was sent; a notification (or a lost
//! listener) moves the epoch, so an answer that raced a change is never kept. While the
//! listener has not heard from the database for [`LIVENESS`] (a silent network
//! partition), nothing is answered from memory. Each kept answer is asked again after
//! [`MAX_AGE`], so the outage recall ([`super::recall`]) stays fresh.
//!
//! A registry without a listener (SQLite, whose checks are local and quick) never keeps
//! anything: every check asks the database.

use std::collections::HashMap;
use std::sync::RwLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long the listener may go without hearing from the database before answers stop
/// coming from memory (it pings once a second).
pub(super) const LIVENESS: Duration = Duration::from_secs(3);
/// How long a kept answer is used before the database is asked again.
const MAX_AGE: Duration = Duration::from_secs(30);
/// Past this many kept answers, all are dropped (and asked again as needed).
const CAPACITY: usize = 65_536;

/// The kept answers and the epoch they belong to.
#[derive(Default)]
struct Answers {
    /// Moves on every change notification and every change of hearing.
    epoch: u64,
    /// Granted or not, and when the database said so, by agent then service.
    by_agent: HashMap<String, HashMap<String, (bool, Instant)>>,
    /// Gateway tokens found, by fingerprint, and when.
    tokens: HashMap<String, (super::TokenRecord, Instant)>,
    count: usize,
}

impl Answers {
    /// Drops every kept answer (the epoch stays).
    fn clear(&mut self) {
        self.by_agent.clear();
        self.tokens.clear();
        self.count = 0;
    }
}

/// Grant answers kept while change notifications are heard (see the module).
pub(super) struct GrantMemo {
    answers: RwLock<Answers>,
    /// Whether a listener is connected and listening.
    hearing: AtomicBool,
    /// When the listener last heard the database, in milliseconds since `born`.
    heard_ms: AtomicU64,
    born: Instant,
}

/// The epoch an answer's query was sent in; `None` when nothing may be kept.
pub(super) type Stamp = Option<u64>;

impl Default for GrantMemo {
    fn default() -> Self {
        GrantMemo {
            answers: Default::default(),
            hearing: AtomicBool::new(false),
            heard_ms: AtomicU64::new(0),
            born: Instant::now(),
        }
    }
}

impl GrantMemo {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Answers> {
        self.answers.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Answers> {
        self.answers.write().unwrap_or_else(|e| e.into_inner())
    }

    fn now_ms(&self) -> u64 {
        self.born.elapsed().as_millis() as u64
    }

    /// Whether answers may come from memory now: the listener is connected and heard
    /// the database within [`LIVENESS`].
    pub(super) fn live(&self) -> bool {
        self.hearing.load(Ordering::Acquire)
            && self
                .now_ms()
                .saturating_sub(self.heard_ms.load(Ordering::Acquire))
                < LIVENESS.as_millis() as u64
    }

    /// The kept answer for `agent` and `service`, if there is a fresh one.
    pub(super) fn recall(&self, agent: &str, service: &str) -> Option<bool> {
        if !self.live() {
            return None;
        }
        let answers = self.read();
        let &(granted, at) = answers.by_agent.get(agent)?.get(service)?;
        (at.elapsed() < MAX_AGE).then_some(granted)
    }

    /// The stamp for a query about to be sent.
    pub(super) fn stamp(&self) -> Stamp {
        self.live().then(|| self.read().epoch)
    }

    /// Keeps the database's answer to a query sent at `stamp`, unless something changed
    /// since (or nothing may be kept).
    pub(super) fn remember(&self, agent: &str, service: &str, granted: bool, stamp: Stamp) {
        self.keep(stamp, |answers| {
            answers
                .by_agent
                .entry(agent.to_string())
                .or_default()
                .insert(service.to_string(), (granted, Instant::now()))
                .is_none()
        });
    }

    /// Runs `insert` (which says whether it added an answer) on the kept answers when
    /// a query sent at `stamp` may be kept: nothing changed since. Past [`CAPACITY`],
    /// everything kept is dropped first.
    fn keep(&self, stamp: Stamp, insert: impl FnOnce(&mut Answers) -> bool) {
        let Some(stamp) = stamp else { return };
        let mut answers = self.write();
        if answers.epoch != stamp {
            return;
        }
        if answers.count >= CAPACITY {
            answers.clear();
        }
        if insert(&mut answers) {
            answers.count += 1;
        }
    }

    /// The kept token with `fingerprint`, if there is a fresh one.
    pub(super) fn recall_token(&self, fingerprint: &str) -> Option<super::TokenRecord> {
        if !self.live() {
            return None;
        }
        let answers = self.read();
        let (token, at) = answers.tokens.get(fingerprint)?;
        (at.elapsed() < MAX_AGE).then(|| token.clone())
    }

    /// Keeps the token the database found for `fingerprint` by a query sent at `stamp`,
    /// unless something changed since (or nothing may be kept).
    pub(super) fn remember_token(
        &self,
        fingerprint: &str,
        token: &super::TokenRecord,
        stamp: Stamp,
    ) {
        self.keep(stamp, |answers| {
            answers
                .tokens
                .insert(fingerprint.to_string(), (token.clone(), Instant::now()))
                .is_none()
        });
    }

    /// Grants or tokens changed (here or on another host): every kept answer is
    /// forgotten, and no answer to a query sent before now is kept.
    pub(super) fn forget(&self) {
        let mut answers = self.write();
        answers.epoch = answers.epoch.wrapping_add(1);
        answers.clear();
    }
}

/// What the listener tells the memo (only a PostgreSQL registry has one).
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
impl GrantMemo {
    /// The listener is listening: answers may be kept from now on (nothing from before).
    pub(super) fn hearing(&self) {
        self.forget();
        self.heard();
        self.hearing.store(true, Ordering::Release);
    }

    /// The listener heard the database (a notification or the answer to a ping).
    pub(super) fn heard(&self) {
        self.heard_ms.store(self.now_ms(), Ordering::Release);
    }

    /// The listener lost the database: notifications may be missed, so nothing is
    /// answered from memory until it listens again.
    pub(super) fn deaf(&self) {
        self.hearing.store(false, Ordering::Release);
        self.forget();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_kept_or_recalled_until_notifications_are_heard() {
        let memo = GrantMemo::default();
        assert_eq!(memo.stamp(), None);
        memo.remember("a", "s", true, memo.stamp());
        assert_eq!(memo.recall("a", "s"), None);
        memo.hearing();
        memo.remember("a", "s", true, memo.stamp());
        memo.remember("a", "t", false, memo.stamp());
        assert_eq!(memo.recall("a", "s"), Some(true));
        assert_eq!(memo.recall("a", "t"), Some(false));
        assert_eq!(memo.recall("b", "s"), None);
    }

    #[test]
    fn tokens_are_kept_while_heard_and_forgotten_at_a_change() {
        let memo = GrantMemo::default();
        let token = crate::registry::TokenRecord {
            id: "t1".into(),
            agent: "alice".into(),
            fingerprint: "sha256:f".into(),
            secret_ref: "secret:x".into(),
            created_at: 0,
        };
        memo.remember_token("sha256:f", &token, memo.stamp());
        assert_eq!(memo.recall_token("sha256:f"), None, "not heard yet");
        memo.hearing();
        let raced = memo.stamp();
        memo.forget();
        memo.remember_token("sha256:f", &token, raced);
        assert_eq!(memo.recall_token("sha256:f"), None, "it raced a change");
        memo.remember_token("sha256:f", &token, memo.stamp());
        assert_eq!(memo.recall_token("sha256:f"), Some(token));
        memo.forget();
        assert_eq!(memo.recall_token("sha256:f"), None);
    }

    #[test]
    fn an_answer_that_raced_a_change_is_not_kept() {
        let memo = GrantMemo::default();
        memo.hearing();
        let before = memo.stamp();
        memo.forget(); // a notification arrives while the query is out
        memo.remember("a", "s", true, before);
        assert_eq!(memo.recall("a", "s"), None);
        let lost = memo.stamp();
        memo.deaf(); // the listener is lost while the query is out
        memo.hearing();
        memo.remember("a", "s", true, lost);
        assert_eq!(memo.recall("a", "s"), None);
    }

    #[test]
    fn a_change_or_a_lost_listener_forgets_every_answer() {
        let memo = GrantMemo::default();
        memo.hearing();
        memo.remember("a", "s", true, memo.stamp());
        memo.forget();
        assert_eq!(memo.recall("a", "s"), None);
        memo.remember("a", "s", true, memo.stamp());
        memo.deaf();
        assert_eq!(memo.recall("a", "s"), None);
        memo.hearing();
        assert_eq!(memo.recall("a", "s"), None, "nothing from before survives");
    }

    #[test]
    fn a_listener_that_goes_quiet_stops_answers_from_memory() {
        let memo = GrantMemo::default();
        memo.hearing();
        memo.remember("a", "s", true, memo.stamp());
        // Last heard longer ago than LIVENESS.
        memo.heard_ms.store(0, Ordering::Release);
        let memo = GrantMemo {
            born: Instant::now() - LIVENESS - Duration::from_millis(10),
            ..memo
        };
        assert!(!memo.live());
        assert_eq!(memo.recall("a", "s"), None);
        assert_eq!(memo.stamp(), None);
        memo.heard();
        assert_eq!(memo.recall("a", "s"), Some(true));
    }
}
