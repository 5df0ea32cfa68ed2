//! All `bindgen!` configuration for the plugin contract, in one place.

wasmtime::component::bindgen!({
    world: "adapter",
    path: "../wit",
});

pub use airlock::adapter::types::{ContentBlock, Stage, Tool, ToolResult};
pub use exports::airlock::adapter::naming::{NamedTool, ServiceInfo};
pub use exports::airlock::adapter::plugin::PluginInfo;
pub use exports::airlock::adapter::redaction::{RedactionMark, Secret};

impl Stage {
    /// The stage's name as written in config (`naming`, `content`, `redaction`).
    pub fn name(self) -> &'static str {
        match self {
            Stage::Naming => "naming",
            Stage::Content => "content",
            Stage::Redaction => "redaction",
        }
    }
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
