//! Logging to the host's `tracing` output. On native targets (tests, benchmarks) the
//! messages are discarded.

pub use crate::bindings::airlock::adapter::log::Level;

/// Writes one message to the host log.
pub fn log(level: Level, message: &str) {
    #[cfg(target_arch = "wasm32")]
    crate::bindings::airlock::adapter::log::log(level, message);
    #[cfg(not(target_arch = "wasm32"))]
    let _ = (level, message);
}

/// Logs at debug level.
pub fn debug(message: &str) {
    log(Level::Debug, message);
}

/// Logs at info level.
pub fn info(message: &str) {
    log(Level::Info, message);
}

/// Logs at warn level.
pub fn warn(message: &str) {
    log(Level::Warn, message);
}
