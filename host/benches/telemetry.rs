//! What observability costs the P2 call (`Airlock::call_with`, a 4 KiB echo on the demo
//! server, a real child process over stdio), measured in the same run:
//!
//! - `idle`: before any subscriber or recorder exists (Airlock's default: no
//!   `[telemetry]`, no `/metrics`), the call as it runs, beside the telemetry statements
//!   one call executes (its spans, stage timings and outcome record) run alone with
//!   nothing listening: what the instrumentation costs a call that nobody observes;
//! - `off`: the subscriber `airlock` installs when no exporter is configured (its log
//!   layer at the default `warn`), the recorder installed and switched off;
//! - `traced`: the subscriber `airlock` installs with an exporter: the same log layer and
//!   the exporting layer, every span of every call exported over OTLP/HTTP (protobuf, the
//!   batch exporter) to a receiver on loopback, scrubbed on the way;
//! - `traced_dropped`: the same spans through the same layer and export thread, the
//!   batches dropped instead of encoded and sent: what the spans cost the call itself,
//!   apart from the export's work (which shares the machine's cores with it);
//! - `metrics`: `off`'s subscriber, the Prometheus recorder recording, as `airlock serve
//!   --http` does (stage histograms and the figures `Airlock::record_metrics` reads off
//!   the event stream; that reader runs in every mode, recording only in this one).
//!
//! Each mode's subscriber is built as `cli/logging.rs` builds it and made the calling
//! thread's default for its turn (the spans a call opens keep their subscriber wherever
//! they are polled; the run checks that every call's seven spans reach the exporter).
//! One process-wide recorder forwards to Prometheus behind a mode switch. So the four
//! modes run in one binary, taking turns call by call (the order rotating). Criterion
//! reports each mode's calls from its own window; the ratios come from every turn of all
//! four windows together (`paired.json`), so drift between windows cannot decide them.
//! `scripts/bench-ratios.sh` prints the ratios.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use airlock_host::config::{Config, process_env};
use airlock_host::telemetry::{CallTrace, Settings, export};
use airlock_host::{Airlock, AirlockOptions, CallOptions};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;

const AIRLOCK: &str = env!("CARGO_BIN_EXE_airlock");

/// The mode calls run in now: one of `OFF`, `TRACED`, `DROPPED`, `METRICS`.
static MODE: AtomicUsize = AtomicUsize::new(OFF);
const OFF: usize = 0;
const TRACED: usize = 1;
const DROPPED: usize = 2;
const METRICS: usize = 3;
const MODES: usize = 4;

fn mode_is(mode: usize) -> bool {
    MODE.load(Ordering::Relaxed) == mode
}

/// A recorder that forwards to `inner` in the `METRICS` mode and records nothing otherwise
/// (the `metrics` macros register a handle at every use, so the switch is asked each time).
struct Switched<R>(R);

impl<R: metrics::Recorder> metrics::Recorder for Switched<R> {
    fn describe_counter(
        &self,
        key: metrics::KeyName,
        unit: Option<metrics::Unit>,
        text: metrics::SharedString,
    ) {
        self.0.describe_counter(key, unit, text)
    }
    fn describe_gauge(
        &self,
        key: metrics::KeyName,
        unit: Option<metrics::Unit>,
        text: metrics::SharedString,
    ) {
        self.0.describe_gauge(key, unit, text)
    }
    fn describe_histogram(
        &self,
        key: metrics::KeyName,
        unit: Option<metrics::Unit>,
        text: metrics::SharedString,
    ) {
        self.0.describe_histogram(key, unit, text)
    }
    fn register_counter(
        &self,
        key: &metrics::Key,
        meta: &metrics::Metadata<'_>,
    ) -> metrics::Counter {
        if mode_is(METRICS) {
            self.0.register_counter(key, meta)
        } else {
            metrics::Counter::noop()
        }
    }
    fn register_gauge(&self, key: &metrics::Key, meta: &metrics::Metadata<'_>) -> metrics::Gauge {
        if mode_is(METRICS) {
            self.0.register_gauge(key, meta)
        } else {
            metrics::Gauge::noop()
        }
    }
    fn register_histogram(
        &self,
        key: &metrics::Key,
        meta: &metrics::Metadata<'_>,
    ) -> metrics::Histogram {
        if mode_is(METRICS) {
            self.0.register_histogram(key, meta)
        } else {
            metrics::Histogram::noop()
        }
    }
}

