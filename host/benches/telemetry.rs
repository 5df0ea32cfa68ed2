//! What observability costs the P2 call (`Airlock::call_with`, a 4 KiB echo on the demo
//! server, a real child process over stdio), measured in the same run:
//!
//! - `off`: nothing interested in Airlock's spans and no metrics recorder — the default
//!   (no `[telemetry]`, logs at `warn`);
//! - `traced`: every span of every call exported over OTLP/HTTP (protobuf, the batch
//!   exporter) to a receiver on loopback, scrubbed on the way;
//! - `metrics`: a Prometheus recorder installed and `Airlock::record_metrics` running (what
//!   `airlock serve --http` does), stage histograms included.
//!
//! One process-wide subscriber carries the OpenTelemetry layer behind a switch, so `off`
//! and `traced` run the same binary; the metrics recorder, once installed, stays, so
//! `metrics` runs last. `scripts/bench-ratios.sh` prints traced/off and metrics/off.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use airlock_host::config::{Config, process_env};
use airlock_host::telemetry::{Settings, export};
use airlock_host::{Airlock, AirlockOptions, CallOptions};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::FilterExt;
use tracing_subscriber::layer::SubscriberExt;

const AIRLOCK: &str = env!("CARGO_BIN_EXE_airlock");

/// Whether the OpenTelemetry layer sees spans.
static TRACING: AtomicBool = AtomicBool::new(false);

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
    let switch = tracing_subscriber::filter::filter_fn(|_| TRACING.load(Ordering::Relaxed));
    let switched = export::unfiltered_layer(&provider).with_filter(export::ours().and(switch));
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(switched)).unwrap();

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

    let mut group = c.benchmark_group("telemetry_4KiB");
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.bench_function("off", |b| b.iter(call));
    TRACING.store(true, Ordering::Relaxed);
    group.bench_function("traced", |b| b.iter(call));
    TRACING.store(false, Ordering::Relaxed);
    // Reported, not asserted: the figure is only meaningful if the spans arrived.
    let flushed = provider.force_flush();
    eprintln!(
        "traced: the receiver got {} export requests (flush: {flushed:?})",
        exports.load(Ordering::Relaxed)
    );

    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new()
        .install_recorder()
        .unwrap();
    let recording = rt.block_on(async { airlock.record_metrics() });
    group.bench_function("metrics", |b| b.iter(call));
    group.finish();
    assert!(recorder.render().contains("airlock_stage_duration_seconds"));

    recording.abort();
    rt.block_on(airlock.close());
    std::thread::spawn(move || provider.shutdown())
        .join()
        .unwrap()
        .ok();
}

criterion_group!(benches, bench);
criterion_main!(benches);
