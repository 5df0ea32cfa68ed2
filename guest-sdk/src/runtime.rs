//! The per-instance state behind [`crate::export_plugin!`]: the plugin value built by
//! `init`, kept for the stage calls that follow.

use std::any::Any;
use std::cell::RefCell;

use crate::{Config, Plugin, Stage};

thread_local! {
    static INSTANCE: RefCell<Option<Box<dyn Any>>> = const { RefCell::new(None) };
}

/// Builds the plugin from its JSON configuration and keeps it for later calls.
pub fn init<P: Plugin>(stage: Stage, config: &str) -> Result<(), String> {
    let config = Config::parse(config)?;
    let plugin = P::new(stage, config)?;
    INSTANCE.with(|slot| *slot.borrow_mut() = Some(Box::new(plugin)));
    Ok(())
}

/// Runs `f` on the initialized plugin.
pub fn with<P: Plugin, R>(f: impl FnOnce(&P) -> Result<R, String>) -> Result<R, String> {
    INSTANCE.with(|slot| {
        let slot = slot.borrow();
        let plugin = slot
            .as_ref()
            .and_then(|p| p.downcast_ref::<P>())
            .ok_or_else(|| format!("plugin `{}` was called before `init`", P::NAME))?;
        f(plugin)
    })
}

/// The error a plugin returns for a stage it does not implement.
pub fn unsupported<P: Plugin>(stage: &str) -> String {
    format!("plugin `{}` does not implement the {stage} stage", P::NAME)
}
