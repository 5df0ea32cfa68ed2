//! How plugin work runs beside the async runtime: [`blocking`] takes it off the
//! runtime's workers (a plugin runs up to its deadline), and [`approx_size`] says how
//! much of it there is, for the time and memory a stage may spend. The pipeline and the
//! policy chain both use these; neither owns them.

use super::{PluginError, ToolResult};

/// Roughly how many bytes a plugin has to work through for `result`.
pub(super) fn approx_size(result: &ToolResult) -> usize {
    use super::ContentBlock;
    use super::bindings::airlock::adapter::types::ResourceContents;
    let blocks: usize = result
        .content
        .iter()
        .map(|b| match b {
            ContentBlock::Text(t) => t.text.len(),
            ContentBlock::Image(m) | ContentBlock::Audio(m) => m.data.len(),
            ContentBlock::ResourceLink(l) => l.uri.len() + l.name.len(),
            ContentBlock::Embedded(r) => match &r.contents {
                ResourceContents::Text(t) => t.text.len(),
                ResourceContents::Blob(b) => b.blob.len(),
            },
            ContentBlock::Unknown(u) => u.raw.len(),
        })
        .sum();
    blocks + result.structured_content.as_ref().map_or(0, String::len)
}

/// Runs plugin work `f` where it may block (a plugin runs up to its deadline, and
/// wasmtime-wasi's synchronous stdio blocks on the runtime): on a multi-thread runtime,
/// in place on this thread after handing its worker duties to another thread
/// (`block_in_place`: no hop to a second thread and back, and the other tasks keep
/// running); on a current-thread runtime, on the blocking pool. A panic in `f` becomes
/// an error either way.
pub(super) async fn blocking<R: Send + 'static>(
    f: impl FnOnce() -> Result<R, PluginError> + Send + 'static,
) -> Result<R, PluginError> {
    let failed = |why: String| PluginError::Load {
        plugin: "(runtime)".into(),
        message: format!("plugin task failed: {why}"),
    };
    let multi_thread = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if multi_thread {
        return tokio::task::block_in_place(|| {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        })
        .unwrap_or_else(|panic| {
            let why = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into());
            Err(failed(why))
        });
    }
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r,
        Err(e) => Err(failed(e.to_string())),
    }
}
