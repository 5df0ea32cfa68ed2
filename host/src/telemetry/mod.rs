//! Traces and stage timings. Every call runs inside a `tracing` span, its root, and each
//! of its stages (access, policy, session, the upstream request, the content plugin,
//! each redaction plugin, result policy, retention) is a [`Stage`]: a child span of the
//! call when spans are exported, and a sample of the `airlock_stage_duration_seconds`
//! histogram through the `metrics` facade. With no subscriber interested and no recorder
//! installed, neither does any work.
//!
//! With the `otel` feature, [`spans`] records Airlock's spans as they close and
//! [`export`] sends them to an OpenTelemetry collector over OTLP/HTTP from a thread of
//! its own, every attribute, event and status message scrubbed of the secrets
//! Airlock knows first; [`logs`] adds the trace and span ids to JSON log lines. The
//! settings come from `[telemetry]` or the standard `OTEL_*` variables ([`Settings`]).
//!
//! Layer 0 (leaves). Imports `secrets` (the scrubber) only.

#[cfg(feature = "otel")]
pub mod export;
#[cfg(feature = "otel")]
pub mod logs;
#[cfg(feature = "otel")]
pub mod spans;
#[cfg(feature = "otel")]
mod stages;
pub mod traceparent;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How long each stage of a call took, by stage (`access`, `policy`, `session`,
/// `upstream`, `content`, `redaction`, `result_policy`, `retain`).
pub const STAGE_SECONDS: &str = "airlock_stage_duration_seconds";

/// Plugin calls that trapped, by plugin, stage and kind (`deadline`, `memory_limit`,
/// `stack_overflow`, `panic`, `other`): deadline and memory refusals among them.
pub const PLUGIN_TRAPS: &str = "airlock_plugin_traps_total";

/// Results accepted for retention and not yet written.
pub const RETENTION_QUEUE: &str = "airlock_retention_queue_depth";

/// Where and how spans are exported: `[telemetry]` in a config file, or the standard
/// OpenTelemetry variables for what it leaves out.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// The OTLP/HTTP traces URL (`…/v1/traces`). `None`: no export.
    pub traces_endpoint: Option<String>,
    /// `service.name` on every span.
    pub service_name: String,
    /// Headers on every export request (a collector's credentials, for example).
    pub headers: BTreeMap<String, String>,
    /// The share of new traces kept, 0.0–1.0; a call with a caller's trace context
    /// follows the caller's sampling decision.
    pub sample_ratio: f64,
    /// How long closed spans wait to be sent, at most (`OTEL_BSP_SCHEDULE_DELAY`, ms).
    pub schedule_delay: Duration,
    /// Closed spans kept while unsent; more are dropped (`OTEL_BSP_MAX_QUEUE_SIZE`).
    pub max_queue_size: usize,
    /// Spans per export request (`OTEL_BSP_MAX_EXPORT_BATCH_SIZE`).
    pub max_export_batch_size: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            traces_endpoint: None,
            service_name: "airlock".to_string(),
            headers: BTreeMap::new(),
            sample_ratio: 1.0,
            schedule_delay: Duration::from_secs(5),
            max_queue_size: 2048,
            max_export_batch_size: 512,
        }
    }
}

