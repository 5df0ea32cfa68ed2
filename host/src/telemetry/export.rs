//! Spans to an OpenTelemetry collector over OTLP/HTTP (protobuf). [`SpanExport`] owns
//! the queue that [`SpanLayer`] fills as Airlock's spans close, and the thread that
//! turns them into OpenTelemetry span data and sends them in batches, through Airlock's
//! own reqwest client on the caller's tokio runtime. Every span passes the egress rule
//! on its way out: [`Scrubbed`] removes each secret any Airlock in this process knows
//! from span names, attribute values, event names and attributes, link attributes and
//! status messages, before the batch is encoded.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use opentelemetry::trace::{SpanContext, Status, TraceFlags, TraceState};
use opentelemetry::{InstrumentationScope, KeyValue, StringValue, Value};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanExporter};
use tracing::Subscriber;
use tracing_subscriber::Layer;
use tracing_subscriber::registry::LookupSpan;

use super::Settings;
use super::spans::{Recording, SpanLayer};
use crate::secrets::{KnownSecrets, log_secrets};

/// How long one export request may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why spans cannot be exported as configured.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    /// No endpoint is configured.
    #[error(
        "no OTLP endpoint is configured ([telemetry] otlp_endpoint or OTEL_EXPORTER_OTLP_ENDPOINT)"
    )]
    NoEndpoint,
    /// The endpoint is not an http(s) URL.
    #[error("the OTLP endpoint {0:?} is not an http:// or https:// URL")]
    Endpoint(String),
    /// The exporter could not be built.
    #[error("cannot build the OTLP exporter: {0}")]
    Build(String),
    /// The export thread did not answer in time.
    #[error("the spans were not sent in time")]
    Timeout,
    /// The export has been shut down (or its thread failed).
    #[error("the span export has stopped")]
    Stopped,
}

/// Spans closed and not yet sent, and what the export thread has been asked to do.
#[derive(Default)]
struct Pending {
    spans: Vec<(Recording, SystemTime)>,
    /// Flushes asked for, and sent (the thread answers every flush asked before it
    /// took the spans it has just sent).
    flushes_asked: u64,
    flushes_done: u64,
    closing: bool,
    stopped: bool,
}

/// The queue between the calls' threads, which push spans as they close, and the export
/// thread. A push takes a lock and appends; it wakes the thread only when a batch is
/// full, so a call never waits on a system call for its spans.
pub(super) struct Queue {
    pending: Mutex<Pending>,
    /// The export thread waits here for a full batch, a flush, the close, or its delay.
    wake: Condvar,
    /// Flushers and the closer wait here for the thread.
    answered: Condvar,
    capacity: usize,
    batch: usize,
    dropped: AtomicU64,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue")
            .field("capacity", &self.capacity)
            .field("batch", &self.batch)
            .finish_non_exhaustive()
    }
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a closed span; drops it (and counts it) when the queue is full.
    pub(super) fn push(&self, recording: Recording, end: SystemTime) {
        let mut pending = self.lock();
        if pending.spans.len() >= self.capacity || pending.stopped {
            drop(pending);
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        pending.spans.push((recording, end));
        if pending.spans.len() == self.batch {
            self.wake.notify_one();
        }
    }
}

/// Airlock's spans on their way to a collector: the queue [`SpanExport::layer`] fills,
/// and the thread that sends it every `schedule_delay` (or as soon as a batch is full).
/// Shut it down ([`SpanExport::shutdown`]) before the runtime its requests run on stops,
/// so the last spans leave; dropping it only tells the thread to finish.
pub struct SpanExport {
    queue: Arc<Queue>,
    ratio: f64,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl SpanExport {
    /// Exports to `settings`' OTLP/HTTP endpoint, its requests run on `runtime`.
    pub fn start(
        settings: &Settings,
        runtime: tokio::runtime::Handle,
    ) -> Result<SpanExport, ExportError> {
        let endpoint = settings
            .traces_endpoint
            .clone()
            .ok_or(ExportError::NoEndpoint)?;
        if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
            return Err(ExportError::Endpoint(endpoint));
        }
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(Sender {
                client: reqwest::Client::new(),
                runtime: runtime.clone(),
            })
            .with_endpoint(endpoint)
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_timeout(EXPORT_TIMEOUT)
            .with_headers(
                settings
                    .headers
                    .clone()
                    .into_iter()
                    .collect::<HashMap<_, _>>(),
            )
            .build()
            .map_err(|e| ExportError::Build(e.to_string()))?;
        SpanExport::with_exporter(exporter, settings, runtime)
    }

