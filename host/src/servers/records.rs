//! What the offline commands read from the registry about services, through
//! [`Servers`]: a service's tested catalog, and the import previews `airlock import`
//! saves and `--apply` checks against.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{Servers, ServersError, invalid};
use crate::registry::{ImportPreview, StoredCatalog};

/// How long an import preview stays valid (10 minutes).
pub const PREVIEW_TTL_SECS: i64 = 600;

/// A service's tested catalog, as `airlock servers show` reports it.
#[derive(Debug)]
pub enum TestedCatalog {
    /// Tested for the service's current launch.
    Current(StoredCatalog),
    /// Tested only for an earlier launch (the definition changed since).
    Stale,
    /// Never tested.
    Untested,
}

impl Servers {
    /// The tested catalog of `service` for the launch with `launch_digest`, or whether
    /// an older one exists (`None`: the service is disabled or unknown, so no launch is
    /// current).
    pub fn tested_catalog(
        &self,
        service: &str,
        launch_digest: Option<&str>,
    ) -> Result<TestedCatalog, ServersError> {
        if let Some(digest) = launch_digest
            && let Some(current) = self.registry.catalog(service, digest)?
        {
            return Ok(TestedCatalog::Current(current));
        }
        Ok(match self.registry.has_catalog(service)? {
            true => TestedCatalog::Stale,
            false => TestedCatalog::Untested,
        })
    }

    /// Saves an import preview: the request it answered and each candidate's digest.
    pub fn save_import_preview(
        &self,
        request: &Value,
        entries: &BTreeMap<String, String>,
    ) -> Result<(), ServersError> {
        self.registry.save_import_preview(request, entries)?;
        Ok(())
    }

    /// The newest import preview, if it is younger than [`PREVIEW_TTL_SECS`] and was
    /// made with the same `request`; otherwise an error that says what to run.
    pub fn import_preview(&self, request: &Value) -> Result<ImportPreview, ServersError> {
        let preview = self.registry.latest_import_preview()?.ok_or_else(|| {
            invalid("no import preview: run `airlock import` first, check the list, then --apply")
        })?;
        let age = self.registry.now()? - preview.created_at;
        if age > PREVIEW_TTL_SECS {
            return Err(invalid(format!(
                "the import preview expired ({} minutes old; previews last 10): run `airlock import` again",
                age / 60
            )));
        }
        if &preview.request != request {
            return Err(invalid(format!(
                "the last preview was made with other options ({}); run `airlock import` with the same --from and --workspace first",
                preview.request
            )));
        }
        Ok(preview)
    }
}
