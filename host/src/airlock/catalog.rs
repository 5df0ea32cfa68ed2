//! [`Catalog`]: the tools Airlock offers, by qualified name — every one, the ones an
//! agent may use, a ranked search, the instructions a model gets about its services,
//! and, for a name the catalog does not hold, the failed service it would belong to.

use std::sync::Arc;

use super::access::Access;
use super::services::Services;
pub use crate::catalog::CatalogTool;
use crate::catalog::Cataloger;
use crate::config::PluginRef;
use crate::plugin::{PluginRuntime, ServiceInfo, Stage, StageInstance};
use crate::registry::Registry;

/// The catalog as the clients of the library see it.
pub struct Catalog {
    cataloger: Arc<Cataloger>,
    services: Arc<Services>,
    access: Arc<Access>,
    registry: Arc<Registry>,
    runtime: Arc<PluginRuntime>,
    /// The bundled naming plugin, bound once a failed service's namespace is needed.
    default_naming: tokio::sync::OnceCell<Option<Arc<StageInstance>>>,
}

impl Catalog {
    pub(crate) fn new(
        cataloger: Arc<Cataloger>,
        services: Arc<Services>,
        access: Arc<Access>,
        registry: Arc<Registry>,
        runtime: Arc<PluginRuntime>,
    ) -> Catalog {
        Catalog {
            cataloger,
            services,
            access,
            registry,
            runtime,
            default_naming: tokio::sync::OnceCell::new(),
        }
    }

    /// Every tool in the catalog, by qualified name.
    ///
    /// ```no_run
    /// # fn run(airlock: &airlock_host::Airlock) {
    /// for tool in airlock.catalog().tools() {
    ///     println!("{} -> {} / {}", tool.name, tool.service, tool.raw_name);
    /// }
    /// # }
    /// ```
    pub fn tools(&self) -> Vec<CatalogTool> {
        self.cataloger.read().tools().cloned().collect()
    }

    /// The tool named `name`, if the catalog has it.
    pub fn get(&self, name: &str) -> Option<CatalogTool> {
        self.cataloger.read().get(name).cloned()
    }

    /// Tools matching `query`, best first (see [`crate::catalog::ToolIndex::search`]).
    pub fn search(&self, query: &str) -> Vec<CatalogTool> {
        self.cataloger
            .read()
            .search(query)
            .into_iter()
            .cloned()
            .collect()
    }

    /// Lists, through `agent`'s own session, the tools of the services that act as the
    /// calling user (`auth = { type = "token_exchange" }`) and are not named yet: such a
    /// service cannot be listed at start, before any user signed in. Call it before
    /// [`Catalog::tools_for`] for an agent that presented an access token
    /// ([`crate::Agents::set_access_token`]); it does nothing once they are named.
    pub async fn learn_caller_services(&self, agent: &str) {
        let may_use = |service: &str| self.access.may_use(agent, service, "tools/list");
        self.services.catalog_for_caller(agent, may_use).await;
    }

    /// The tools `agent` may see: every tool of an enabled service in open mode, else
    /// those of granted services.
    pub fn tools_for(&self, agent: &str) -> Vec<CatalogTool> {
        let granted = self.access.granted_services(agent);
        self.tools()
            .into_iter()
            .filter(|t| self.services.get(&t.service).is_some_and(|s| s.enabled()))
            .filter(|t| granted.as_ref().is_none_or(|g| g.contains(&t.service)))
            .collect()
    }

    /// The instructions an agent's model gets about its services: each service the agent
    /// may use, by name (and label), with the first sentence of its description.
    ///
    /// ```no_run
    /// # fn run(airlock: &airlock_host::Airlock) {
    /// println!("{}", airlock.catalog().instructions_for("agent-7"));
    /// # }
    /// ```
    pub fn instructions_for(&self, agent: &str) -> String {
        let mut lines = Vec::new();
        for (name, service) in &self.services.all() {
            let usable = service.enabled()
                && service.pipeline.is_some()
                && self.access.may_use(agent, name, "instructions");
            if !usable {
                continue;
            }
            let mut line = format!("- {name}");
            if let Some(label) = service.config.label.as_deref().filter(|l| *l != name) {
                line.push_str(&format!(" ({label})"));
            }
            if let Some(first) = service
                .config
                .description
                .as_deref()
                .map(first_sentence)
                .filter(|s| !s.is_empty())
            {
                line.push_str(": ");
                line.push_str(&first);
            }
            lines.push(line);
        }
        if lines.is_empty() {
            return "No MCP services are available to this agent.".to_string();
        }
        format!(
            "MCP services available through Airlock:\n{}",
            lines.join("\n")
        )
    }

    /// A catalog name close to `name`, to suggest when `name` is unknown.
    pub fn suggestion(&self, name: &str) -> Option<String> {
        self.search(&name.replace("__", " ").replace('_', " "))
            .into_iter()
            .next()
            .map(|t| t.name)
    }

    /// The failed service a tool name outside the catalog belongs to, with why it failed:
    /// a service whose namespace prefixes the name. The namespace is the one frozen for
    /// the service, or, for a service never named, the one the bundled naming plugin
    /// gives it.
    pub async fn failed_owner(&self, tool: &str) -> Option<(String, String)> {
        for name in self.services.names() {
            let Some(reason) = self.services.failure(&name) else {
                continue;
            };
            let namespace = match self.registry.namespace(&name).ok().flatten() {
                Some(frozen) => Some(frozen),
                None => self.default_namespace(&name).await,
            };
            if namespace.is_some_and(|ns| tool.starts_with(&format!("{ns}__"))) {
                return Some((name, reason));
            }
        }
        None
    }

    /// The namespace the bundled naming plugin gives `service` when nothing is taken.
    async fn default_namespace(&self, service: &str) -> Option<String> {
        let runtime = self.runtime.clone();
        let stage = self
            .default_naming
            .get_or_init(|| async move {
                // Loading and instantiating block: off the async threads.
                let bound = tokio::task::spawn_blocking(move || {
                    let standard = PluginRef::Builtin("standard".into());
                    runtime.load(&standard).and_then(|plugin| {
                        runtime.bind(plugin, Stage::Naming, "(catalog)", &serde_json::json!({}))
                    })
                })
                .await;
                match bound {
                    Ok(Ok(stage)) => Some(stage),
                    Ok(Err(e)) => {
                        tracing::warn!("cannot bind the bundled naming plugin: {e}");
                        None
                    }
                    Err(e) => {
                        tracing::warn!("binding the bundled naming plugin stopped: {e}");
                        None
                    }
                }
            })
            .await
            .clone()?;
        let info = ServiceInfo {
            id: service.to_string(),
            label: None,
            description: None,
        };
        crate::plugin::run_namespace(&stage, info, Vec::new())
            .await
            .ok()
    }
}

/// The first sentence of `text` (up to the first `. `, `! `, `? ` or line break), at most
/// 200 characters.
fn first_sentence(text: &str) -> String {
    let text = text.trim();
    let mut end = text.len();
    for (i, c) in text.char_indices() {
        if c == '\n' {
            end = i;
            break;
        }
        if matches!(c, '.' | '!' | '?')
            && text[i + c.len_utf8()..]
                .chars()
                .next()
                .is_none_or(char::is_whitespace)
        {
            end = i + c.len_utf8();
            break;
        }
    }
    let sentence = text[..end].trim();
    match sentence.char_indices().nth(200) {
        Some((cut, _)) => format!("{}…", &sentence[..cut]),
        None => sentence.to_string(),
    }
}
