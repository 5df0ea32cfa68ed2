//! Naming a service's tools into the catalog: the listed tools pass the limits, the
//! service's naming plugin chooses its namespace once (then frozen in the registry) and
//! qualifies every name, and the service's entries in the catalog are replaced.

use std::sync::{Arc, RwLock, RwLockReadGuard};

use serde_json::Value;

use super::{MAX_CATALOG_BYTES, MAX_TOOLS_PER_SERVICE, ToolIndex};
use crate::plugin::{NamedTool, PluginError, ServiceInfo, ServicePipeline, convert};
use crate::registry::{Registry, RegistryError};

/// Why a service's tools could not be cataloged.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The server lists more than the catalog takes.
    #[error(
        "the server lists {tools} tools ({bytes} bytes); the limit is {MAX_TOOLS_PER_SERVICE} tools and {MAX_CATALOG_BYTES} bytes"
    )]
    TooLarge {
        /// Tools listed.
        tools: usize,
        /// Their size as JSON.
        bytes: usize,
    },
    /// The naming plugin failed.
    #[error(transparent)]
    Plugin(#[from] PluginError),
    /// The registry (frozen namespaces) failed.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// A qualified name is already used by another service.
    #[error("tool name \"{name}\" is already used by service \"{owner}\"")]
    Clash {
        /// The name.
        name: String,
        /// The service holding it.
        owner: String,
    },
}

/// Refuses a tool list over the catalog limits.
pub fn check_limits(listed: &[Value]) -> Result<(), CatalogError> {
    let bytes: usize = listed.iter().map(|t| t.to_string().len()).sum();
    if listed.len() > MAX_TOOLS_PER_SERVICE || bytes > MAX_CATALOG_BYTES {
        return Err(CatalogError::TooLarge {
            tools: listed.len(),
            bytes,
        });
    }
    Ok(())
}

/// The catalog and what naming into it needs. Shared (`Arc`) between the facade and
/// the listeners that refresh a service's tools when its server says they changed.
pub struct Cataloger {
    registry: Arc<Registry>,
    catalog: RwLock<ToolIndex>,
}

impl Cataloger {
    /// An empty catalog whose namespaces are frozen in `registry`.
    pub fn new(registry: Arc<Registry>) -> Self {
        Cataloger {
            registry,
            catalog: RwLock::new(ToolIndex::default()),
        }
    }

    /// The catalog, to read.
    pub fn read(&self) -> RwLockReadGuard<'_, ToolIndex> {
        self.catalog.read().expect("catalog lock poisoned")
    }

    /// Takes every tool of `service` out of the catalog (the service was removed or
    /// redefined).
    pub fn forget(&self, service: &str) {
        self.catalog
            .write()
            .expect("catalog lock poisoned")
            .remove_service(service);
    }

    /// Names `listed` (MCP tool JSON) with `pipeline`'s naming plugin under the service's
    /// frozen namespace, and replaces the service's catalog entries. Returns the tool
    /// count.
    pub async fn name_tools(
        &self,
        info: ServiceInfo,
        pipeline: &ServicePipeline,
        listed: &[Value],
    ) -> Result<usize, CatalogError> {
        check_limits(listed)?;
        let service = info.id.clone();
        let tools: Vec<_> = listed
            .iter()
            .filter_map(|t| {
                let tool = convert::tool_from_mcp(t);
                if tool.is_none() {
                    tracing::warn!(service = %service, "skipping a listed tool without a name");
                }
                tool
            })
            .collect();
        let namespace = match self.registry.namespace(&service)? {
            Some(ns) => ns,
            None => {
                let taken = self.registry.namespaces_except(&service)?;
                let chosen = pipeline.namespace(info.clone(), taken).await?;
                self.registry.freeze_namespace(&service, &chosen)?
            }
        };
        let mut named = pipeline.qualify(info, namespace, tools).await?;
        let count = named.len();
        let mut catalog = self.catalog.write().expect("catalog lock poisoned");
        catalog.remove_service(&service);
        settle_clashes(&catalog, &service, &mut named);
        catalog.add_service(&service, named)?;
        catalog.attach_details(&service, listed);
        Ok(count)
    }
}

/// Gives every name another service already holds a short hash suffix (of this
/// service's name and the raw tool name), so names stay unique across services even
/// when a naming style does not namespace them (`style = "raw"`). The first service to
/// hold a name keeps it.
fn settle_clashes(catalog: &ToolIndex, service: &str, named: &mut [NamedTool]) {
    let mut ours: std::collections::HashSet<String> =
        named.iter().map(|t| t.name.clone()).collect();
    for tool in named.iter_mut() {
        if catalog.get(&tool.name).is_none() {
            continue;
        }
        let digest = crate::digest::sha256(format!("{service}/{}", tool.raw_name).as_bytes());
        let hex = &digest["sha256:".len()..];
        for len in (8..=32).step_by(4) {
            let suffix = format!("_{}", &hex[..len]);
            let keep = tool.name.len().min(64 - suffix.len());
            let candidate = format!("{}{suffix}", &tool.name[..keep]);
            if catalog.get(&candidate).is_none() && !ours.contains(&candidate) {
                ours.insert(candidate.clone());
                tool.name = candidate;
                break;
            }
        }
    }
}
