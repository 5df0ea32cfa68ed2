//! The plugin runtime: wasmtime components, sandboxed and limited, and the adapter
//! pipeline (naming, content, redaction chain) built from them.
//!
//! - [`PluginRuntime`] owns the engine, the epoch ticker, the compiled-artifact cache and
//!   the loaded components (compiled once, pre-instantiated).
//! - [`StageInstance`] is one (service, stage) binding: plugin + configuration + a pool of
//!   warm instances. A trap discards the instance that trapped; the next call gets a
//!   fresh one.
//! - [`ServicePipeline`] is what a service uses: name tools, convert and redact results.
//! - [`PolicyChain`] is a service's policies: whether a call may run, whether its result
//!   may leave.
//!
//! Layer 3 (plugins). May import: `config`, `secrets`.

mod api;
mod bindings;
mod builtin;
pub mod convert;
mod error;
mod instance;
mod pipeline;
mod policy;
mod runtime;
mod state;
mod typed;
mod work;

pub use bindings::{
    Call, ContentBlock, Decision, NamedTool, PluginInfo, RedactionMark, ResultDecision,
    ResultVerdict, Secret, ServiceInfo, Stage, Tool, ToolResult, Verdict,
};
pub use builtin::{BUILTIN_PLUGINS, builtin_bytes};
pub use error::{PluginError, TrapKind};
pub use instance::StageInstance;
pub use pipeline::{
    BoundPlugin, Processed, ServicePipeline, convert as run_content, convert_now, is_valid_name,
    namespace as run_namespace, plugin_secrets, qualify as run_qualify, qualify_now,
    redact as run_redaction, redact_now,
};
pub use policy::{
    CallVerdict, PolicyChain, PolicyLink, PolicyRecord, ResultOutcome, check_call_now,
};
pub use runtime::{LoadedPlugin, PluginRuntime, SUPPORTED_CONTRACT};
pub use typed::{result_from_wit, result_into_wit};
