//! Requests to an upstream server under its `[limits]`: every request takes a slot and
//! tokens from the service's [`UpstreamGuard`](crate::session::UpstreamGuard) first, and
//! an idempotent one (a listing, a read, a prompt, a completion) whose connection closed
//! under it is sent once more on a fresh session after a short pause. A tool call is
//! never sent twice: a call the server may have started is the caller's to repeat.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::{Services, no_service};
use crate::error::{CallError, ErrorCode};
use crate::session::LiveSession;

/// The pause before an idempotent request is sent again.
pub const RETRY_PAUSE: Duration = Duration::from_millis(200);

impl Services {
    /// Runs an idempotent request of `agent` on its session with `service`, under the
    /// service's limits; retried once on a fresh session when the connection closed
    /// under it.
    pub(crate) async fn idempotent<T, F, Fut>(
        &self,
        agent: &str,
        service: &str,
        request: F,
    ) -> Result<T, CallError>
    where
        F: Fn(Arc<LiveSession>) -> Fut,
        Fut: Future<Output = Result<T, CallError>>,
    {
        let guarded = self.get(service).ok_or_else(|| no_service(service))?;
        let _permit = guarded.guard.admit(agent)?;
        let mut retried = false;
        loop {
            let live = self.open(agent, service).await?;
            match request(live).await {
                Err(e) if e.code == ErrorCode::ServiceUnavailable => {
                    guarded.guard.record_failure();
                    if retried {
                        return Err(e);
                    }
                    retried = true;
                    tracing::debug!(
                        service,
                        "the connection closed under a request; retrying once"
                    );
                    tokio::time::sleep(RETRY_PAUSE).await;
                }
                other => {
                    if other.is_ok() {
                        guarded.guard.record_success();
                    }
                    return other;
                }
            }
        }
    }
}
