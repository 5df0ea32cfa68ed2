//! Airlock's spans, recorded for export by a lean `tracing` layer ([`SpanLayer`]). Each
//! span Airlock opens gets its OpenTelemetry ids, start time and fields in the span's
//! extensions; on close it goes whole to the export queue. Turning it into OpenTelemetry
//! span data, scrubbing and encoding it all happen on the export thread, never on the
//! call's path (a general-purpose bridge such as `tracing-opentelemetry` builds each span
//! as it opens and cost a 4 KiB call about 13%).
//!
//! A call's stages are not `tracing` spans but recordings of the same kind made from the
//! call's (`stages.rs`).
//!
//! The ids also serve what needs them while the span is open: a caller's context made
//! the parent ([`adopt_parent`]) and the ids on JSON log lines ([`ids_in`]).

use std::borrow::Cow;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::SystemTime;

use compact_str::{CompactString, format_compact};
use opentelemetry::trace::{SpanId, SpanKind, Status, TraceId};
use opentelemetry::{KeyValue, StringValue, Value};
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator};
use smallvec::SmallVec;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Dispatch, Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::{LookupSpan, Registry};

use super::export::Queue;

/// Where a span sits in its trace.
#[derive(Debug, Clone)]
pub(super) struct Position {
    pub(super) trace_id: TraceId,
    pub(super) span_id: SpanId,
    /// Whether the trace is sampled (kept): unsampled spans are never exported, but their
    /// context still travels, with the flag off.
    pub(super) sampled: bool,
    /// The caller's `tracestate`, passed on unchanged.
    pub(super) state: Option<Arc<str>>,
}

impl Position {
    /// The W3C `traceparent` of this span.
    pub(super) fn traceparent(&self) -> String {
        let flags = if self.sampled { "01" } else { "00" };
        format!("00-{}-{}-{flags}", self.trace_id, self.span_id)
    }
}

/// A field value, kept as recorded until the export thread converts it. Text of up to
/// 24 bytes (most names, kinds and ids) is kept inline: a call's spans then allocate
/// little on its thread, and the export thread, where they are dropped, frees little
/// that another thread allocated (which glibc's allocator makes costly for both).
#[derive(Debug, Clone, PartialEq)]
pub(super) enum FieldValue {
    Str(CompactString),
    I64(i64),
    F64(f64),
    Bool(bool),
}

impl From<FieldValue> for Value {
    fn from(value: FieldValue) -> Value {
        match value {
            FieldValue::Str(s) => Value::String(StringValue::from(s.into_string())),
            FieldValue::I64(n) => Value::I64(n),
            FieldValue::F64(n) => Value::F64(n),
            FieldValue::Bool(b) => Value::Bool(b),
        }
    }
}

/// An event that happened inside a span.
#[derive(Debug)]
pub(super) struct Noted {
    pub(super) name: Cow<'static, str>,
    pub(super) time: SystemTime,
    pub(super) attributes: Vec<KeyValue>,
}

