//! Naming policy: `mcp__{server}__{tool}`, label namespaces, or the server's own
//! (sanitized) names for a transparent gateway.

use airlock_guest::{Config, NamedTool, Naming, ServiceInfo, Tool, names};

use crate::Standard;

/// The longest label namespace.
pub const MAX_LABEL_NAMESPACE: usize = 24;

/// How the namespace is derived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// `mcp__{server}`.
    Mcp,
    /// The service label in lower case, at most 24 characters.
    Namespace,
    /// The server's own tool names, sanitized (a namespace is still frozen for the
    /// service, but names do not carry it). Names that collide with another service's
    /// get a hash suffix from the host.
    Raw,
}

/// The configured naming policy.
#[derive(Debug, Clone)]
pub struct NamingPolicy {
    /// Namespace style.
    pub style: Style,
    /// Whether descriptions get a `[server] ` prefix.
    pub description_prefix: bool,
}

impl NamingPolicy {
    /// Reads `style` and `description_prefix`.
    pub fn from_config(config: &Config) -> Result<Self, String> {
        config.deny_unknown(&["style", "description_prefix"])?;
        let style = match config.string("style")?.as_deref() {
            None | Some("mcp") => Style::Mcp,
            Some("namespace") => Style::Namespace,
            Some("raw") => Style::Raw,
            Some(other) => {
                return Err(format!(
                    "`style` must be \"mcp\", \"namespace\" or \"raw\", got \"{other}\""
                ));
            }
        };
        Ok(NamingPolicy {
            style,
            description_prefix: config.bool("description_prefix")?.unwrap_or(false),
        })
    }

    /// The namespace for `service`, unique among `taken`.
    pub fn namespace(&self, service: &ServiceInfo, taken: &[String]) -> String {
        match self.style {
            Style::Mcp | Style::Raw => names::unique_namespace(
                &format!("mcp__{}", names::sanitize(&service.id)),
                taken,
                names::MAX_NAME_LEN,
            ),
            Style::Namespace => {
                let label = service.label.as_deref().unwrap_or(&service.id);
                let base = names::label_namespace(label, &service.id, MAX_LABEL_NAMESPACE);
                names::unique_namespace(&base, taken, MAX_LABEL_NAMESPACE)
            }
        }
    }

    /// Qualified names for every tool.
    pub fn qualify(
        &self,
        service: &ServiceInfo,
        namespace: &str,
        tools: Vec<Tool>,
    ) -> Vec<NamedTool> {
        let prefix = self.description_prefix.then_some(service.id.as_str());
        let namespace = if self.style == Style::Raw {
            ""
        } else {
            namespace
        };
        names::qualify_tools(namespace, tools, prefix)
    }
}

impl Naming for Standard {
    fn namespace(&self, service: &ServiceInfo, taken: &[String]) -> Result<String, String> {
        match self {
            Standard::Naming(p) => Ok(p.namespace(service, taken)),
            _ => Err(self.wrong_stage("naming")),
        }
    }

    fn qualify(
        &self,
        service: &ServiceInfo,
        namespace: &str,
        tools: Vec<Tool>,
    ) -> Result<Vec<NamedTool>, String> {
        match self {
            Standard::Naming(p) => Ok(p.qualify(service, namespace, tools)),
            _ => Err(self.wrong_stage("naming")),
        }
    }
}
