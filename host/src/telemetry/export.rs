//! Spans to an OpenTelemetry collector over OTLP/HTTP (protobuf). The exporter sends
//! through Airlock's own reqwest client on the caller's tokio runtime, and every span
//! passes the egress rule on its way out: [`Scrubbed`] removes each secret any Airlock
//! in this process knows from span names, attribute values, event names and attributes,
//! link attributes and status messages, before the batch is encoded.

use std::collections::HashMap;
use std::time::Duration;

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{Status, TraceContextExt, TracerProvider as _};
use opentelemetry::{KeyValue, StringValue, Value};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider, SpanData, SpanExporter};
use tracing::Subscriber;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::Layer;
use tracing_subscriber::registry::LookupSpan;

use super::Settings;
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
}

/// A tracer provider exporting to `settings`' endpoint in batches, its requests run on
/// `runtime`. Shut it down ([`SdkTracerProvider::shutdown`], from a thread that is not
/// one of `runtime`'s workers) before the runtime stops, so the last batch leaves.
pub fn provider(
    settings: &Settings,
    runtime: tokio::runtime::Handle,
) -> Result<SdkTracerProvider, ExportError> {
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
            runtime,
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
    let resource = Resource::builder()
        .with_service_name(settings.service_name.clone())
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
        .build();
    let sampler = Sampler::ParentBased(Box::new(if settings.sample_ratio >= 1.0 {
        Sampler::AlwaysOn
    } else {
        Sampler::TraceIdRatioBased(settings.sample_ratio)
    }));
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(Scrubbed(exporter))
        .with_sampler(sampler)
        .with_resource(resource)
        .build())
}

/// The `tracing` layer that turns Airlock's spans (and the events inside them) into
/// OpenTelemetry spans for `provider`, filtered to [`ours`].
pub fn layer<S>(provider: &SdkTracerProvider) -> impl Layer<S> + Send + Sync + 'static
where
    S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    unfiltered_layer(provider).with_filter(ours())
}

/// [`layer`] without its filter, for a subscriber that filters it its own way (with
/// [`ours`] and more).
pub fn unfiltered_layer<S>(
    provider: &SdkTracerProvider,
) -> tracing_opentelemetry::OpenTelemetryLayer<S, opentelemetry_sdk::trace::SdkTracer>
where
    S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("airlock"))
        .with_threads(false)
        .with_target(false)
        .with_location(false)
        .with_tracked_inactivity(false)
        // A span's context is not made OpenTelemetry's current context at every poll
        // (nothing here reads `Context::current()`; parents come from tracing's own span
        // tree, and `context_of`/the JSON log's ids start a span when they need it).
        .with_context_activation(false)
        .with_error_records_to_exceptions(true)
}

/// What is exported: Airlock's own spans and events, at `info` and above. Other crates'
/// spans (rmcp's, wasmtime's) carry protocol messages and compilation detail.
pub fn ours() -> tracing_subscriber::filter::Targets {
    tracing_subscriber::filter::Targets::new().with_target("airlock_host", tracing::Level::INFO)
}

/// Makes the W3C context (`traceparent`, `tracestate`) the parent of `span`.
pub(super) fn adopt_parent(span: &tracing::Span, traceparent: &str, tracestate: Option<&str>) {
    if span.is_disabled() {
        return;
    }
    let mut carrier = HashMap::from([("traceparent".to_string(), traceparent.to_string())]);
    if let Some(state) = tracestate {
        carrier.insert("tracestate".to_string(), state.to_string());
    }
    let parent = TraceContextPropagator::new().extract(&Carrier(&mut carrier));
    if parent.span().span_context().is_valid() {
        let _ = span.set_parent(parent);
    }
}

/// `span`'s W3C context, when it is exported.
pub(super) fn context_of(span: &tracing::Span) -> Option<(String, Option<String>)> {
    if span.is_disabled() {
        return None;
    }
    let context = span.context();
    if !context.span().span_context().is_valid() {
        return None;
    }
    let mut carrier = HashMap::new();
    TraceContextPropagator::new().inject_context(&context, &mut Carrier(&mut carrier));
    let traceparent = carrier.remove("traceparent")?;
    Some((
        traceparent,
        carrier.remove("tracestate").filter(|s| !s.is_empty()),
    ))
}

/// The trace and span ids of `span`, as lower-case hex, when it is exported.
pub fn ids_of(context: &opentelemetry::Context) -> Option<(String, String)> {
    let span = context.span();
    let ids = span.span_context();
    ids.is_valid()
        .then(|| (ids.trace_id().to_string(), ids.span_id().to_string()))
}

struct Carrier<'a>(&'a mut HashMap<String, String>);

impl Extractor for Carrier<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}

impl Injector for Carrier<'_> {
    fn set(&mut self, key: &str, value: String) {
        self.0.insert(key.to_string(), value);
    }
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
