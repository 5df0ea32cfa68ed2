//! What other processes change in the shared registry, taken in by a running Airlock:
//! grants given or revoked elsewhere reach this host's clients as `grants_changed`
//! (so gateway clients list tools again), services disabled or enabled at run time on
//! any host are disabled or enabled here, and service definitions that moved are
//! reported so the caller loads its config again ([`Airlock::reconcile`]).
//!
//! The registry counts every write per topic in its `changes` table (database
//! triggers, so writes of any process count); one small query tells what moved.

use std::collections::BTreeSet;

use super::access::registry_failure;
use super::{Airlock, Inner};
use crate::error::CallError;
use crate::events::Event;
use crate::registry::changes::Generations;

/// What this host last saw of the registry.
#[derive(Default)]
pub(super) struct Seen {
    generations: Generations,
    grants: BTreeSet<(String, String)>,
}

impl Airlock {
    /// Takes in what other processes changed in the registry since the last look, and
    /// returns whether service definitions (services, tested catalogs, names) moved, in
    /// which case the caller loads its config again and calls [`Airlock::reconcile`].
    /// `airlock serve` calls it every `--reload-secs`; an embedder sharing a registry
    /// calls it on its own schedule. The first look only records where things stand.
    ///
    /// ```no_run
    /// # async fn run(airlock: airlock_host::Airlock, load: impl Fn() -> airlock_host::config::Config) -> Result<(), airlock_host::CallError> {
    /// if airlock.take_in_changes().await? {
    ///     airlock.reconcile(&load().servers).await;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn take_in_changes(&self) -> Result<bool, CallError> {
        let inner = self.inner.clone();
        let looked = tokio::task::spawn_blocking(move || {
            let registry = &inner.registry;
            let now = registry.generations()?;
            let earlier = inner.seen().generations.clone();
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
                crate::ErrorCode::ServiceUnavailable,
                format!("reading the registry's changes panicked: {e}"),
            )
        })?
        .map_err(registry_failure)?;
        let (now, earlier, first, grants, pauses) = looked;
        let inner = &self.inner;
        if let Some(grants) = grants {
            let grants: BTreeSet<(String, String)> = grants.into_iter().collect();
            let before = std::mem::replace(&mut inner.seen().grants, grants.clone());
            if !first {
                for (agent, service) in before.symmetric_difference(&grants) {
                    inner.emit(Event::GrantsChanged {
                        agent: agent.clone(),
                        service: service.clone(),
                        granted: grants.contains(&(agent.clone(), service.clone())),
                    });
                }
            }
        }
        if let Some(pauses) = pauses {
            inner.take_in_pauses(pauses).await;
        }
        inner.seen().generations = now.clone();
        Ok(!first && now.moved(&earlier, "services"))
    }
}

impl Inner {
    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().expect("seen changes poisoned")
    }

    /// Makes the services disabled at run time exactly those of `pauses`.
    pub(super) async fn take_in_pauses(&self, pauses: BTreeSet<String>) {
        *self.pauses.write().expect("pauses poisoned") = pauses.clone();
        for (name, service) in self.all_services() {
            let paused = pauses.contains(&name);
            if service.paused.load(std::sync::atomic::Ordering::Relaxed) != paused {
                self.apply_pause(&name, paused).await;
            }
        }
    }

    /// Disables (`paused`) or enables `name` on this host now: a disabled service's
    /// sessions close; clients hear `service_changed` and `tools_changed`.
    pub(super) async fn apply_pause(&self, name: &str, paused: bool) {
        let Some(service) = self.service(name) else {
            return;
        };
        service
            .paused
            .store(paused, std::sync::atomic::Ordering::Relaxed);
        if paused {
            for (agent, _) in self.pool.agents_of(name) {
                self.pool.disconnect(&agent, name, "disabled").await;
            }
        }
        self.emit_service_changed(name);
        // Clients (the gateway's) list tools again: the service's tools came or went.
        self.emit(Event::ToolsChanged {
            service: name.to_string(),
            tools: if paused { 0 } else { self.tool_count(name) },
        });
    }

    /// Whether `name` was disabled at run time (by any host), as last read.
    pub(super) fn is_paused(&self, name: &str) -> bool {
        self.pauses.read().expect("pauses poisoned").contains(name)
    }
}
