//! Start-up with a tested catalog against start-up that connects to learn the tools —
//! both measured in the same run on the demo server built into the `airlock` binary
//! (a real child process). `airlock` = `Airlock::start` + `close` when `airlock servers
//! test` saved the catalog (no process is spawned); `baseline` = the same when it did
//! not (spawn, handshake, `tools/list`, close). `scripts/bench-ratios.sh` prints the
//! ratio.

use airlock_host::config::{Config, process_env};
use airlock_host::{Airlock, AirlockOptions};
use criterion::{Criterion, criterion_group, criterion_main};

fn config() -> Config {
    let text = format!(
        "[mcp_servers.demo]\ntype = \"stdio\"\ncommand = {:?}\nargs = [\"demo-server\"]\n",
        env!("CARGO_BIN_EXE_airlock")
    );
    Config::from_str(std::path::Path::new("bench.toml"), &text, &process_env).unwrap()
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let tested = tempfile::tempdir().unwrap();
    let untested = tempfile::tempdir().unwrap();
    let loaded = config();
    let server = loaded.servers["demo"].clone();
    let report = runtime
        .block_on(Airlock::test_service(
            server,
            loaded.storage.clone(),
            AirlockOptions::new(tested.path()),
        ))
        .unwrap();
    assert!(report.verified && !report.tools.is_empty());

    let start = |dir: &std::path::Path| {
        let airlock = runtime
            .block_on(Airlock::start(config(), AirlockOptions::new(dir)))
            .unwrap();
        let tools = airlock.catalog().tools().len();
        runtime.block_on(airlock.close());
        tools
    };
    // Both paths name the same tools.
    assert_eq!(start(tested.path()), start(untested.path()));

    let mut group = c.benchmark_group("startup_demo_server");
    group.sample_size(20);
    group.bench_function("airlock", |b| b.iter(|| start(tested.path())));
    group.bench_function("baseline", |b| b.iter(|| start(untested.path())));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
