//! All `bindgen!` configuration for the plugin contracts, in one place: the current
//! contract (`airlock:adapter@0.2.0`, `wit/adapter.wit`) at the root of this module, and
//! each frozen earlier one in its own module ([`v01`]: `wit/since_v0.1.0/`).
//!
//! The host works in the current contract's types. A plugin built for a frozen contract
//! exchanges the same shapes under other type names; [`cross`] carries a value between
//! the two (through serde, since the shapes are identical by construction: a new
//! contract only adds items).

wasmtime::component::bindgen!({
    world: "adapter",
    path: "../wit",
    additional_derives: [serde::Serialize, serde::Deserialize],
});

/// Contract `airlock:adapter@0.1.0`, frozen: naming, content and redaction.
pub mod v01 {
    wasmtime::component::bindgen!({
        world: "adapter",
        path: "../wit/since_v0.1.0",
        additional_derives: [serde::Serialize, serde::Deserialize],
    });
}

pub use airlock::adapter::types::{ContentBlock, Stage, Tool, ToolResult};
pub use exports::airlock::adapter::naming::{NamedTool, ServiceInfo};
pub use exports::airlock::adapter::plugin::PluginInfo;
pub use exports::airlock::adapter::policy::{
    Call, Decision, ResultDecision, ResultVerdict, Verdict,
};
pub use exports::airlock::adapter::redaction::{Redacted, RedactionMark, Secret};

/// A value of one contract's type as the same shape in another contract's type.
pub(super) fn cross<A: serde::Serialize, B: serde::de::DeserializeOwned>(value: &A) -> B {
    let json = serde_json::to_value(value).expect("contract types always serialize");
    serde_json::from_value(json).expect("a frozen contract's shapes are the current ones")
}

impl Stage {
    /// The stage's name as written in config (`naming`, `content`, `redaction`,
    /// `policy`).
    pub fn name(self) -> &'static str {
        match self {
            Stage::Naming => "naming",
            Stage::Content => "content",
            Stage::Redaction => "redaction",
            Stage::Policy => "policy",
        }
    }
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
