//! What observability costs the P2 call (`Airlock::call_with`, a 4 KiB echo on the demo
//! server, a real child process over stdio), measured in the same run:
//!
//! - `off`: nothing interested in Airlock's spans and no metrics recorder — the default
//!   (no `[telemetry]`, logs at `warn`);
//! - `traced`: every span of every call exported over OTLP/HTTP (protobuf, the batch
//!   exporter) to a receiver on loopback, scrubbed on the way;
//! - `traced_dropped`: the same spans through the same layer and batch processor, the
//!   batches dropped instead of encoded and sent: what the spans cost the call itself,
//!   apart from the export's work (which shares the machine's cores with it);
//! - `metrics`: a Prometheus recorder installed and `Airlock::record_metrics` running (what
//!   `airlock serve --http` does), stage histograms included.
//!
//! One process-wide subscriber carries both OpenTelemetry layers, each behind a switch,
//! so `off`, `traced` and `traced_dropped` run the same binary, taking turns call by call.
//! The metrics recorder, once installed, stays: `metrics` runs last and is compared with
//! `off_again`, measured just before it. `scripts/bench-ratios.sh` prints traced/off,
//! traced_dropped/off and metrics/off_again.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use airlock_host::config::{Config, process_env};
use airlock_host::telemetry::{Settings, export};
use airlock_host::{Airlock, AirlockOptions, CallOptions};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::FilterExt;
use tracing_subscriber::layer::SubscriberExt;

const AIRLOCK: &str = env!("CARGO_BIN_EXE_airlock");

/// Whether the exporting OpenTelemetry layer sees spans.
static TRACING: AtomicBool = AtomicBool::new(false);
/// Whether the OpenTelemetry layer whose batches are dropped sees spans.
static DROPPING: AtomicBool = AtomicBool::new(false);

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

    let (collector, exports) = rt.block_on(receiver());
    let settings = Settings {
        traces_endpoint: Some(airlock_host::telemetry::traces_url(&collector)),
        ..Settings::default()
    };
    let provider = export::provider(&settings, rt.handle().clone()).unwrap();
    // Asked at every span (a `filter_fn` would be asked once per callsite and cached).
    let switch =
        tracing_subscriber::filter::dynamic_filter_fn(|_, _| TRACING.load(Ordering::Relaxed));
    let switched = export::unfiltered_layer(&provider).with_filter(export::ours().and(switch));
    let dropped_spans = Arc::new(AtomicUsize::new(0));
    let dropping = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_batch_exporter(Dropped(dropped_spans.clone()))
        .build();
    let switch =
        tracing_subscriber::filter::dynamic_filter_fn(|_, _| DROPPING.load(Ordering::Relaxed));
    let dropping_layer =
        export::unfiltered_layer(&dropping).with_filter(export::ours().and(switch));
    tracing::subscriber::set_global_default(
        tracing_subscriber::registry()
            .with(switched)
            .with(dropping_layer),
    )
    .unwrap();

    let mut options = AirlockOptions::new(work.path().join("data"));
    options.plugin_cache = Some(work.path().join("plugin-cache"));
    let config = Config::from_str(&config_path, &config_text, &process_env).unwrap();
    let airlock = rt.block_on(Airlock::start(config, options)).unwrap();
    let text: String = "0123456789abcdef".repeat(256);
    let call = || {
        rt.block_on(airlock.call_with(
            "mcp__demo__echo",
            json!({"text": text}),
            CallOptions::default(),
        ))
        .unwrap()
    };
    assert_eq!(call().content[0]["text"], json!(text));

    // `off`, `traced` and `traced_dropped` take turns call by call, so the run's drift
    // (the store grows with every call) and the machine's moods fall on all alike; each
    // reports its own calls' time. The exporter's thread works beside all three.
    let turns = |mine: usize| {
        move |iters: u64| {
            let mut spent = [Duration::ZERO; 3];
            for _ in 0..iters {
                for (turn, time) in spent.iter_mut().enumerate() {
                    TRACING.store(turn == 1, Ordering::Relaxed);
                    DROPPING.store(turn == 2, Ordering::Relaxed);
                    let started = Instant::now();
                    call();
                    *time += started.elapsed();
                }
            }
            spent[mine]
        }
    };
    let mut group = c.benchmark_group("telemetry_4KiB");
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.bench_function("off", |b| b.iter_custom(turns(0)));
    group.bench_function("traced", |b| b.iter_custom(turns(1)));
    group.bench_function("traced_dropped", |b| b.iter_custom(turns(2)));
    TRACING.store(false, Ordering::Relaxed);
    DROPPING.store(false, Ordering::Relaxed);
    provider.force_flush().unwrap();
    dropping.force_flush().unwrap();
    let exported = exports.load(Ordering::Relaxed);
    eprintln!(
        "traced: the receiver got {exported} export requests; traced_dropped: {} spans dropped",
        dropped_spans.load(Ordering::Relaxed)
    );
    assert!(exported > 0, "the traced calls' spans reached the receiver");
    assert!(
        dropped_spans.load(Ordering::Relaxed) > 0,
        "the dropping layer saw spans"
    );
    // A recorder cannot be taken out again: `metrics` is compared with the run just
    // before it was installed.
    group.bench_function("off_again", |b| b.iter(call));

    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new()
        .install_recorder()
        .unwrap();
    let recording = rt.block_on(async { airlock.record_metrics() });
    group.bench_function("metrics", |b| b.iter(call));
    group.finish();
    assert!(recorder.render().contains("airlock_stage_duration_seconds"));

    recording.abort();
    rt.block_on(airlock.close());
    std::thread::spawn(move || {
        let _ = dropping.shutdown();
        provider.shutdown()
    })
    .join()
    .unwrap()
    .ok();
}

criterion_group!(benches, bench);
criterion_main!(benches);
