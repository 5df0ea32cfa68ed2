//! The grace period after a cancelled call: later calls on the session wait until the
//! server answers the cancelled request or the grace period passes; in the latter case
//! the next result is warned that the cancelled work may still be running.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::error::{CallError, ErrorCode};

/// How long calls wait after a cancellation unless the server answers first.
pub const DEFAULT_CANCEL_GRACE: Duration = Duration::from_secs(10);

#[derive(Default)]
struct State {
    /// Cancelled requests still unanswered.
    pending: usize,
    /// A cancelled request never answered within the grace period.
    unanswered: bool,
}

/// Shared per-session drain state.
#[derive(Clone)]
pub(super) struct DrainGate {
    state: Arc<Mutex<State>>,
    changed: watch::Sender<()>,
    grace: Duration,
}

impl Default for DrainGate {
    fn default() -> Self {
        DrainGate {
            state: Arc::default(),
            changed: watch::channel(()).0,
            grace: DEFAULT_CANCEL_GRACE,
        }
    }
}

impl DrainGate {
    /// Sets the grace period.
    pub(super) fn set_grace(&mut self, grace: Duration) {
        self.grace = grace;
    }

    /// Watches a cancelled request's response channel for the grace period.
    pub(super) fn start<T: Send + 'static>(&self, rx: oneshot::Receiver<T>) {
        self.state.lock().expect("drain state poisoned").pending += 1;
        let gate = self.clone();
        tokio::spawn(async move {
            let answered = matches!(tokio::time::timeout(gate.grace, rx).await, Ok(Ok(_)));
            let mut state = gate.state.lock().expect("drain state poisoned");
            state.pending -= 1;
            if !answered {
                state.unanswered = true;
            }
            drop(state);
            gate.changed.send_replace(());
        });
    }

    /// Waits while cancelled requests are pending; returns the warning for this call
    /// when a cancelled request was never answered.
    pub(super) async fn wait_turn(
        &self,
        cancel: Option<&CancellationToken>,
    ) -> Result<Option<String>, CallError> {
        let mut rx = self.changed.subscribe();
        loop {
            {
                let mut state = self.state.lock().expect("drain state poisoned");
                if state.pending == 0 {
                    let warned = std::mem::take(&mut state.unanswered);
                    return Ok(warned.then(|| {
                        "an earlier call to this service was cancelled and the server never answered it; that work may still be running".to_string()
                    }));
                }
            }
            let cancelled = async {
                match cancel {
                    Some(c) => c.cancelled().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = rx.changed() => {}
                _ = cancelled => return Err(CallError::new(ErrorCode::Cancelled, "cancelled while waiting for an earlier cancelled call to finish")),
            }
        }
    }
}
