//! [`Outputs`]: the results Airlock kept — paged back and exported by the agent whose
//! call produced them (its access checked again), flushed, and the results index mended
//! against the store ([`Outputs::reindex`]). An output is indexed only after its bytes
//! are durable, so a crash (or a registry outage) between the two leaves an output
//! stored and unindexed; an output removed from the store by hand or by a bucket
//! lifecycle rule leaves an index row naming nothing. Reindexing mends both.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::Serialize;

use super::access::{Access, AccessRequest};
use super::services::{Services, registry_failure};
use crate::airlock::options::DEFAULT_AGENT;
use crate::error::{CallError, ErrorCode};
use crate::registry::{Registry, ResultEntry};
use crate::results::{Export, ExportError, Page, Prepared, ReadError, ResultStore, Retained};

/// What [`Outputs::reindex`] found and mended.
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

/// The retained outputs.
pub struct Outputs {
    results: Arc<ResultStore>,
    access: Arc<Access>,
    services: Arc<Services>,
    registry: Arc<Registry>,
    /// The page size of a read.
    page: usize,
}

impl Outputs {
    pub(crate) fn new(
        results: Arc<ResultStore>,
        access: Arc<Access>,
        services: Arc<Services>,
        registry: Arc<Registry>,
    ) -> Outputs {
        let page = results.limits().preview;
        Outputs {
            results,
            access,
            services,
            registry,
            page,
        }
    }

    /// The default preview (and page) size.
    pub fn preview(&self) -> usize {
        self.page
    }

    /// Keeps a prepared result of `service`: its record and preview (see
    /// [`ResultStore::keep`]).
    pub(crate) async fn keep(&self, service: &str, prepared: Prepared) -> (Retained, String) {
        self.results.keep(service, prepared).await
    }

    /// Reads a page of a retained output of `service` as the default agent (see
    /// [`Outputs::read_as`]).
    pub async fn read(
        &self,
        service: &str,
        output_id: &str,
        offset: usize,
    ) -> Result<Page, CallError> {
        self.read_as(DEFAULT_AGENT, service, output_id, offset)
            .await
    }

    /// Reads a page of a retained output for `agent`: only the agent whose call produced
    /// it may read it, and its access to the service is checked again. The page is read
    /// off the async threads.
    pub async fn read_as(
        &self,
        agent: &str,
        service: &str,
        output_id: &str,
        offset: usize,
    ) -> Result<Page, CallError> {
        let page = self.page;
        self.as_reader(
            agent,
            service,
            output_id,
            move |results, agent, service, id| {
                results
                    .read_for(agent, service, id, offset, page)
                    .map_err(read_failure)
            },
        )
        .await
    }

    /// Saves a retained output of `service` (owned by `agent`) into `folder`, whole or as
    /// ordered parts of at most `part_size` bytes with an index (at most 512 parts); the
    /// agent's access is checked as for a read. Written off the async threads.
    pub async fn export(
        &self,
        agent: &str,
        service: &str,
        output_id: &str,
        folder: &std::path::Path,
        part_size: Option<usize>,
    ) -> Result<Export, CallError> {
        let folder = folder.to_path_buf();
        self.as_reader(
            agent,
            service,
            output_id,
            move |results, agent, service, id| {
                results
                    .export_for(agent, service, id, &folder, part_size)
                    .map_err(export_failure)
            },
        )
        .await
    }

