//! What other processes change in the shared registry, taken in by a running Airlock:
//! grants given or revoked elsewhere reach this host's clients as `grants_changed`
//! (so gateway clients list tools again), services disabled or enabled at run time on
//! any host are disabled or enabled here, and service definitions that moved are
//! reported so the caller loads its config again ([`super::Services::reconcile`]).
//!
//! The registry counts every write per topic in its `changes` table (database
//! triggers, so writes of any process count); one small query tells what moved.

use std::sync::Mutex;

use super::Airlock;
use super::services::registry_failure;
use crate::error::{CallError, ErrorCode};
use crate::registry::changes::Generations;

/// What this host last saw of the registry's write counters.
#[derive(Default)]
pub(super) struct Seen(Mutex<Generations>);

impl Airlock {
    /// Takes in what other processes changed in the registry since the last look, and
    /// returns whether service definitions (services, tested catalogs, names) moved, in
    /// which case the caller loads its config again and calls
    /// [`super::Services::reconcile`]. `airlock serve` calls it every `--reload-secs`;
    /// an embedder sharing a registry calls it on its own schedule. The first look only
    /// records where things stand.
    ///
    /// ```no_run
    /// # async fn run(airlock: airlock_host::Airlock, load: impl Fn() -> airlock_host::config::Config) -> Result<(), airlock_host::CallError> {
    /// if airlock.take_in_changes().await? {
    ///     airlock.services().reconcile(&load().servers).await;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn take_in_changes(&self) -> Result<bool, CallError> {
        let earlier = self.parts.seen.0.lock().expect("seen poisoned").clone();
        let registry = self.parts.registry.clone();
        let looked = tokio::task::spawn_blocking(move || {
            let now = registry.generations()?;
            let first = earlier == Generations::default();
            let grants = if first || now.moved(&earlier, "grants") {
                Some(registry.all_grants()?)
            } else {
                None
            };
            let pauses = if first || now.moved(&earlier, "pauses") {
                Some(registry.paused()?)
            } else {
                None
            };
            Ok::<_, crate::registry::RegistryError>((now, earlier, first, grants, pauses))
        })
        .await
        .map_err(|e| {
            CallError::new(
                ErrorCode::ServiceUnavailable,
                format!("reading the registry's changes panicked: {e}"),
            )
        })?
        .map_err(registry_failure)?;
        let (now, earlier, first, grants, pauses) = looked;
        if let Some(grants) = grants {
            self.parts.access.take_in_grants(grants, first);
        }
        if let Some(pauses) = pauses {
            self.parts.services.take_in_pauses(pauses).await;
        }
        *self.parts.seen.0.lock().expect("seen poisoned") = now.clone();
        Ok(!first && now.moved(&earlier, "services"))
    }
}