impl Settings {
    /// The settings the `OTEL_*` variables give: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the
    /// traces URL as is), else `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces`;
    /// `OTEL_SERVICE_NAME`; `OTEL_EXPORTER_OTLP_HEADERS` (`k=v,k2=v2`);
    /// `OTEL_TRACES_SAMPLER_ARG` with a ratio sampler; `OTEL_BSP_SCHEDULE_DELAY`,
    /// `OTEL_BSP_MAX_QUEUE_SIZE`, `OTEL_BSP_MAX_EXPORT_BATCH_SIZE` (a value that is not a
    /// positive whole number is ignored, as OpenTelemetry's SDKs do). `OTEL_SDK_DISABLED=true` or
    /// `OTEL_TRACES_EXPORTER=none` turn export off.
    pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Settings {
        let mut settings = Settings::default();
        let set = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        settings.traces_endpoint = set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .or_else(|| set("OTEL_EXPORTER_OTLP_ENDPOINT").map(|base| traces_url(&base)));
        if let Some(name) = set("OTEL_SERVICE_NAME") {
            settings.service_name = name;
        }
        if let Some(headers) = set("OTEL_EXPORTER_OTLP_HEADERS") {
            for pair in headers.split(',') {
                if let Some((k, v)) = pair.split_once('=') {
                    let value = percent_decode(v.trim());
                    settings.headers.insert(k.trim().to_string(), value);
                }
            }
        }
        let ratio_sampler = set("OTEL_TRACES_SAMPLER").is_some_and(|s| s.contains("traceidratio"));
        if ratio_sampler
            && let Some(ratio) = set("OTEL_TRACES_SAMPLER_ARG").and_then(|r| r.parse::<f64>().ok())
            && (0.0..=1.0).contains(&ratio)
        {
            settings.sample_ratio = ratio;
        }
        let positive = |name: &str| {
            set(name)
                .and_then(|v| v.trim().parse::<u64>().ok())
                .filter(|n| *n > 0)
        };
        if let Some(ms) = positive("OTEL_BSP_SCHEDULE_DELAY") {
            settings.schedule_delay = Duration::from_millis(ms);
        }
        if let Some(size) = positive("OTEL_BSP_MAX_QUEUE_SIZE") {
            settings.max_queue_size = size as usize;
        }
        if let Some(size) = positive("OTEL_BSP_MAX_EXPORT_BATCH_SIZE") {
            settings.max_export_batch_size = size as usize;
        }
        let disabled = set("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
            || set("OTEL_TRACES_EXPORTER").is_some_and(|v| v.eq_ignore_ascii_case("none"));
        if disabled {
            settings.traces_endpoint = None;
        }
        settings
    }

    /// Whether spans are exported.
    pub fn exports(&self) -> bool {
        self.traces_endpoint.is_some()
    }
}

/// The traces URL under an OTLP/HTTP base URL (`http://collector:4318` →
/// `http://collector:4318/v1/traces`).
pub fn traces_url(base: &str) -> String {
    format!("{}/v1/traces", base.trim().trim_end_matches('/'))
}

/// `%XX` escapes decoded (the OTLP headers variable is URL-encoded).
fn percent_decode(text: &str) -> String {
    let bytes: Vec<u8> =
        form_urlencoded::parse(format!("v={}", text.replace('+', "%2B")).as_bytes())
            .next()
            .map(|(_, v)| v.into_owned().into_bytes())
            .unwrap_or_default();
    String::from_utf8(bytes).unwrap_or_default()
}

/// Where a call's stages are recorded: the call's span, when it is recorded for
/// export; otherwise nowhere, and its stages only time themselves. Find it once per call
/// ([`CallTrace::of`]) and open each stage from it ([`CallTrace::stage`]), which needs no
/// lookup of the current span.
#[derive(Debug, Clone, Default)]
pub struct CallTrace {
    #[cfg(feature = "otel")]
    parent: Option<stages::Parent>,
}

impl CallTrace {
    /// The trace of the call whose span is `span` (or of the recorded span above it).
    pub fn of(span: &tracing::Span) -> CallTrace {
        #[cfg(feature = "otel")]
        return CallTrace {
            parent: stages::Parent::of(span),
        };
        #[cfg(not(feature = "otel"))]
        {
            let _ = span;
            CallTrace {}
        }
    }

    /// The trace of the call the calling thread is in (its current span's).
    pub fn current() -> CallTrace {
        #[cfg(feature = "otel")]
        return CallTrace {
            parent: stages::Parent::current(),
        };
        #[cfg(not(feature = "otel"))]
        CallTrace {}
    }

    /// Runs `work` as stage `name` of this call (see [`Stage::done`]).
    pub async fn timed<F: std::future::Future>(&self, name: &'static str, work: F) -> F::Output {
        let stage = self.stage(name);
        let out = work.await;
        stage.done();
        out
    }

    /// Stage `name` of this call starts now.
    pub fn stage(&self, name: &'static str) -> Stage {
        Stage {
            name,
            started: Instant::now(),
            #[cfg(feature = "otel")]
            span: self
                .parent
                .as_ref()
                .map(|parent| stages::StageSpan::open(parent, name)),
        }
    }
}

/// One stage of a call (`access`, `policy`, `session`, `upstream`, `content`,
/// `redaction`, `result_policy`, `retain`): timed into [`STAGE_SECONDS`] when
/// [`done`](Stage::done), and, when the call is recorded for export, a child span of
/// the call, named after the stage, that ends when the `Stage` is dropped.
#[derive(Debug)]
pub struct Stage {
    name: &'static str,
    started: Instant,
    #[cfg(feature = "otel")]
    span: Option<stages::StageSpan>,
}

impl Stage {
    /// Whether the stage is recorded as a span that will be exported (what is set on
    /// it is kept; a stage of an unsampled trace only carries its context).
    pub fn recorded(&self) -> bool {
        #[cfg(feature = "otel")]
        return self.span.as_ref().is_some_and(stages::StageSpan::sampled);
        #[cfg(not(feature = "otel"))]
        false
    }

