//! The first stage: a qualified tool name to the catalog entry, its service and that
//! service's plugins. A name the catalog does not hold is `service_unavailable` when it
//! belongs to a failed service (saying why), else `unknown_tool` with the nearest name.

use std::sync::Arc;

use crate::airlock::catalog::Catalog;
use crate::airlock::services::{Service, Services};
use crate::catalog::CatalogTool;
use crate::error::{CallError, ErrorCode};
use crate::plugin::ServicePipeline;

/// A tool found: what the rest of the call runs against.
pub(super) struct Resolved {
    /// The catalog entry (qualified and raw names, annotations).
    pub(super) tool: CatalogTool,
    /// The service that runs it.
    pub(super) service: Arc<Service>,
    /// The service's plugins.
    pub(super) pipeline: Arc<ServicePipeline>,
}

/// Looks tools up.
pub(super) struct Resolve {
    pub(super) catalog: Arc<Catalog>,
    pub(super) services: Arc<Services>,
}

impl Resolve {
    /// Finds `name`.
    pub(super) async fn tool(&self, name: &str) -> Result<Resolved, CallError> {
        let Some(tool) = self.catalog.get(name) else {
            return Err(self.not_found(name).await);
        };
        // A tool whose service left since it was looked up (a reconcile raced the call)
        // is as unavailable as the service.
        let unavailable = || {
            CallError::new(
                ErrorCode::ServiceUnavailable,
                format!("service \"{}\" is unavailable", tool.service),
            )
        };
        let service = self.services.get(&tool.service).ok_or_else(unavailable)?;
        let pipeline = service.pipeline.clone().ok_or_else(unavailable)?;
        Ok(Resolved {
            tool,
            service,
            pipeline,
        })
    }

    /// Why `name` is not in the catalog.
    async fn not_found(&self, name: &str) -> CallError {
        if let Some((service, reason)) = self.catalog.failed_owner(name).await {
            return CallError::new(
                ErrorCode::ServiceUnavailable,
                format!("service \"{service}\" is unavailable: {reason}"),
            );
        }
        let hint = self
            .catalog
            .suggestion(name)
            .map(|near| format!("; did you mean \"{near}\"?"))
            .unwrap_or_default();
        // The name is the caller's, but what leaves passes the egress rule: a name
        // holding a known secret comes back scrubbed.
        let message = format!("no tool named \"{name}\"{hint}");
        CallError::new(
            ErrorCode::UnknownTool,
            crate::secrets::scrub_log(&message).into_owned(),
        )
    }
}
