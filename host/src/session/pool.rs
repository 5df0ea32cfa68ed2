//! [`SessionPool`]: the live sessions, one per (agent, service), opened on first use and
//! kept across calls. A limit on live sessions refuses a new connection rather than
//! closing someone else's. Openings, closings and failures are reported as
//! [`Event::SessionChanged`] on the event sender the pool was given.

use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::Session;
use crate::events::{Event, EventBus, SessionState};

/// A live session and what it was opened with.
pub struct LiveSession {
    /// The session.
    pub session: Session,
    /// Its number (increases with every connection Airlock makes).
    pub number: u64,
    /// The working directory a stdio server was started in.
    pub cwd: Option<PathBuf>,
}

/// Why [`SessionPool::acquire`] gave no session.
#[derive(Debug, thiserror::Error)]
pub enum AcquireError<E> {
    /// The live-session limit is reached.
    #[error(
        "the live session limit ({0}) is reached; disconnect an unused session or raise the limit"
    )]
    Limit(usize),
    /// Opening the connection failed.
    #[error(transparent)]
    Open(E),
}

/// One agent's connection slot for one service.
#[derive(Default)]
struct Slot {
    live: tokio::sync::Mutex<Option<Arc<LiveSession>>>,
    opened_before: AtomicBool,
}

type Key = (String, String);

/// Every live session, by (agent, service).
pub struct SessionPool {
    slots: Mutex<HashMap<Key, Arc<Slot>>>,
    live: AtomicUsize,
    max: usize,
    seq: AtomicU64,
    events: EventBus,
}

impl SessionPool {
    /// A pool allowing at most `max` live sessions, reporting to `events`.
    pub fn new(max: usize, events: EventBus) -> Self {
        SessionPool {
            slots: Mutex::new(HashMap::new()),
            live: AtomicUsize::new(0),
            max: max.max(1),
            seq: AtomicU64::new(0),
            events,
        }
    }

    fn slot(&self, agent: &str, service: &str) -> Option<Arc<Slot>> {
        self.slots
            .lock()
            .expect("session slots poisoned")
            .get(&(agent.to_string(), service.to_string()))
            .cloned()
    }

    fn emit(
        &self,
        agent: &str,
        service: &str,
        session: u64,
        state: SessionState,
        reconnect: bool,
        reason: Option<String>,
    ) {
        self.events.emit(Event::SessionChanged {
            agent: agent.to_string(),
            service: service.to_string(),
            session,
            state,
            reconnect,
            reason,
        });
    }