/// The calls made in the `DROPPED` mode (each exports its spans to the dropping exporter).
static DROPPED_CALLS: AtomicUsize = AtomicUsize::new(0);

/// Every turn's time per mode, over all windows, one by one (nanoseconds).
static TURNS: Mutex<[Vec<u64>; MODES]> = Mutex::new([const { Vec::new() }; MODES]);

/// The mean, median, 90th and 99th percentile of `times` (nanoseconds), as
/// `{mode}_ns`, `{mode}_p50_ns`, `{mode}_p90_ns` and `{mode}_p99_ns`.
fn summary(mode: &str, times: &mut [u64]) -> serde_json::Map<String, serde_json::Value> {
    times.sort_unstable();
    let n = times.len().max(1);
    let at = |q: f64| times.get(((n - 1) as f64 * q).round() as usize).copied();
    let mean = times.iter().sum::<u64>() as f64 / n as f64;
    [
        ("", Some(mean)),
        ("_p50", at(0.5).map(|t| t as f64)),
        ("_p90", at(0.9).map(|t| t as f64)),
        ("_p99", at(0.99).map(|t| t as f64)),
    ]
    .into_iter()
    .map(|(suffix, value)| (format!("{mode}{suffix}_ns"), json!(value.unwrap_or(0.0))))
    .collect()
}

/// The telemetry statements one P2 call executes, in its order (`airlock/calls.rs` and
/// `plugin/pipeline.rs`), with Airlock's target so the exporting layer takes them: with
/// nothing listening, what instrumenting costs a call; traced, what the spans cost alone.
fn one_calls_instrumentation(tool: &str, agent: &str) {
    use tracing::field::Empty;
    let root = tracing::info_span!(
        target: "airlock_host",
        "call",
        otel.name = %format_args!("tools/call {tool}"),
        mcp.method.name = "tools/call",
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = tool,
        airlock.agent = agent,
        airlock.service = Empty,
        airlock.outcome = Empty,
        error.type = Empty,
        airlock.output_id = Empty,
        airlock.result.size = Empty,
        airlock.redactions = Empty,
        otel.status_code = Empty,
        otel.status_description = Empty,
    );
    let trace = CallTrace::of(&root);
    let _in_root = root.enter();
    tracing::Span::current().record("airlock.service", "demo");
    trace.stage("access").done();
    trace.stage("session").done();
    let mut upstream = trace.stage("upstream");
    if upstream.recorded() {
        upstream.set_str("otel.name", &format!("tools/call {tool}"));
        upstream.set_str("otel.kind", "client");
        upstream.set_str("mcp.method.name", "tools/call");
        upstream.set_str("gen_ai.tool.name", tool);
        upstream.set_str("airlock.service", "demo");
    }
    std::hint::black_box(upstream.context());
    upstream.done();
    let mut content = trace.stage("content");
    content.set_str("airlock.plugin", "builtin:standard");
    content.done();
    let mut redaction = trace.stage("redaction");
    redaction.set_str("airlock.plugin", "builtin:standard");
    redaction.set_u64("airlock.redactions", 0);
    redaction.done();
    let mut retain = trace.stage("retain");
    retain.set_str("airlock.output_id", "id");
    retain.set_u64("airlock.result.size", 4096);
    retain.done();
    drop(_in_root);
    if !root.is_disabled() {
        tracing::record_all!(root, airlock.outcome = "ok", airlock.result.size = 4096u64);
    }
}

/// A span exporter that drops every batch (and counts the spans).
#[derive(Debug, Default)]
struct Dropped(Arc<AtomicUsize>);

