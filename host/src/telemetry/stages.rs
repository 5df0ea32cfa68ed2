//! A call's stages, recorded as child spans of the call without `tracing` spans of their
//! own: a [`StageSpan`] is a [`Recording`] made from its call's (found once per call, a
//! [`Parent`]) and pushed to the export queue as the stage ends. Six more registry spans,
//! with their enters on every poll, cost a call about twice as much.

use std::sync::Arc;
use std::time::SystemTime;

use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator};
use tracing::Dispatch;
use tracing::span::Id;
use tracing_subscriber::registry::{LookupSpan, Registry};

use super::export::Queue;
use super::spans::{FieldValue, Position, Recording};

/// One stage of a call, recorded as a child of the call's span without a `tracing` span
/// of its own: its ids are made as it opens (so its context can travel to a server at
/// once) and it joins the export queue as it closes. Opening one copies its parent's
/// position; a `tracing` span would cost a registry entry, an enter and an exit per
/// poll, and a close.
#[derive(Debug)]
pub(super) struct StageSpan(Recording);

/// A recorded span that stages open under: its queue and position.
#[derive(Debug, Clone)]
pub(super) struct Parent {
    queue: Arc<Queue>,
    position: Position,
}

impl Parent {
    /// The innermost span at or above the calling thread's current span that is
    /// recorded for export; `None` when there is none.
    pub(super) fn current() -> Option<Parent> {
        tracing::dispatcher::get_default(|dispatch| {
            let current = dispatch.current_span();
            Parent::in_scope(dispatch, current.id()?)
        })
    }

    /// `span` itself, or the innermost recorded span above it; `None` when there is none.
    pub(super) fn of(span: &tracing::Span) -> Option<Parent> {
        span.with_subscriber(|(id, dispatch)| Parent::in_scope(dispatch, id))
            .flatten()
    }

    fn in_scope(dispatch: &Dispatch, id: &Id) -> Option<Parent> {
        let registry = dispatch.downcast_ref::<Registry>()?;
        let span = registry.span(id)?;
        span.scope().find_map(|above| {
            let extensions = above.extensions();
            let recording = extensions.get::<Recording>()?;
            Some(Parent {
                queue: recording.queue.clone(),
                position: recording.position.clone(),
            })
        })
    }
}

impl StageSpan {
    /// Stage `name`, a child of `parent`, starting now.
    pub(super) fn open(parent: &Parent, name: &'static str) -> StageSpan {
        let position = Position {
            span_id: RandomIdGenerator::default().new_span_id(),
            ..parent.position.clone()
        };
        let queue = parent.queue.clone();
        StageSpan(Recording::new(
            queue,
            position,
            parent.position.span_id,
            name,
        ))
    }

    /// Records `value` as attribute `name` (or as the span's name, kind or status, for
    /// the `otel.*` names, as on a `tracing` span).
    pub(super) fn set(&mut self, name: &'static str, value: FieldValue) {
        self.0.set(name, value);
    }

    /// Whether the stage's trace is kept (exported).
    pub(super) fn sampled(&self) -> bool {
        self.0.position.sampled
    }

    /// The stage's W3C context (`traceparent`, `tracestate`), for the server it calls.
    pub(super) fn context(&self) -> (String, Option<String>) {
        let position = &self.0.position;
        (
            position.traceparent(),
            position.state.as_deref().map(str::to_string),
        )
    }

    /// The stage ends: it joins the export queue when its trace is kept.
    pub(super) fn close(self) {
        if self.0.position.sampled {
            let queue = self.0.queue.clone();
            queue.push(self.0, SystemTime::now());
        }
    }
}