    /// `agent`'s live session with `service`, opening one with `open` when there is
    /// none (or it closed). `open` returns the session and the working directory it
    /// started in; its error is reported as the reason of a `failed` session event, so
    /// it must already be free of secrets.
    pub async fn acquire<F, Fut, E>(
        &self,
        agent: &str,
        service: &str,
        open: F,
    ) -> Result<Arc<LiveSession>, AcquireError<E>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<(Session, Option<PathBuf>), E>>,
        E: std::fmt::Display,
    {
        let slot = self
            .slots
            .lock()
            .expect("session slots poisoned")
            .entry((agent.to_string(), service.to_string()))
            .or_default()
            .clone();
        let mut guard = slot.live.lock().await;
        if let Some(live) = guard.as_ref() {
            if !live.session.is_closed() {
                return Ok(live.clone());
            }
            let dead = guard.take().expect("checked above");
            self.release(agent, service, dead, "the connection closed");
        }
        // Reserve a place under the limit; refuse rather than close someone else's.
        if self
            .live
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < self.max).then_some(n + 1)
            })
            .is_err()
        {
            return Err(AcquireError::Limit(self.max));
        }
        match open().await {
            Ok((session, cwd)) => {
                let live = Arc::new(LiveSession {
                    session,
                    number: self.seq.fetch_add(1, Ordering::SeqCst) + 1,
                    cwd,
                });
                *guard = Some(live.clone());
                let reconnect = slot.opened_before.swap(true, Ordering::SeqCst);
                self.emit(
                    agent,
                    service,
                    live.number,
                    SessionState::Connected,
                    reconnect,
                    None,
                );
                Ok(live)
            }
            Err(e) => {
                self.live.fetch_sub(1, Ordering::SeqCst);
                self.emit(
                    agent,
                    service,
                    0,
                    SessionState::Failed,
                    false,
                    Some(e.to_string()),
                );
                Err(AcquireError::Open(e))
            }
        }
    }

    /// `agent`'s live session with `service`, if one is open.
    pub async fn live(&self, agent: &str, service: &str) -> Option<Arc<LiveSession>> {
        let slot = self.slot(agent, service)?;
        slot.live.lock().await.clone()
    }

    /// Every live session of `agent`, by service.
    pub async fn sessions_of(&self, agent: &str) -> Vec<(String, Arc<LiveSession>)> {
        let slots: Vec<(String, Arc<Slot>)> = self
            .slots
            .lock()
            .expect("session slots poisoned")
            .iter()
            .filter(|((a, _), _)| a == agent)
            .map(|((_, s), slot)| (s.clone(), slot.clone()))
            .collect();
        let mut out = Vec::new();
        for (service, slot) in slots {
            if let Some(live) = slot.live.lock().await.clone() {
                out.push((service, live));
            }
        }
        out
    }

    /// How many live sessions `service` has (one per agent using it).
    pub fn live_count(&self, service: &str) -> usize {
        self.slots
            .lock()
            .expect("session slots poisoned")
            .iter()
            .filter(|((_, s), slot)| {
                s == service && slot.live.try_lock().map(|l| l.is_some()).unwrap_or(true)
            })
            .count()
    }

    /// Every live session: (agent, service, session number), by service then agent.
    pub fn all_live(&self) -> Vec<(String, String, u64)> {
        let mut out: Vec<(String, String, u64)> = self
            .slots
            .lock()
            .expect("session slots poisoned")
            .iter()
            .filter_map(|((agent, service), slot)| {
                let live = slot.live.try_lock().ok()?;
                live.as_ref()
                    .map(|l| (agent.clone(), service.clone(), l.number))
            })
            .collect();
        out.sort_by(|a, b| (&a.1, &a.0).cmp(&(&b.1, &b.0)));
        out
    }

    /// The agents with a live session with `service`, and each session's number.
    pub fn agents_of(&self, service: &str) -> Vec<(String, u64)> {
        let mut out: Vec<(String, u64)> = self
            .slots
            .lock()
            .expect("session slots poisoned")
            .iter()
            .filter(|((_, s), _)| s == service)
            .filter_map(|((agent, _), slot)| {
                let live = slot.live.try_lock().ok()?;
                live.as_ref().map(|l| (agent.clone(), l.number))
            })
            .collect();
        out.sort();
        out
    }

    /// Forgets a session (it no longer counts toward the limit) and closes it in the
    /// background so nobody waits for it.
    fn release(&self, agent: &str, service: &str, live: Arc<LiveSession>, why: &str) {
        self.live.fetch_sub(1, Ordering::SeqCst);
        self.emit(
            agent,
            service,
            live.number,
            SessionState::Closed,
            false,
            Some(why.to_string()),
        );
        tokio::spawn(close_when_free(live));
    }

    /// Closes `agent`'s session with `service` now (the close finishes in the
    /// background). Returns whether there was one.
    pub async fn disconnect(&self, agent: &str, service: &str, why: &str) -> bool {
        let Some(slot) = self.slot(agent, service) else {
            return false;
        };
        let Some(live) = slot.live.lock().await.take() else {
            return false;
        };
        self.release(agent, service, live, why);
        true
    }

    /// Closes every session of `agent` and waits for them to finish closing.
    pub async fn close_agent(&self, agent: &str) {
        let slots: Vec<(Key, Arc<Slot>)> = {
            let mut all = self.slots.lock().expect("session slots poisoned");
            let keys: Vec<Key> = all.keys().filter(|(a, _)| a == agent).cloned().collect();
            keys.into_iter()
                .filter_map(|k| all.remove(&k).map(|s| (k, s)))
                .collect()
        };
        self.close_slots(slots, "the agent's client went away")
            .await;
    }

    /// Closes every agent's session with `service` (removed or redefined) and waits for
    /// them to finish closing.
    pub async fn close_service(&self, service: &str, why: &str) {
        let slots: Vec<(Key, Arc<Slot>)> = {
            let mut all = self.slots.lock().expect("session slots poisoned");
            let keys: Vec<Key> = all.keys().filter(|(_, s)| s == service).cloned().collect();
            keys.into_iter()
                .filter_map(|k| all.remove(&k).map(|s| (k, s)))
                .collect()
        };
        self.close_slots(slots, why).await;
    }

    /// Closes every session and waits for each to finish closing.
    pub async fn close_all(&self) {
        let slots: Vec<(Key, Arc<Slot>)> = self
            .slots
            .lock()
            .expect("session slots poisoned")
            .drain()
            .collect();
        self.close_slots(slots, "Airlock closed").await;
    }

    async fn close_slots(&self, slots: Vec<(Key, Arc<Slot>)>, why: &str) {
        let mut closing = Vec::new();
        for ((agent, service), slot) in slots {
            if let Some(live) = slot.live.lock().await.take() {
                self.live.fetch_sub(1, Ordering::SeqCst);
                self.emit(
                    &agent,
                    &service,
                    live.number,
                    SessionState::Closed,
                    false,
                    Some(why.to_string()),
                );
                closing.push(live);
            }
        }
        futures::future::join_all(closing.into_iter().map(close_when_free)).await;
    }
}

/// Closes a session once in-flight calls holding it let go (briefly waited for); a
/// session still in use after that is killed when its last holder drops it.
async fn close_when_free(live: Arc<LiveSession>) {
    let mut live = live;
    for _ in 0..50 {
        match Arc::try_unwrap(live) {
            Ok(owned) => return owned.session.close().await,
            Err(shared) => live = shared,
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tracing::warn!("a session was still in use at close; its process group is killed on drop");
}