impl opentelemetry_sdk::trace::SpanExporter for Dropped {
    fn export(
        &self,
        batch: Vec<opentelemetry_sdk::trace::SpanData>,
    ) -> impl std::future::Future<Output = opentelemetry_sdk::error::OTelSdkResult> + Send {
        self.0.fetch_add(batch.len(), Ordering::Relaxed);
        std::future::ready(Ok(()))
    }
}

/// A loopback OTLP/HTTP receiver that counts the export requests it gets.
async fn receiver() -> (String, Arc<AtomicUsize>) {
    let received = Arc::new(AtomicUsize::new(0));
    let counted = received.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: axum::body::Bytes| {
            let counted = counted.clone();
            async move {
                assert!(!body.is_empty());
                counted.fetch_add(1, Ordering::Relaxed);
                axum::http::StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{address}"), received)
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let work = tempfile::tempdir().unwrap();
    let config_path = work.path().join("airlock.toml");
    let config_text = format!(
        "[mcp_servers.demo]\ntype = \"stdio\"\ncommand = {AIRLOCK:?}\nargs = [\"demo-server\"]\n"
    );
    std::fs::write(&config_path, &config_text).unwrap();

    let mut options = AirlockOptions::new(work.path().join("data"));
    options.plugin_cache = Some(work.path().join("plugin-cache"));
    let config = Config::from_str(&config_path, &config_text, &process_env).unwrap();
    let airlock = rt.block_on(Airlock::start(config, options)).unwrap();
    let text: String = "0123456789abcdef".repeat(256);
    let call = || {
        rt.block_on(airlock.calls().call_with(
            "mcp__demo__echo",
            json!({"text": text}),
            CallOptions::default(),
        ))
        .unwrap()
    };
    assert_eq!(call().content_json()[0]["text"], json!(text));

    // Before any subscriber or recorder exists: Airlock as it runs by default.
    let mut group = c.benchmark_group("telemetry_idle_4KiB");
    group.bench_function("call", |b| b.iter(call));
    group.bench_function("instrumentation", |b| {
        b.iter(|| one_calls_instrumentation("mcp__demo__echo", "default"))
    });
    group.finish();

    let (collector, exports) = rt.block_on(receiver());
    let settings = Settings {
        traces_endpoint: Some(airlock_host::telemetry::traces_url(&collector)),
        ..Settings::default()
    };
    let traced = export::SpanExport::start(&settings, rt.handle().clone()).unwrap();
    let dropped_spans = Arc::new(AtomicUsize::new(0));
    let dropping = export::SpanExport::with_exporter(
        Dropped(dropped_spans.clone()),
        &Settings::default(),
        rt.handle().clone(),
    )
    .unwrap();
    // Each mode's subscriber is the one `airlock` installs (cli/logging.rs): its log layer
    // (here writing nowhere, at its default `warn`), and, when spans are exported, the
    // exporting layer filtered to Airlock's own spans. A turn makes its mode's subscriber
    // the calling thread's default; the spans it opens keep theirs wherever they are
    // polled. No subscriber is the process's default.
    let logs = || {
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::sink)
            .with_filter(tracing_subscriber::EnvFilter::new("warn"))
    };
    let plain = tracing::Dispatch::new(tracing_subscriber::registry().with(logs()));
    let exporting = tracing::Dispatch::new(
        tracing_subscriber::registry()
            .with(logs())
            .with(traced.layer()),
    );
    let dropping_spans = tracing::Dispatch::new(
        tracing_subscriber::registry()
            .with(logs())
            .with(dropping.layer()),
    );
    let subscribers = [plain.clone(), exporting.clone(), dropping_spans, plain];
    let prometheus = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let rendered = prometheus.handle();
    metrics::set_global_recorder(Switched(prometheus)).unwrap();
    let recording = {
        let _runtime = rt.enter();
        airlock.record_metrics()
    };

    // The four modes take turns call by call, the order rotating, so the run's drift (the
    // store grows with every call) and the machine's moods fall on all alike; each
    // reports its own calls' time, and every turn is also kept in `TURNS`. The
    // exporter's thread works beside all of them.
    // For profiling one mode alone (`TELEMETRY_ONLY=0..3`): every turn runs it.
    let only: Option<usize> = std::env::var("TELEMETRY_ONLY")
        .ok()
        .map(|v| v.parse().unwrap());
    let subscribers = &subscribers;
    let turns = |mine: usize| {
        move |iters: u64| {
            let mut each: [Vec<u64>; MODES] = Default::default();
            for i in 0..iters as usize {
                for step in 0..MODES {
                    let turn = only.unwrap_or((i + step) % MODES);
                    MODE.store(turn, Ordering::Relaxed);
                    if turn == DROPPED {
                        DROPPED_CALLS.fetch_add(1, Ordering::Relaxed);
                    }
                    let started = Instant::now();
                    tracing::dispatcher::with_default(&subscribers[turn], call);
                    each[turn].push(started.elapsed().as_nanos() as u64);
                }
            }
            MODE.store(OFF, Ordering::Relaxed);
            let spent = Duration::from_nanos(each[mine].iter().sum());
            for (all, turns) in TURNS.lock().unwrap().iter_mut().zip(each) {
                all.extend(turns);
            }
            spent
        }
    };
    // The same statements with the exporting layer on: what the spans cost on their own.
    let mut group = c.benchmark_group("telemetry_spans");
    for (name, mode) in [("idle", OFF), ("traced", TRACED)] {
        group.bench_function(name, |b| {
            tracing::dispatcher::with_default(&subscribers[mode], || {
                b.iter(|| one_calls_instrumentation("mcp__demo__echo", "default"))
            })
        });
    }
    group.finish();

    let mut group = c.benchmark_group("telemetry_4KiB");
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.bench_function("off", |b| b.iter_custom(turns(OFF)));
    group.bench_function("traced", |b| b.iter_custom(turns(TRACED)));
    group.bench_function("traced_dropped", |b| b.iter_custom(turns(DROPPED)));
    group.bench_function("metrics", |b| b.iter_custom(turns(METRICS)));
    group.finish();
    let mut turns = TURNS.lock().unwrap();
    let mut paired = serde_json::Map::new();
    paired.insert("turns".into(), json!(turns[OFF].len()));
    for (mode, name) in [
        (OFF, "off"),
        (TRACED, "traced"),
        (DROPPED, "traced_dropped"),
        (METRICS, "metrics"),
    ] {
        paired.extend(summary(name, &mut turns[mode]));
    }
    drop(turns);
    let paired = serde_json::Value::Object(paired);
    eprintln!("every turn of the four windows: {paired}");
    let figures = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/criterion/telemetry_4KiB/paired.json");
    std::fs::create_dir_all(figures.parent().unwrap()).unwrap();
    std::fs::write(&figures, paired.to_string()).unwrap();
    traced.force_flush().unwrap();
    dropping.force_flush().unwrap();
    let exported = exports.load(Ordering::Relaxed);
    let calls = DROPPED_CALLS.load(Ordering::Relaxed).max(1);
    eprintln!(
        "traced: the receiver got {exported} export requests; traced_dropped: {} spans \
         dropped, {:.2} a call",
        dropped_spans.load(Ordering::Relaxed),
        dropped_spans.load(Ordering::Relaxed) as f64 / calls as f64
    );
    if only.is_none() {
        assert!(exported > 0, "the traced calls' spans reached the receiver");
        assert!(
            dropped_spans.load(Ordering::Relaxed) > 0,
            "the dropping layer saw spans"
        );
    }
    if only.is_none() || only == Some(METRICS) {
        let text = rendered.render();
        assert!(text.contains("airlock_stage_duration_seconds"), "{text}");
        assert!(text.contains("airlock_calls_total"), "{text}");
    }

    recording.abort();
    rt.block_on(airlock.close());
    std::thread::spawn(move || {
        let _ = dropping.shutdown();
        traced.shutdown()
    })
    .join()
    .unwrap()
    .ok();
}

criterion_group!(benches, bench);
criterion_main!(benches);
