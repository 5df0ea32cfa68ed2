//! The catalog: every tool Airlock offers, by qualified name, with the service and raw
//! tool name a call is routed to. Names are unique across all services.
//!
//! Layer 5 (catalog). May import: `plugin`, `registry`, `digest`.

mod naming;
mod schema;
mod search;

pub use naming::{CatalogError, Cataloger, check_limits};

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::plugin::NamedTool;
use search::SearchIndex;

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
    /// The server's title for the tool.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The server's annotations (`readOnlyHint`, `destructiveHint`…).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
    /// The server's output schema.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
}

/// Every offered tool.
#[derive(Debug, Default)]
pub struct ToolIndex {
    tools: BTreeMap<String, CatalogTool>,
    search: SearchIndex,
}

impl ToolIndex {
    /// Adds a service's named tools. Fails (adding nothing) if a name is already used by
    /// another service.
    pub fn add_service(
        &mut self,
        service: &str,
        named: Vec<NamedTool>,
    ) -> Result<(), CatalogError> {
        if let Some(clash) = named.iter().find(|t| self.tools.contains_key(&t.name)) {
            return Err(CatalogError::Clash {
                name: clash.name.clone(),
                owner: self.tools[&clash.name].service.clone(),
            });
        }
        for tool in named {
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
                    title: None,
                    annotations: None,
                    output_schema: None,
                },
            );
        }
        self.reindex();
        Ok(())
    }

    /// Rebuilds the search index after the tools changed.
    fn reindex(&mut self) {
        self.search = SearchIndex::build(self.tools.values().map(|t| {
            (
                t.name.as_str(),
                t.service.as_str(),
                t.raw_name.as_str(),
                t.description.as_deref().unwrap_or(""),
            )
        }));
    }

    /// Copies the title, annotations and output schema of each of `service`'s tools from
    /// the server's listing (`listed`, MCP tool JSON), matched by raw name.
    pub fn attach_details(&mut self, service: &str, listed: &[Value]) {
        let by_raw: std::collections::HashMap<&str, &Value> = listed
            .iter()
            .filter_map(|t| Some((t.get("name")?.as_str()?, t)))
            .collect();
        for tool in self.tools.values_mut().filter(|t| t.service == service) {
            let Some(raw) = by_raw.get(tool.raw_name.as_str()) else {
                continue;
            };
            let field = |k: &str| raw.get(k).filter(|v| !v.is_null()).cloned();
            tool.title = field("title").and_then(|t| t.as_str().map(str::to_string));
            tool.annotations = field("annotations");
            tool.output_schema = field("outputSchema");
        }
    }

    /// Removes every tool of `service`.
    pub fn remove_service(&mut self, service: &str) {
        self.tools.retain(|_, t| t.service != service);
        self.reindex();
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
        // The index holds the tools in the map's order.
        let mut hits: Vec<(u32, &CatalogTool)> = self
            .search
            .scores(query)
            .into_iter()
            .zip(self.tools.values())
            .filter_map(|(score, tool)| Some((score?, tool)))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn named(name: &str, raw: &str, description: &str) -> NamedTool {
        NamedTool {
            raw_name: raw.into(),
            name: name.into(),
            description: Some(description.into()),
            input_schema: "{}".into(),
        }
    }

    #[test]
    fn search_ranks_name_matches_first_and_needs_every_word() {
        let mut catalog = ToolIndex::default();
        catalog
            .add_service(
                "rea",
                vec![
                    named("rea__binary_session", "binary_session", "Opens a binary"),
                    named("rea__close", "close", "Closes the binary session"),
                ],
            )
            .unwrap();
        catalog
            .add_service(
                "fs",
                vec![named("mcp__fs__read_file", "read_file", "Reads a file")],
            )
            .unwrap();
        let hits: Vec<&str> = catalog
            .search("rea binary session")
            .iter()
            .map(|t| t.name.as_str())
            .collect();
        assert_eq!(hits, ["rea__binary_session", "rea__close"]);
        assert!(
            catalog.search("rea backup").is_empty(),
            "every word must match"
        );
        assert!(
            catalog
                .add_service("other", vec![named("rea__close", "x", "")])
                .is_err(),
            "names are unique across services"
        );
        catalog.remove_service("rea");
        assert_eq!(catalog.search("file").len(), 1);
        assert_eq!(catalog.search("session").len(), 0);
    }
}