    /// Sets text attribute `name` (`otel.name`, `otel.kind` and `otel.status_code` set
    /// the span's name, kind and status, as on a `tracing` span). Nothing happens when
    /// the stage is not recorded.
    pub fn set_str(&mut self, name: &'static str, value: &str) {
        #[cfg(feature = "otel")]
        if let Some(span) = &mut self.span
            && span.sampled()
        {
            span.set(name, spans::FieldValue::Str(value.into()));
        }
        #[cfg(not(feature = "otel"))]
        let _ = (name, value);
    }

    /// Sets number attribute `name`. Nothing happens when the stage is not recorded.
    pub fn set_u64(&mut self, name: &'static str, value: u64) {
        #[cfg(feature = "otel")]
        if let Some(span) = &mut self.span
            && span.sampled()
        {
            span.set(name, spans::unsigned(value));
        }
        #[cfg(not(feature = "otel"))]
        let _ = (name, value);
    }

    /// The stage's W3C trace context (`traceparent`, `tracestate`), to pass to the server
    /// it calls (an unsampled trace's too, its flag off); `None` when the call is not
    /// recorded.
    pub fn context(&self) -> Option<(String, Option<String>)> {
        #[cfg(feature = "otel")]
        return self.span.as_ref().map(stages::StageSpan::context);
        #[cfg(not(feature = "otel"))]
        None
    }

    /// The stage is over: its time goes to [`STAGE_SECONDS`], and its span ends. (A stage
    /// dropped without `done`, a call cancelled in it, ends its span but records no time.)
    pub fn done(self) {
        metrics::histogram!(STAGE_SECONDS, "stage" => self.name)
            .record(self.started.elapsed().as_secs_f64());
    }
}

impl Drop for Stage {
    fn drop(&mut self) {
        #[cfg(feature = "otel")]
        if let Some(span) = self.span.take() {
            span.close();
        }
    }
}

/// Makes the caller's W3C trace context (`traceparent`, `tracestate`) the parent of
/// `span`, when spans are exported. Nothing happens otherwise.
pub fn adopt_parent(span: &tracing::Span, traceparent: &str, tracestate: Option<&str>) {
    #[cfg(feature = "otel")]
    spans::adopt_parent(span, traceparent, tracestate);
    #[cfg(not(feature = "otel"))]
    let _ = (span, traceparent, tracestate);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn the_standard_variables_set_the_endpoint_name_and_headers() {
        let s = Settings::from_env(&env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/"),
            ("OTEL_SERVICE_NAME", "gateway-eu"),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "authorization=Bearer%20abc,x-team=ops",
            ),
            ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "0.25"),
        ]));
        assert_eq!(
            s.traces_endpoint.as_deref(),
            Some("http://collector:4318/v1/traces")
        );
        assert_eq!(s.service_name, "gateway-eu");
        assert_eq!(s.headers["authorization"], "Bearer abc");
        assert_eq!(s.headers["x-team"], "ops");
        assert_eq!(s.sample_ratio, 0.25);
        assert_eq!(s.schedule_delay, Duration::from_secs(5));
        let batching = Settings::from_env(&env(&[
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
            ("OTEL_BSP_MAX_QUEUE_SIZE", "0"),
            ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "64"),
        ]));
        assert_eq!(batching.schedule_delay, Duration::from_millis(100));
        assert_eq!(batching.max_queue_size, 2048, "0 is not a queue size");
        assert_eq!(batching.max_export_batch_size, 64);
        let traces = Settings::from_env(&env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:4318"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://b:4318/custom"),
        ]));
        assert_eq!(
            traces.traces_endpoint.as_deref(),
            Some("http://b:4318/custom")
        );
    }

    #[test]
    fn nothing_set_or_disabled_means_no_export() {
        assert!(!Settings::from_env(&env(&[])).exports());
        let off = Settings::from_env(&env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
            ("OTEL_SDK_DISABLED", "true"),
        ]));
        assert!(!off.exports());
    }
}
