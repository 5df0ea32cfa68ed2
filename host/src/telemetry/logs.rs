//! JSON log lines that join traces: each line written inside a recorded span starts
//! with its `trace_id` and `span_id`, the ids the collector shows for that span.

use std::sync::{Arc, OnceLock};

use tracing::Subscriber;
use tracing::dispatcher::WeakDispatch;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// Where [`WithTraceIds`] finds the subscriber it belongs to: set once the subscriber
/// is built (`dispatch.downgrade()`), since a formatter cannot reach its own dispatcher
/// while it formats.
pub type DispatchSlot = Arc<OnceLock<WeakDispatch>>;

/// A JSON event format with `trace_id` and `span_id` first, when the event happened
/// inside an exported span.
pub struct WithTraceIds<F> {
    inner: F,
    dispatch: DispatchSlot,
}

impl<F> WithTraceIds<F> {
    /// Wraps `inner` (a JSON format); fill the returned slot once the subscriber is a
    /// `Dispatch`.
    pub fn new(inner: F) -> (Self, DispatchSlot) {
        let dispatch = DispatchSlot::default();
        (
            WithTraceIds {
                inner,
                dispatch: dispatch.clone(),
            },
            dispatch,
        )
    }

    fn ids(&self, span: Option<&tracing::span::Id>) -> Option<(String, String)> {
        let dispatch = self.dispatch.get()?.upgrade()?;
        super::spans::ids_in(&dispatch, span?)
    }
}

impl<S, N, F> FormatEvent<S, N> for WithTraceIds<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        let current = ctx.current_span();
        let span = event.parent().or(current.id());
        let Some((trace_id, span_id)) = self.ids(span) else {
            return self.inner.format_event(ctx, writer, event);
        };
        let mut line = String::new();
        self.inner
            .format_event(ctx, Writer::new(&mut line), event)?;
        match line.strip_prefix('{') {
            Some(rest) => write!(
                writer,
                "{{\"trace_id\":\"{trace_id}\",\"span_id\":\"{span_id}\",{rest}"
            ),
            None => writer.write_str(&line),
        }
    }
}