    /// Runs `job` on the store off the async threads, once `agent`'s access to the
    /// output (`service`, `output_id`) is checked; `job` gets the store and the three
    /// names.
    async fn as_reader<T: Send + 'static>(
        &self,
        agent: &str,
        service: &str,
        output_id: &str,
        job: impl FnOnce(&ResultStore, &str, &str, &str) -> Result<T, CallError> + Send + 'static,
    ) -> Result<T, CallError> {
        self.access
            .authorize(&AccessRequest::ReadOutput {
                agent,
                service,
                output_id,
            })
            .await?;
        let results = self.results.clone();
        let (agent, service, output_id) = (
            agent.to_string(),
            service.to_string(),
            output_id.to_string(),
        );
        blocking(move || job(&results, &agent, &service, &output_id)).await
    }

    /// Waits until every result retained so far is on disk and indexed (results are
    /// written off the caller's path; reads see them at once either way).
    pub async fn flush(&self) {
        self.results.flush().await;
    }

    /// Where the outputs are kept, for messages (no credentials).
    pub(crate) fn describe(&self) -> String {
        self.results.describe()
    }

    /// Whether the store answers (one cheap request; blocking).
    pub(crate) fn reachable(&self) -> std::io::Result<()> {
        self.results.reachable()
    }

    /// Mends the results index against the store: indexes stored outputs that have no
    /// row, and removes rows whose output the store does not hold. The index is read
    /// before the store is listed, so an output written meanwhile is never taken for a
    /// missing one. Runs off the async threads; it lists the whole store (every object
    /// under the prefix, for S3). `airlock serve` runs it at start-up and every 6 hours.
    pub async fn reindex(&self) -> Result<Reindexed, CallError> {
        let known = self.services.names();
        let (results, registry) = (self.results.clone(), self.registry.clone());
        blocking(move || {
            let indexed = registry.indexed_results().map_err(registry_failure)?;
            let stored = results.list_stored().map_err(|e| {
                CallError::new(
                    ErrorCode::ServiceUnavailable,
                    format!("cannot list {}: {e}", results.describe()),
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
                match results.stored_record(folder, id) {
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
            registry.index_results(&rows).map_err(registry_failure)?;
            registry.unindex_results(&gone).map_err(registry_failure)?;
            done.added = rows.len();
            done.removed = gone.len();
            Ok(done)
        })
        .await
    }
}

/// Runs blocking storage work off the async threads.
/// A failed read as the caller's error: another agent's output is a denial, a bad id or
/// offset is invalid arguments.
pub(super) fn read_failure(e: ReadError) -> CallError {
    match e {
        ReadError::NotOwner { .. } => super::access::denied(e.to_string()),
        other => CallError::new(ErrorCode::InvalidArguments, other.to_string()),
    }
}

/// A failed export as the caller's error: as a read's; a folder that cannot be
/// written is the tool's error, a part size that cannot be used invalid arguments.
pub(super) fn export_failure(e: ExportError) -> CallError {
    match e {
        ExportError::Read(read) => read_failure(read),
        ExportError::Write { .. } => CallError::new(ErrorCode::ToolError, e.to_string()),
        other => CallError::new(ErrorCode::InvalidArguments, other.to_string()),
    }
}

async fn blocking<T: Send + 'static>(
    job: impl FnOnce() -> Result<T, CallError> + Send + 'static,
) -> Result<T, CallError> {
    tokio::task::spawn_blocking(job).await.map_err(|e| {
        CallError::new(
            ErrorCode::ServiceUnavailable,
            format!("the storage work stopped: {e}"),
        )
    })?
}

/// The index row of `record`, kept for `service` (none without an output id).
pub(crate) fn entry_of(service: &str, record: &Retained) -> Option<ResultEntry> {
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

/// The registry's `results` table as the results store's index: the retention writer
/// reports the results made durable by each sync, recorded in one transaction.
pub(crate) struct RegistryIndex(pub(crate) Arc<Registry>);

impl crate::results::ResultIndex for RegistryIndex {
    fn index(&self, batch: &[(String, Retained)]) {
        let entries: Vec<ResultEntry> = batch
            .iter()
            .filter_map(|(service, record)| entry_of(service, record))
            .collect();
        if let Err(e) = self.0.index_results(&entries) {
            tracing::warn!("cannot index {} retained results: {e}", entries.len());
        }
    }
}