/// A span being recorded: what its OpenTelemetry span will carry.
#[derive(Debug)]
pub(super) struct Recording {
    /// The queue of the layer that recorded it (one subscriber may hold two layers), which
    /// its stages join too.
    pub(super) queue: Arc<Queue>,
    pub(super) position: Position,
    pub(super) parent: SpanId,
    pub(super) parent_remote: bool,
    /// Its name as opened (the span's or the stage's).
    pub(super) name: &'static str,
    /// The name `otel.name` gave it instead, if any.
    pub(super) renamed: Option<CompactString>,
    pub(super) kind: SpanKind,
    pub(super) start: SystemTime,
    /// Its attributes: a stage's few are kept inline (no allocation on the call's thread
    /// for the export thread to free); a call's root has more, and a block of its own.
    pub(super) attributes: SmallVec<[(&'static str, FieldValue); 4]>,
    pub(super) events: Vec<Noted>,
    failed: bool,
    succeeded: bool,
    description: Option<CompactString>,
}

impl Recording {
    /// A span named `name` at `position` under `parent`, started now, for `queue`.
    pub(super) fn new(
        queue: Arc<Queue>,
        position: Position,
        parent: SpanId,
        name: &'static str,
    ) -> Self {
        Recording {
            queue,
            position,
            parent,
            parent_remote: false,
            name,
            renamed: None,
            kind: SpanKind::Internal,
            start: SystemTime::now(),
            attributes: SmallVec::new(),
            events: Vec::new(),
            failed: false,
            succeeded: false,
            description: None,
        }
    }

    /// Whether `queue` is the queue this span was recorded for.
    fn owned_by(&self, queue: &Arc<Queue>) -> bool {
        Arc::ptr_eq(&self.queue, queue)
    }

    /// The span's status: an error when `otel.status_code = "error"` was recorded or an
    /// error-level event happened in it.
    pub(super) fn status(&self) -> Status {
        if self.failed {
            Status::error(
                self.description
                    .as_ref()
                    .map_or_else(String::new, CompactString::to_string),
            )
        } else if self.succeeded {
            Status::Ok
        } else {
            Status::Unset
        }
    }

    pub(super) fn set(&mut self, name: &'static str, value: FieldValue) {
        match (name, value) {
            ("otel.name", FieldValue::Str(text)) => self.renamed = Some(text),
            ("otel.kind", FieldValue::Str(kind)) => self.kind = kind_of(&kind),
            ("otel.status_code", FieldValue::Str(code)) => {
                self.failed = code.eq_ignore_ascii_case("error");
                self.succeeded = code.eq_ignore_ascii_case("ok");
            }
            ("otel.status_description" | "otel.status_message", FieldValue::Str(text)) => {
                self.description = Some(text)
            }
            (name, value) => match self.attributes.iter_mut().find(|(k, _)| *k == name) {
                Some(slot) => slot.1 = value,
                None => self.attributes.push((name, value)),
            },
        }
    }
}

fn kind_of(kind: &str) -> SpanKind {
    match kind.to_ascii_lowercase().as_str() {
        "client" => SpanKind::Client,
        "server" => SpanKind::Server,
        "producer" => SpanKind::Producer,
        "consumer" => SpanKind::Consumer,
        _ => SpanKind::Internal,
    }
}

/// Unsigned values beyond `i64` travel as text, as OpenTelemetry has no `u64`.
pub(super) fn unsigned(value: u64) -> FieldValue {
    i64::try_from(value).map_or_else(
        |_| FieldValue::Str(format_compact!("{value}")),
        FieldValue::I64,
    )
}

/// Records a span's fields into its [`Recording`].
struct SpanFields<'a>(&'a mut Recording);

impl Visit for SpanFields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0
            .set(field.name(), FieldValue::Str(CompactString::from(value)));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.set(field.name(), FieldValue::I64(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.set(field.name(), unsigned(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.set(field.name(), FieldValue::F64(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.set(field.name(), FieldValue::Bool(value));
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.0
            .set(field.name(), FieldValue::Str(format_compact!("{value}")));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.0
            .set(field.name(), FieldValue::Str(format_compact!("{value:?}")));
    }
}

/// Records an event's fields: its message becomes the event's name; an error field also
/// becomes `exception.message`.
#[derive(Default)]
struct EventFields {
    name: Option<String>,
    attributes: Vec<KeyValue>,
}

impl EventFields {
    fn put(&mut self, field: &Field, value: Value) {
        if field.name() == "message" {
            self.name = Some(value.as_str().into_owned());
        } else {
            self.attributes.push(KeyValue::new(field.name(), value));
        }
    }
}

impl Visit for EventFields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Value::from(value.to_string()));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, Value::I64(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, unsigned(value).into());
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, Value::F64(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Value::Bool(value));
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        let text = value.to_string();
        self.attributes
            .push(KeyValue::new("exception.message", text.clone()));
        self.put(field, Value::from(text));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.put(field, Value::from(format!("{value:?}")));
    }
}

/// The `tracing` layer that records Airlock's spans for an export queue. Get it from
/// `SpanExport::layer` (filtered to Airlock's own spans) or `SpanExport::unfiltered_layer`.
/// One such layer per subscriber records a given span; a second one enabled for the same
/// span leaves it to the first.
pub struct SpanLayer {
    queue: Arc<Queue>,
    ids: RandomIdGenerator,
    /// The share of new traces kept (a caller's context decides for its own trace).
    ratio: f64,
}

impl SpanLayer {
    pub(super) fn new(queue: Arc<Queue>, ratio: f64) -> SpanLayer {
        SpanLayer {
            queue,
            ids: RandomIdGenerator::default(),
            ratio,
        }
    }
}

/// Whether a new trace is kept at `ratio`, decided from its id as OpenTelemetry's
/// `TraceIdRatioBased` sampler does (so every service sampling at the same ratio agrees).
fn kept(trace_id: TraceId, ratio: f64) -> bool {
    if ratio >= 1.0 {
        return true;
    }
    let bytes = trace_id.to_bytes();
    let low = u64::from_be_bytes(bytes[8..16].try_into().expect("eight bytes")) >> 1;
    low < (ratio.max(0.0) * (1u64 << 63) as f64) as u64
}

impl<S> Layer<S> for SpanLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let parent = span.scope().skip(1).find_map(|ancestor| {
            ancestor
                .extensions()
                .get::<Recording>()
                .map(|r| (r.position.clone(), r.position.span_id))
        });
        let span_id = self.ids.new_span_id();
        let (position, parent) = match parent {
            Some((above, parent_id)) => (Position { span_id, ..above }, parent_id),
            None => {
                let trace_id = self.ids.new_trace_id();
                let position = Position {
                    trace_id,
                    span_id,
                    sampled: kept(trace_id, self.ratio),
                    state: None,
                };
                (position, SpanId::INVALID)
            }
        };
        let mut recording = Recording::new(
            self.queue.clone(),
            position,
            parent,
            attrs.metadata().name(),
        );
        recording.attributes.reserve(attrs.fields().len());
        attrs.record(&mut SpanFields(&mut recording));
        let mut extensions = span.extensions_mut();
        if extensions.get_mut::<Recording>().is_none() {
            extensions.insert(recording);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut extensions = span.extensions_mut();
        if let Some(recording) = extensions.get_mut::<Recording>()
            && recording.owned_by(&self.queue)
        {
            values.record(&mut SpanFields(recording));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.event_span(event) else {
            return;
        };
        let Some(holder) = span
            .scope()
            .find(|s| s.extensions().get::<Recording>().is_some())
        else {
            return;
        };
        let mut extensions = holder.extensions_mut();
        let Some(recording) = extensions.get_mut::<Recording>() else {
            return;
        };
        if !recording.owned_by(&self.queue) || !recording.position.sampled {
            return;
        }
        let mut fields = EventFields::default();
        event.record(&mut fields);
        let level = *event.metadata().level();
        fields
            .attributes
            .push(KeyValue::new("level", level.as_str()));
        if level == tracing::Level::ERROR && !recording.succeeded {
            recording.failed = true;
        }
        recording.events.push(Noted {
            name: fields.name.map_or(Cow::Borrowed("event"), Cow::Owned),
            time: SystemTime::now(),
            attributes: fields.attributes,
        });
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let mut extensions = span.extensions_mut();
        let mine = extensions
            .get_mut::<Recording>()
            .is_some_and(|r| r.owned_by(&self.queue));
        if !mine {
            return;
        }
        let Some(recording) = extensions.remove::<Recording>() else {
            return;
        };
        drop(extensions);
        if recording.position.sampled {
            self.queue.push(recording, SystemTime::now());
        }
    }
}

/// Runs `f` on the recording of span `id` in `dispatch`'s registry.
fn with_recording<R>(
    dispatch: &Dispatch,
    id: &Id,
    f: impl FnOnce(&mut Recording) -> R,
) -> Option<R> {
    let registry = dispatch.downcast_ref::<Registry>()?;
    let span = registry.span(id)?;
    let mut extensions = span.extensions_mut();
    extensions.get_mut::<Recording>().map(f)
}

/// A W3C `traceparent`'s trace id, parent span id and sampled flag; `None` when it is not
/// a valid one ([`super::traceparent`]).
fn parse_traceparent(value: &str) -> Option<(TraceId, SpanId, bool)> {
    let read = super::traceparent::Traceparent::parse(value)?;
    Some((
        TraceId::from_bytes(read.trace_id),
        SpanId::from_bytes(read.parent_id),
        read.sampled,
    ))
}

/// Makes the W3C context (`traceparent`, `tracestate`) the parent of `span`, which must
/// have no recorded children yet. A `traceparent` that is not valid changes nothing.
pub(super) fn adopt_parent(span: &tracing::Span, traceparent: &str, tracestate: Option<&str>) {
    let Some((trace_id, parent, sampled)) = parse_traceparent(traceparent) else {
        return;
    };
    span.with_subscriber(|(id, dispatch)| {
        with_recording(dispatch, id, |recording| {
            recording.position.trace_id = trace_id;
            recording.position.sampled = sampled;
            recording.position.state = tracestate.filter(|s| !s.is_empty()).map(Arc::from);
            recording.parent = parent;
            recording.parent_remote = true;
        })
    });
}

/// The trace and span ids (lower-case hex) of the innermost recorded span at or above
/// span `id`, for a log line written inside it.
pub fn ids_in(dispatch: &Dispatch, id: &Id) -> Option<(String, String)> {
    let registry = dispatch.downcast_ref::<Registry>()?;
    let span = registry.span(id)?;
    span.scope().find_map(|s| {
        s.extensions().get::<Recording>().map(|r| {
            (
                r.position.trace_id.to_string(),
                r.position.span_id.to_string(),
            )
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::Settings;
    use crate::telemetry::export::SpanExport;
    use crate::telemetry::stages::{Parent, StageSpan};
    use opentelemetry_sdk::error::OTelSdkResult;
    use opentelemetry_sdk::trace::{SpanData, SpanExporter};
    use std::sync::Mutex;
    use tracing_subscriber::layer::SubscriberExt;

    /// Keeps every span it is given.
    #[derive(Debug, Default, Clone)]
    struct Kept(Arc<Mutex<Vec<SpanData>>>);

    impl SpanExporter for Kept {
        fn export(
            &self,
            batch: Vec<SpanData>,
        ) -> impl std::future::Future<Output = OTelSdkResult> + Send {
            self.0.lock().unwrap().extend(batch);
            std::future::ready(Ok(()))
        }
    }

    #[test]
    fn a_callers_sampled_flag_decides_and_unsampled_context_still_travels() {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let kept = Kept::default();
        let settings = Settings {
            sample_ratio: 0.0,
            ..Settings::default()
        };
        let export =
            SpanExport::with_exporter(kept.clone(), &settings, runtime.handle().clone()).unwrap();
        let subscriber = tracing_subscriber::registry().with(export.layer());
        let (unsampled, sampled) = tracing::subscriber::with_default(subscriber, || {
            // A new trace at ratio 0: not kept, but its context goes on, flag off.
            let call = tracing::info_span!("call");
            let parent = call.in_scope(Parent::current).unwrap();
            let upstream = StageSpan::open(&parent, "upstream");
            let unsampled = upstream.context();
            upstream.close();
            drop(call);
            // A caller's sampled context wins over the ratio, for the span and its
            // children, which share the caller's trace and pass its tracestate on.
            let call = tracing::info_span!("call", otel.name = "tools/call echo");
            adopt_parent(
                &call,
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                Some("vendor=1"),
            );
            let mut upstream = call.in_scope(|| {
                tracing::info!(answer = 42u64, "went out");
                StageSpan::open(&Parent::current().unwrap(), "upstream")
            });
            upstream.set("otel.kind", FieldValue::Str("client".into()));
            let sampled = upstream.context();
            upstream.close();
            drop(call);
            // Outside any recorded span, a stage records nothing.
            assert!(Parent::current().is_none());
            (unsampled, sampled)
        });
        assert!(unsampled.0.ends_with("-00"), "{unsampled:?}");
        assert!(
            sampled
                .0
                .starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-")
                && sampled.0.ends_with("-01"),
            "{sampled:?}"
        );
        assert_eq!(sampled.1.as_deref(), Some("vendor=1"));
        export.force_flush().unwrap();
        let spans = kept.0.lock().unwrap().clone();
        let names: Vec<&str> = spans.iter().map(|s| s.name.as_ref()).collect();
        assert_eq!(
            names,
            ["upstream", "tools/call echo"],
            "only the sampled trace leaves"
        );
        let (upstream, root) = (&spans[0], &spans[1]);
        assert_eq!(root.parent_span_id.to_string(), "00f067aa0ba902b7");
        assert!(root.parent_span_is_remote);
        assert_eq!(upstream.parent_span_id, root.span_context.span_id());
        assert_eq!(upstream.span_kind, SpanKind::Client);
        assert!(
            sampled
                .0
                .contains(&upstream.span_context.span_id().to_string())
        );
        assert_eq!(root.span_context.trace_state().header(), "vendor=1");
        assert_eq!(root.events.events[0].name, "went out");
        export.shutdown().unwrap();
    }

    #[test]
    fn a_traceparent_becomes_opentelemetry_ids() {
        let (trace, span, sampled) =
            parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
        assert_eq!(trace.to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(span.to_string(), "00f067aa0ba902b7");
        assert!(sampled);
        assert!(parse_traceparent("00-secret-token-01").is_none());
    }

    #[test]
    fn the_ratio_keeps_about_its_share_of_traces_and_agrees_with_itself() {
        let ids = RandomIdGenerator::default();
        let traces: Vec<TraceId> = (0..10_000).map(|_| ids.new_trace_id()).collect();
        let kept_share = traces.iter().filter(|t| kept(**t, 0.25)).count();
        assert!((2_000..3_000).contains(&kept_share), "{kept_share}");
        assert!(traces.iter().all(|t| kept(*t, 1.0)));
        assert!(!traces.iter().any(|t| kept(*t, 0.0)));
        assert!(traces.iter().all(|t| kept(*t, 0.25) == kept(*t, 0.25)));
    }
}