    /// Exports through `exporter` (every span scrubbed first), with `settings`' service
    /// name, sampling and batching; its futures run on `runtime`.
    pub fn with_exporter<E: SpanExporter + 'static>(
        mut exporter: E,
        settings: &Settings,
        runtime: tokio::runtime::Handle,
    ) -> Result<SpanExport, ExportError> {
        let resource = Resource::builder()
            .with_service_name(settings.service_name.clone())
            .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
            .build();
        exporter.set_resource(&resource);
        let batch = settings.max_export_batch_size.max(1);
        let queue = Arc::new(Queue {
            pending: Mutex::new(Pending {
                spans: Vec::with_capacity(batch),
                ..Pending::default()
            }),
            wake: Condvar::new(),
            answered: Condvar::new(),
            capacity: settings.max_queue_size.max(batch),
            batch,
            dropped: AtomicU64::new(0),
        });
        let sending = Sending {
            queue: queue.clone(),
            exporter: Scrubbed(exporter),
            scope: InstrumentationScope::builder("airlock")
                .with_version(env!("CARGO_PKG_VERSION"))
                .build(),
            runtime,
            delay: settings.schedule_delay,
            spare: Vec::with_capacity(batch),
        };
        let thread = std::thread::Builder::new()
            .name("airlock-spans".into())
            .spawn(move || {
                yield_to_calls();
                sending.run()
            })
            .map_err(|e| ExportError::Build(format!("cannot start the export thread: {e}")))?;
        Ok(SpanExport {
            queue,
            ratio: settings.sample_ratio,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// The `tracing` layer that records Airlock's spans for this export, filtered to
    /// [`ours`].
    pub fn layer<S>(&self) -> impl Layer<S> + Send + Sync + 'static
    where
        S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
    {
        self.unfiltered_layer().with_filter(ours())
    }

    /// [`SpanExport::layer`] without its filter, for a subscriber that filters it its own
    /// way (with [`ours`] and more).
    pub fn unfiltered_layer(&self) -> SpanLayer {
        SpanLayer::new(self.queue.clone(), self.ratio)
    }

    /// Spans dropped because the queue was full (the collector too slow or away).
    pub fn dropped(&self) -> u64 {
        self.queue.dropped.load(Ordering::Relaxed)
    }

    /// Sends every span closed so far, waiting up to the export timeout. Blocking: not
    /// from one of the runtime's worker threads.
    pub fn force_flush(&self) -> Result<(), ExportError> {
        let mut pending = self.queue.lock();
        if pending.stopped {
            return Err(ExportError::Stopped);
        }
        pending.flushes_asked += 1;
        let asked = pending.flushes_asked;
        self.queue.wake.notify_one();
        let (pending, waited) = self
            .queue
            .answered
            .wait_timeout_while(pending, EXPORT_TIMEOUT * 2, |p| {
                p.flushes_done < asked && !p.stopped
            })
            .unwrap_or_else(|e| e.into_inner());
        match waited.timed_out() && pending.flushes_done < asked {
            true => Err(ExportError::Timeout),
            false => Ok(()),
        }
    }

    /// Sends the spans still queued and stops the export thread. Blocking: not from one
    /// of the runtime's worker threads. Later calls do nothing.
    pub fn shutdown(&self) -> Result<(), ExportError> {
        self.queue.lock().closing = true;
        self.queue.wake.notify_one();
        let thread = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        match thread {
            Some(thread) => thread.join().map_err(|_| ExportError::Stopped),
            None => Ok(()),
        }
    }
}

impl Drop for SpanExport {
    fn drop(&mut self) {
        self.queue.lock().closing = true;
        self.queue.wake.notify_one();
    }
}

/// The export thread's side of the queue.
struct Sending<E> {
    queue: Arc<Queue>,
    exporter: Scrubbed<E>,
    scope: InstrumentationScope,
    runtime: tokio::runtime::Handle,
    delay: Duration,
    /// The emptied list of the last spans taken, which the queue gets back in their
    /// place: the calls' threads then append to room the export thread allocated, and
    /// grow (copy, reallocate) the list only when more than a batch waits.
    /// Kept at no more than two batches' room.
    spare: Vec<(Recording, SystemTime)>,
}

impl<E: SpanExporter> Sending<E> {
    fn run(mut self) {
        loop {
            let (mut taken, flushes, closing) = self.next();
            let mut spans = taken.drain(..).peekable();
            while spans.peek().is_some() {
                let batch: Vec<SpanData> = spans
                    .by_ref()
                    .take(self.queue.batch)
                    .map(|(recording, end)| span_data(recording, end, &self.scope))
                    .collect();
                if let Err(e) = self.runtime.block_on(self.exporter.export(batch)) {
                    tracing::warn!("cannot send spans to the OTLP collector: {e}");
                }
            }
            drop(spans);
            if taken.capacity() > 2 * self.queue.batch {
                taken.shrink_to(self.queue.batch);
            }
            self.spare = taken;
            let mut pending = self.queue.lock();
            pending.flushes_done = pending.flushes_done.max(flushes);
            if closing {
                pending.stopped = true;
            }
            drop(pending);
            self.queue.answered.notify_all();
            if closing {
                if let Err(e) = self.exporter.shutdown_with_timeout(EXPORT_TIMEOUT) {
                    tracing::warn!("cannot stop the OTLP exporter cleanly: {e}");
                }
                return;
            }
        }
    }

    /// Waits for a full batch, a flush, the close or the delay; takes what is queued.
    fn next(&mut self) -> (Vec<(Recording, SystemTime)>, u64, bool) {
        let deadline = Instant::now() + self.delay;
        let mut pending = self.queue.lock();
        loop {
            let due = pending.spans.len() >= self.queue.batch
                || pending.flushes_asked > pending.flushes_done
                || pending.closing;
            let now = Instant::now();
            if due || now >= deadline {
                break;
            }
            pending = self
                .queue
                .wake
                .wait_timeout(pending, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        // Full batches only, unless the delay is over or a flush or the close wants all.
        let all = pending.flushes_asked > pending.flushes_done
            || pending.closing
            || Instant::now() >= deadline;
        let mut taken = std::mem::take(&mut self.spare);
        match all {
            true => std::mem::swap(&mut taken, &mut pending.spans),
            false => {
                let whole = pending.spans.len() / self.queue.batch * self.queue.batch;
                taken.extend(pending.spans.drain(..whole));
            }
        }
        (taken, pending.flushes_asked, pending.closing)
    }
}

/// Gives the calling thread the lowest CPU priority (nice 19), on Linux, where a nice
/// value belongs to a thread: the export thread's batches (converting, scrubbing and
/// encoding hundreds of spans at once) then wait for a free core instead of taking one
/// from the calls whose spans they are. Elsewhere a nice value is the whole process's,
/// so nothing changes.
fn yield_to_calls() {
    #[cfg(target_os = "linux")]
    // SAFETY: setpriority reads and writes no memory of ours; with PRIO_PROCESS and
    // `who` 0 it changes the calling thread's nice value only (Linux's threads each
    // have their own), and a refusal (EACCES cannot happen when lowering) is harmless.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, 19);
    }
}

/// A recorded span as OpenTelemetry span data.
fn span_data(recording: Recording, end: SystemTime, scope: &InstrumentationScope) -> SpanData {
    let status = recording.status();
    let position = recording.position;
    let state = position
        .state
        .as_deref()
        .and_then(|s| s.parse::<TraceState>().ok())
        .unwrap_or_default();
    let mut events = SpanEvents::default();
    events.events = recording
        .events
        .into_iter()
        .map(|e| opentelemetry::trace::Event::new(e.name, e.time, e.attributes, 0))
        .collect();
    SpanData {
        span_context: SpanContext::new(
            position.trace_id,
            position.span_id,
            TraceFlags::SAMPLED,
            false,
            state,
        ),
        parent_span_id: recording.parent,
        parent_span_is_remote: recording.parent_remote,
        span_kind: recording.kind,
        name: match recording.renamed {
            Some(name) => name.into_string().into(),
            None => recording.name.into(),
        },
        start_time: recording.start,
        end_time: end,
        attributes: recording
            .attributes
            .into_iter()
            .map(|(key, value)| KeyValue::new(key, Value::from(value)))
            .collect(),
        dropped_attributes_count: 0,
        events,
        links: Default::default(),
        status,
        instrumentation_scope: scope.clone(),
    }
}

/// What is exported: Airlock's own spans and events, at `info` and above. Other crates'
/// spans (rmcp's, wasmtime's) carry protocol messages and compilation detail.
pub fn ours() -> tracing_subscriber::filter::Targets {
    tracing_subscriber::filter::Targets::new().with_target("airlock_host", tracing::Level::INFO)
}

/// The OTLP exporter's HTTP client: Airlock's reqwest client, its requests spawned on a
/// tokio runtime (the batch processor runs its exports on a thread of its own).
#[derive(Debug)]
struct Sender {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for Sender {
    async fn send_bytes(
        &self,
        request: http::Request<bytes::Bytes>,
    ) -> Result<http::Response<bytes::Bytes>, opentelemetry_http::HttpError> {
        let client = self.client.clone();
        let (parts, body) = request.into_parts();
        let send = async move {
            let mut builder = client.request(parts.method, parts.uri.to_string());
            for (name, value) in &parts.headers {
                builder = builder.header(name, value);
            }
            let response = builder.body(body).send().await?;
            let status = response.status();
            let body = response.bytes().await?;
            let mut answer = http::Response::new(body);
            *answer.status_mut() = status;
            Ok::<_, reqwest::Error>(answer)
        };
        match self.runtime.spawn(send).await {
            Ok(answer) => Ok(answer?),
            Err(e) => Err(Box::new(e)),
        }
    }
}

/// A span exporter that passes every span through the egress rule first.
#[derive(Debug)]
pub struct Scrubbed<E>(pub E);

impl<E: SpanExporter> SpanExporter for Scrubbed<E> {
    fn export(
        &self,
        mut batch: Vec<SpanData>,
    ) -> impl std::future::Future<Output = OTelSdkResult> + Send {
        let known = log_secrets();
        if !known.is_empty() {
            for span in &mut batch {
                scrub_span(span, &known);
            }
        }
        self.0.export(batch)
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.0.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.0.set_resource(resource);
    }
}

/// `span` with no known secret in any string it carries.
pub fn scrub_span(span: &mut SpanData, known: &KnownSecrets) {
    if let Some(clean) = scrubbed(known, &span.name) {
        span.name = clean.into();
    }
    scrub_attributes(&mut span.attributes, known);
    for event in &mut span.events.events {
        if let Some(clean) = scrubbed(known, &event.name) {
            event.name = clean.into();
        }
        scrub_attributes(&mut event.attributes, known);
    }
    for link in &mut span.links.links {
        scrub_attributes(&mut link.attributes, known);
    }
    if let Status::Error { description } = &mut span.status
        && let Some(clean) = scrubbed(known, description)
    {
        *description = clean.into();
    }
}

fn scrub_attributes(attributes: &mut [KeyValue], known: &KnownSecrets) {
    for attribute in attributes {
        match &mut attribute.value {
            Value::String(text) => {
                if let Some(clean) = scrubbed(known, text.as_str()) {
                    *text = StringValue::from(clean);
                }
            }
            Value::Array(opentelemetry::Array::String(texts)) => {
                for text in texts {
                    if let Some(clean) = scrubbed(known, text.as_str()) {
                        *text = StringValue::from(clean);
                    }
                }
            }
            _ => {}
        }
    }
}

/// `text` scrubbed, or `None` when it carried nothing to remove.
fn scrubbed(known: &KnownSecrets, text: &str) -> Option<String> {
    match known.scrub(text) {
        std::borrow::Cow::Borrowed(_) => None,
        std::borrow::Cow::Owned(clean) => Some(clean),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use tracing_subscriber::layer::SubscriberExt;

    /// Counts the batches and spans it is given.
    #[derive(Debug, Default, Clone)]
    struct Counting(Arc<(AtomicUsize, AtomicUsize)>);

    impl SpanExporter for Counting {
        fn export(
            &self,
            batch: Vec<SpanData>,
        ) -> impl std::future::Future<Output = OTelSdkResult> + Send {
            self.0.0.fetch_add(1, Ordering::SeqCst);
            self.0.1.fetch_add(batch.len(), Ordering::SeqCst);
            std::future::ready(Ok(()))
        }
    }

    #[test]
    fn spans_leave_in_full_batches_and_the_rest_on_a_flush() {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let counting = Counting::default();
        let settings = Settings {
            max_export_batch_size: 100,
            ..Settings::default()
        };
        let export =
            SpanExport::with_exporter(counting.clone(), &settings, runtime.handle().clone())
                .unwrap();
        let subscriber = tracing_subscriber::registry().with(export.layer());
        tracing::subscriber::with_default(subscriber, || {
            for _ in 0..250 {
                let _span = tracing::info_span!("call").entered();
            }
        });
        // Two full batches go at once; the fifty left wait for the delay or a flush.
        let deadline = Instant::now() + Duration::from_secs(10);
        while counting.0.1.load(Ordering::SeqCst) < 200 {
            assert!(Instant::now() < deadline, "the full batches did not leave");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(counting.0.0.load(Ordering::SeqCst), 2);
        export.force_flush().unwrap();
        assert_eq!(counting.0.0.load(Ordering::SeqCst), 3);
        assert_eq!(counting.0.1.load(Ordering::SeqCst), 250);
        assert_eq!(export.dropped(), 0);
        export.shutdown().unwrap();
        assert!(matches!(export.force_flush(), Err(ExportError::Stopped)));
    }
    use opentelemetry::trace::{SpanContext, SpanKind, TraceFlags, TraceState};
    use opentelemetry::{InstrumentationScope, trace::Event};
    use std::time::SystemTime;

    #[test]
    fn every_string_a_span_carries_is_scrubbed() {
        let known = KnownSecrets::new().with("TOKEN", "tok-SECRET-1234567890");
        let secret = "tok-SECRET-1234567890";
        let mut span = SpanData {
            span_context: SpanContext::new(
                opentelemetry::trace::TraceId::from(7u128),
                opentelemetry::trace::SpanId::from(9u64),
                TraceFlags::SAMPLED,
                false,
                TraceState::NONE,
            ),
            parent_span_id: opentelemetry::trace::SpanId::INVALID,
            parent_span_is_remote: false,
            span_kind: SpanKind::Internal,
            name: format!("call {secret}").into(),
            start_time: SystemTime::now(),
            end_time: SystemTime::now(),
            attributes: vec![
                KeyValue::new("error.message", format!("refused {secret}")),
                KeyValue::new(
                    "list",
                    Value::Array(opentelemetry::Array::String(vec![
                        secret.to_string().into(),
                    ])),
                ),
                KeyValue::new("count", 3),
            ],
            dropped_attributes_count: 0,
            events: Default::default(),
            links: Default::default(),
            status: Status::error(format!("failed: {secret}")),
            instrumentation_scope: InstrumentationScope::builder("t").build(),
        };
        span.events.events.push(Event::new(
            format!("exception {secret}"),
            SystemTime::now(),
            vec![KeyValue::new("exception.message", secret.to_string())],
            0,
        ));
        scrub_span(&mut span, &known);
        let all = format!("{span:?}");
        assert!(!all.contains(secret), "{all}");
        assert!(all.contains("[REDACTED:secret:TOKEN]"), "{all}");
        assert_eq!(span.attributes[2].value, Value::I64(3));
    }
}
