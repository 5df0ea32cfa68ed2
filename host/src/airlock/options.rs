//! How an [`crate::Airlock`] runs: [`AirlockOptions`] and the defaults it starts from.

use std::path::PathBuf;
use std::sync::Arc;

use super::access::{AccessOptions, Approver};
use crate::results::ResultLimits;
pub use crate::results::{COMPACT_PREVIEW, DEFAULT_PREVIEW};

/// The agent used when the caller names none.
pub const DEFAULT_AGENT: &str = "default";
/// Default live-session limit.
pub const DEFAULT_MAX_SESSIONS: usize = 64;

/// How to run an [`crate::Airlock`].
#[derive(Clone)]
pub struct AirlockOptions {
    /// Where Airlock keeps its state (created if missing).
    pub data_dir: PathBuf,
    /// Folders offered as roots to agents that set none (absolute paths). The first is
    /// also the working directory of servers configured without `cwd`.
    pub roots: Vec<String>,
    /// Retention and preview limits.
    pub result_limits: ResultLimits,
    /// Most live sessions at once; a new connection past it is refused.
    pub max_sessions: usize,
    /// Grants and the embedder's access callback.
    pub access: AccessOptions,
    /// Where compiled plugins are cached, when not `<data_dir>/plugin-cache` (a folder
    /// several data directories may share).
    pub plugin_cache: Option<PathBuf>,
    /// Answers the questions policies ask a person; without one, such calls are denied.
    pub approver: Option<Arc<dyn Approver>>,
}

impl std::fmt::Debug for AirlockOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AirlockOptions")
            .field("data_dir", &self.data_dir)
            .field("roots", &self.roots)
            .field("result_limits", &self.result_limits)
            .field("max_sessions", &self.max_sessions)
            .field("access", &self.access)
            .field("plugin_cache", &self.plugin_cache)
            .field("approver", &self.approver.is_some())
            .finish()
    }
}

impl AirlockOptions {
    /// Options with default limits and no roots.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        AirlockOptions {
            data_dir: data_dir.into(),
            roots: Vec::new(),
            result_limits: ResultLimits::default(),
            max_sessions: DEFAULT_MAX_SESSIONS,
            access: AccessOptions::default(),
            plugin_cache: None,
            approver: None,
        }
    }
}
