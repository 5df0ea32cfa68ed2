//! The catalog: every tool Airlock offers, by qualified name, with the service and raw
//! tool name a call is routed to. Names are unique across all services.

mod schema;

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::plugin::NamedTool;

/// Most tools one service may list.
pub const MAX_TOOLS_PER_SERVICE: usize = 10_000;
/// Largest `tools/list` (all pages, as JSON) accepted from one service.
pub const MAX_CATALOG_BYTES: usize = 32 << 20;

pub use schema::incompatibility;

/// One tool as a model sees it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CatalogTool {
    /// The qualified name.
    pub name: String,
    /// The service it belongs to.
    pub service: String,
    /// The server's raw tool name.
    pub raw_name: String,
    /// The description shown to the model.
    pub description: Option<String>,
    /// The input schema shown to the model.
    pub input_schema: Value,
    /// Why common model APIs would reject the input schema, if they would.
    pub incompatible: Option<String>,
}

/// Lower-cased text a tool is searched by, computed once when it is added.
#[derive(Debug)]
struct SearchKeys {
    name: String,
    ids: String,
    description: String,
}

/// Every offered tool.
#[derive(Debug, Default)]
pub struct Catalog {
    tools: BTreeMap<String, CatalogTool>,
    search_keys: BTreeMap<String, SearchKeys>,
}

impl Catalog {
    /// Adds a service's named tools. Fails (adding nothing) if a name is already used by
    /// another service.
    pub fn add_service(&mut self, service: &str, named: Vec<NamedTool>) -> Result<(), String> {
        if let Some(clash) = named.iter().find(|t| self.tools.contains_key(&t.name)) {
            let owner = &self.tools[&clash.name].service;
            return Err(format!(
                "tool name \"{}\" is already used by service \"{owner}\"",
                clash.name
            ));
        }
        for tool in named {
            self.search_keys.insert(
                tool.name.clone(),
                SearchKeys {
                    name: tool.name.to_lowercase(),
                    ids: format!(
                        "{} {}",
                        service.to_lowercase(),
                        tool.raw_name.to_lowercase()
                    ),
                    description: tool.description.as_deref().unwrap_or("").to_lowercase(),
                },
            );
            let input_schema = serde_json::from_str(&tool.input_schema)
                .unwrap_or_else(|_| serde_json::json!({"type": "object"}));
            self.tools.insert(
                tool.name.clone(),
                CatalogTool {
                    name: tool.name,
                    service: service.to_string(),
                    raw_name: tool.raw_name,
                    description: tool.description,
                    incompatible: schema::incompatibility(&input_schema),
                    input_schema,
                },
            );
        }
        Ok(())
    }

    /// Removes every tool of `service`.
    pub fn remove_service(&mut self, service: &str) {
        self.tools.retain(|_, t| t.service != service);
        let tools = &self.tools;
        self.search_keys.retain(|name, _| tools.contains_key(name));
    }

    /// The tool with qualified name `name`.
    pub fn get(&self, name: &str) -> Option<&CatalogTool> {
        self.tools.get(name)
    }

    /// Every tool, ordered by name.
    pub fn tools(&self) -> impl Iterator<Item = &CatalogTool> {
        self.tools.values()
    }

    /// Tools whose qualified name (which holds the namespace), service, raw name or
    /// description contain every word of `query` (case-insensitive), ranked: a word in
    /// the qualified name counts 3, in the service or raw name 2, in the description 1;
    /// ties go by name.
    pub fn search(&self, query: &str) -> Vec<&CatalogTool> {
        let words: Vec<String> = query.split_whitespace().map(str::to_lowercase).collect();
        let mut hits: Vec<(usize, &CatalogTool)> = self
            .tools
            .values()
            .filter_map(|t| {
                let keys = &self.search_keys[&t.name];
                let mut score = 0;
                for w in &words {
                    let w = w.as_str();
                    score += if keys.name.contains(w) {
                        3
                    } else if keys.ids.contains(w) {
                        2
                    } else if keys.description.contains(w) {
                        1
                    } else {
                        return None;
                    };
                }
                Some((score, t))
            })
            .collect();
        hits.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.name.cmp(&b.1.name)));
        hits.into_iter().map(|(_, t)| t).collect()
    }

    /// The number of tools.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether the catalog is empty.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}
