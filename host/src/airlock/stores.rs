//! [`Stores`]: what an Airlock keeps — its registry (grants, remembered approvals) and
//! its retained outputs — opened without starting it, for tools that read or change
//! them while no Airlock runs, or beside a running one: the CLI's `airlock output` and
//! `airlock grants`, and the gateway's token book. Each store opens when first used, so
//! reading grants never connects to the results store. Every method blocks (files,
//! SQLite, PostgreSQL, S3): call them off async threads.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use super::outputs::{export_failure, read_failure};
use super::services::registry_failure;
use super::start::{StartError, open_results};
use crate::config::Storage;
use crate::error::{CallError, ErrorCode};
use crate::registry::{ApprovalGrant, Registry};
use crate::results::{Export, Page, ResultLimits, ResultStore};
use crate::secrets::SecretStore;

/// The stores of one data directory, opened lazily.
pub struct Stores {
    data_dir: PathBuf,
    storage: Storage,
    limits: ResultLimits,
    registry: OnceLock<Arc<Registry>>,
    results: OnceLock<ResultStore>,
    /// Held while a store opens (see [`Stores::opened`]).
    opening: Mutex<()>,
}

impl Stores {
    /// The stores `storage` names for `data_dir` (which is made if missing), read with
    /// `limits`. Nothing is opened yet; the storage settings' own credentials are
    /// registered with the log scrubber now.
    pub fn new(
        data_dir: &Path,
        storage: Storage,
        limits: ResultLimits,
    ) -> Result<Stores, StartError> {
        std::fs::create_dir_all(data_dir).map_err(|e| StartError::DataDir {
            path: data_dir.to_path_buf(),
            message: e.to_string(),
        })?;
        crate::secrets::register_log_secrets(&storage.known_secrets());
        Ok(Stores {
            data_dir: data_dir.to_path_buf(),
            storage,
            limits,
            registry: OnceLock::new(),
            results: OnceLock::new(),
            opening: Mutex::new(()),
        })
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The registry, opened on first use.
    pub(crate) fn registry(&self) -> Result<&Arc<Registry>, StartError> {
        self.opened(&self.registry, || {
            Ok(Arc::new(Registry::open_at(
                &self.data_dir,
                &self.storage.registry,
            )?))
        })
    }

    /// The results store, opened on first use (its S3 key read from the secret store
    /// when the settings name one there).
    fn results(&self) -> Result<&ResultStore, StartError> {
        self.opened(&self.results, || {
            let secrets = SecretStore::open(&self.data_dir)?;
            open_results(
                &self.data_dir,
                &self.storage.results,
                &secrets,
                self.limits,
                None,
            )
        })
    }

    /// The store in `cell`, made by `open` the first time it is asked for: once, however
    /// many threads ask at once (a second results store would start a second writer
    /// thread).
    fn opened<'a, T>(
        &'a self,
        cell: &'a OnceLock<T>,
        open: impl FnOnce() -> Result<T, StartError>,
    ) -> Result<&'a T, StartError> {
        if let Some(store) = cell.get() {
            return Ok(store);
        }
        let _opening = self.opening.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(store) = cell.get() {
            return Ok(store);
        }
        let store = open()?;
        Ok(cell.get_or_init(|| store))
    }

    /// Reads a page of a retained output of `service` for `agent`: only the agent whose
    /// call produced it may read it (as [`super::Outputs::read_as`], without a running
    /// Airlock's access check).
    pub fn read_output(
        &self,
        agent: &str,
        service: &str,
        output_id: &str,
        offset: usize,
    ) -> Result<Page, CallError> {
        let page = self.limits.preview;
        self.results()
            .map_err(unavailable)?
            .read_for(agent, service, output_id, offset, page)
            .map_err(read_failure)
    }

    /// Saves a retained output of `service` (owned by `agent`) into `folder`, whole or as
    /// ordered parts of at most `part_size` bytes with an index (as
    /// [`super::Outputs::export`]).
    pub fn export_output(
        &self,
        agent: &str,
        service: &str,
        output_id: &str,
        folder: &Path,
        part_size: Option<usize>,
    ) -> Result<Export, CallError> {
        self.results()
            .map_err(unavailable)?
            .export_for(agent, service, output_id, folder, part_size)
            .map_err(export_failure)
    }

    /// Grants `service` to `agent`; false when it already held the grant.
    pub fn grant(&self, agent: &str, service: &str) -> Result<bool, CallError> {
        self.with_registry(|r| r.grant(agent, service))
    }

    /// Revokes `agent`'s grant of `service`; false when it held none.
    pub fn revoke(&self, agent: &str, service: &str) -> Result<bool, CallError> {
        self.with_registry(|r| r.revoke(agent, service))
    }

    /// The services granted to `agent`.
    pub fn grants(&self, agent: &str) -> Result<Vec<String>, CallError> {
        self.with_registry(|r| r.grants(agent))
    }

    /// The approvals a person asked to be remembered, of `agent` or of everyone.
    pub fn approvals(&self, agent: Option<&str>) -> Result<Vec<ApprovalGrant>, CallError> {
        self.with_registry(|r| r.approvals(agent))
    }

    /// Forgets remembered approval `id`; false when there was none.
    pub fn revoke_approval(&self, id: i64) -> Result<bool, CallError> {
        self.with_registry(|r| r.revoke_approval(id))
    }

    fn with_registry<T>(
        &self,
        job: impl FnOnce(&Registry) -> Result<T, crate::registry::RegistryError>,
    ) -> Result<T, CallError> {
        job(self.registry().map_err(unavailable)?).map_err(registry_failure)
    }
}

/// A store that would not open, as the error of the request that needed it.
fn unavailable(e: StartError) -> CallError {
    let code = match &e {
        StartError::Registry(r) if r.is_unavailable() => ErrorCode::RegistryUnavailable,
        _ => ErrorCode::ServiceUnavailable,
    };
    CallError::new(code, e.to_string())
}
