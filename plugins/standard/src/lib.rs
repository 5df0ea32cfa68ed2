//! The bundled `standard` plugin: all three stages with the policies of DESIGN.md.
//!
//! - naming: `mcp__{server}__{tool}` (`style = "mcp"`, default) or label namespaces
//!   `<namespace>__<tool>` (`style = "namespace"`); `description_prefix = true` prefixes
//!   descriptions with `[server] `; `style = "raw"` keeps the server's own names.
//! - content: lossless conversion, or `mode = "passthrough"` (see [`content`]).
//! - redaction: known secrets plus built-in and configured patterns (see [`redaction`]).

pub mod content;
pub mod finder;
pub mod naming;
pub mod redaction;

use airlock_guest::{Config, Plugin, Stage, export_plugin};

/// The plugin value: one stage's configured policy. One lives per instance, made once:
/// its size does not matter, and boxing would change the plugin's bytes for nothing.
#[allow(clippy::large_enum_variant)]
pub enum Standard {
    /// The naming stage.
    Naming(naming::NamingPolicy),
    /// The content stage.
    Content(content::ContentMode),
    /// The redaction stage.
    Redaction(redaction::RedactionPolicy),
}

impl Plugin for Standard {
    const NAME: &'static str = "standard";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");

    fn new(stage: Stage, config: Config) -> Result<Self, String> {
        match stage {
            Stage::Naming => naming::NamingPolicy::from_config(&config).map(Standard::Naming),
            Stage::Content => content::ContentMode::from_config(&config).map(Standard::Content),
            Stage::Redaction => {
                redaction::RedactionPolicy::from_config(&config).map(Standard::Redaction)
            }
            Stage::Policy => {
                Err("the standard plugin has no policy stage; use builtin:policy".into())
            }
        }
    }
}

impl Standard {
    fn wrong_stage(&self, wanted: &str) -> String {
        format!("standard plugin instance was initialized for another stage than {wanted}")
    }
}

export_plugin!(Standard, stages: [naming, content, redaction]);
