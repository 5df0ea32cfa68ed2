//! Keeping the results index true to the results store. An output is indexed only after
//! its bytes are durable, so a crash (or a registry outage) between the two leaves an
//! output stored and unindexed; an output removed from the store by hand or by a bucket
//! lifecycle rule leaves an index row naming nothing. [`Airlock::reindex_results`]
//! lists both and mends each: a row for every stored output of a known service, none
//! for an output the store no longer holds.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::Airlock;
use super::access::registry_failure;
use crate::error::{CallError, ErrorCode};
use crate::registry::ResultEntry;
use crate::results::{ResultStore, Retained};

/// What [`Airlock::reindex_results`] found and mended.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Reindexed {
    /// Outputs in the store.
    pub stored: usize,
    /// Rows in the index before.
    pub indexed: usize,
    /// Stored outputs that had no row: indexed now.
    pub added: usize,
    /// Rows naming an output the store does not hold: removed.
    pub removed: usize,
    /// Stored outputs under a folder no known service owns (a service configured only
    /// elsewhere, or removed): left as they are, unindexed.
    pub unattributed: usize,
    /// Stored outputs whose record cannot be read: left as they are, and logged.
    pub unreadable: usize,
}

/// The index row of `record`, kept for `service` (none without an output id).
pub(super) fn entry_of(service: &str, record: &Retained) -> Option<ResultEntry> {
    Some(ResultEntry {
        output_id: record.output_id.clone()?,
        service: service.to_string(),
        agent: record.agent.clone().unwrap_or_default(),
        size: record.size as u64,
        digest: record.digest.clone(),
        complete: record.complete,
        redacted: record.redacted,
    })
}

impl Airlock {
    /// Mends the results index against the store: indexes stored outputs that have no
    /// row, and removes rows whose output the store does not hold. The index is read
    /// before the store is listed, so an output written meanwhile is never taken for a
    /// missing one. Runs off the async threads; it lists the whole store (every object
    /// under the prefix, for S3). `airlock serve` runs it at start-up and every 6 hours.
    pub async fn reindex_results(&self) -> Result<Reindexed, CallError> {
        let inner = self.inner.clone();
        let known: Vec<String> = inner
            .all_services()
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        tokio::task::spawn_blocking(move || {
            let indexed = inner.registry.indexed_results().map_err(registry_failure)?;
            let stored = inner.results.list_stored().map_err(|e| {
                CallError::new(
                    ErrorCode::ServiceUnavailable,
                    format!("cannot list {}: {e}", inner.results.describe()),
                )
            })?;
            // Folder → service, for every service configured here or named in the index.
            let owners: BTreeMap<String, String> = known
                .iter()
                .chain(indexed.iter().map(|(_, service)| service))
                .map(|service| (ResultStore::folder_of(service), service.clone()))
                .collect();
            let ids: BTreeSet<&str> = indexed.iter().map(|(id, _)| id.as_str()).collect();
            let held: BTreeSet<&str> = stored.iter().map(|(_, id)| id.as_str()).collect();
            let mut done = Reindexed {
                stored: stored.len(),
                indexed: indexed.len(),
                ..Default::default()
            };
            let mut rows = Vec::new();
            for (folder, id) in &stored {
                if ids.contains(id.as_str()) {
                    continue;
                }
                let Some(service) = owners.get(folder) else {
                    done.unattributed += 1;
                    continue;
                };
                match inner.results.stored_record(folder, id) {
                    Ok(record) => rows.extend(entry_of(service, &record)),
                    Err(e) => {
                        tracing::warn!("reindexing: output {id} of {service}: {e}");
                        done.unreadable += 1;
                    }
                }
            }
            let gone: Vec<String> = indexed
                .iter()
                .filter(|(id, _)| !held.contains(id.as_str()))
                .map(|(id, _)| id.clone())
                .collect();
            inner
                .registry
                .index_results(&rows)
                .map_err(registry_failure)?;
            inner
                .registry
                .unindex_results(&gone)
                .map_err(registry_failure)?;
            done.added = rows.len();
            done.removed = gone.len();
            Ok(done)
        })
        .await
        .map_err(|e| {
            CallError::new(
                ErrorCode::ServiceUnavailable,
                format!("reindexing the results panicked: {e}"),
            )
        })?
    }
}
