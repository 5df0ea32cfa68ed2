//! Plugin failures, separating "the guest trapped" from "the guest returned an error".

use super::Stage;

/// How a guest trapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrapKind {
    /// The CPU deadline passed (epoch interruption).
    Deadline,
    /// The instance tried to grow memory past its cap.
    MemoryLimit,
    /// The WebAssembly stack cap was exhausted.
    StackOverflow,
    /// The guest panicked (or otherwise hit `unreachable`).
    Panic,
    /// Any other trap.
    Other,
}

impl std::fmt::Display for TrapKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TrapKind::Deadline => "exceeded its CPU deadline",
            TrapKind::MemoryLimit => "exceeded its memory limit",
            TrapKind::StackOverflow => "overflowed its stack",
            TrapKind::Panic => "panicked",
            TrapKind::Other => "trapped",
        })
    }
}

/// A plugin failed to load or to serve a call.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum PluginError {
    /// The plugin could not be found, read or compiled.
    #[error("plugin {plugin}: {message}")]
    Load {
        /// The plugin reference.
        plugin: String,
        /// What went wrong.
        message: String,
    },
    /// The component imports something the host does not offer.
    #[error(
        "plugin {plugin} imports `{import}`, which Airlock does not offer (plugins may import only airlock:adapter/log and WASI 0.2 interfaces)"
    )]
    ForbiddenImport {
        /// The plugin reference.
        plugin: String,
        /// The import's name.
        import: String,
    },
    /// The component was built against a contract version the host does not support.
    #[error(
        "plugin {plugin} was built for airlock:adapter@{found}; this host supports airlock:adapter@{supported}"
    )]
    UnsupportedContract {
        /// The plugin reference.
        plugin: String,
        /// The version found in the component.
        found: String,
        /// The versions this host supports.
        supported: String,
    },
    /// The plugin does not implement the stage it was configured for.
    #[error("plugin {plugin} does not provide the {stage} stage (it provides: {provides})")]
    MissingStage {
        /// The plugin reference.
        plugin: String,
        /// The stage wanted.
        stage: Stage,
        /// The stages it does provide.
        provides: String,
    },
    /// The plugin rejected its configuration.
    #[error(
        "plugin {plugin} rejected its {stage} configuration for service \"{service}\": {message}"
    )]
    Config {
        /// The plugin reference.
        plugin: String,
        /// The stage.
        stage: Stage,
        /// The service.
        service: String,
        /// The plugin's message.
        message: String,
    },
    /// The guest trapped; the instance was discarded.
    #[error("plugin {plugin} {kind} in the {stage} stage: {detail}")]
    Trap {
        /// The plugin reference.
        plugin: String,
        /// The stage.
        stage: Stage,
        /// How it trapped.
        kind: TrapKind,
        /// The trap message.
        detail: String,
    },
    /// The guest trapped in `describe`, when it was loaded (before any stage ran).
    #[error("plugin {plugin} {kind} while describing itself at load: {detail}")]
    DescribeTrap {
        /// The plugin reference.
        plugin: String,
        /// How it trapped.
        kind: TrapKind,
        /// The trap message.
        detail: String,
    },
    /// The guest returned an error value.
    #[error("plugin {plugin} failed in the {stage} stage: {message}")]
    Failed {
        /// The plugin reference.
        plugin: String,
        /// The stage.
        stage: Stage,
        /// The guest's message.
        message: String,
    },
    /// The guest returned something that breaks the contract (invalid or duplicate
    /// names, for example).
    #[error("plugin {plugin} broke the {stage} contract: {message}")]
    Contract {
        /// The plugin reference.
        plugin: String,
        /// The stage.
        stage: Stage,
        /// What was wrong.
        message: String,
    },
}
