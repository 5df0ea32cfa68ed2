//! Retention + preview of a 1 MiB and a 32 MiB result against a plain file write of the
//! same bytes, and search over a 10,000-tool catalog against a naive scan that
//! lower-cases every tool per query — each pair measured in the same run.
//! `scripts/bench-ratios.sh` prints the ratios (`airlock` / `baseline`).

use airlock_host::catalog::ToolIndex;
use airlock_host::plugin::NamedTool;
use airlock_host::results::{DEFAULT_PREVIEW, ResultLimits, ResultStore};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

fn catalog(n: usize) -> ToolIndex {
    let mut catalog = ToolIndex::default();
    for s in 0..10 {
        let service = format!("service{s}");
        let named = (0..n / 10)
            .map(|i| NamedTool {
                raw_name: format!("operation_{i}"),
                name: format!("mcp__{service}__operation_{i}"),
                description: Some(format!(
                    "Performs operation number {i} on the {service} backend, with retries"
                )),
                input_schema: r#"{"type":"object"}"#.into(),
            })
            .collect();
        catalog.add_service(&service, named).unwrap();
    }
    catalog
}

fn naive_search<'a>(catalog: &'a ToolIndex, query: &str) -> Vec<&'a str> {
    let words: Vec<String> = query.split_whitespace().map(str::to_lowercase).collect();
    catalog
        .tools()
        .filter(|t| {
            let hay = format!(
                "{} {} {} {}",
                t.name,
                t.service,
                t.raw_name,
                t.description.as_deref().unwrap_or("")
            )
            .to_lowercase();
            words.iter().all(|w| hay.contains(w.as_str()))
        })
        .map(|t| t.name.as_str())
        .collect()
}

fn bench(c: &mut Criterion) {
    let cat = catalog(10_000);
    let mut group = c.benchmark_group("search_10000_tools");
    group.throughput(Throughput::Elements(10_000));
    group.bench_function("airlock", |b| {
        b.iter(|| cat.search("service7 operation 42"))
    });
    group.bench_function("baseline", |b| {
        b.iter(|| naive_search(&cat, "service7 operation 42"))
    });
    group.finish();

    let tmp = tempfile::tempdir().unwrap();
    let store = ResultStore::open(
        tmp.path(),
        ResultLimits {
            max_retained: 64 << 20,
            preview: DEFAULT_PREVIEW,
        },
    )
    .unwrap();
    for (label, size) in [("1MiB", 1usize << 20), ("32MiB", 32 << 20)] {
        let text: String = "redacted output line with ünïcödé ✓\n"
            .chars()
            .cycle()
            .take(size)
            .collect();
        let mut group = c.benchmark_group(format!("retain_{label}"));
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.sample_size(if size > 4 << 20 { 10 } else { 30 });
        group.bench_function("airlock", |b| {
            b.iter(|| {
                store
                    .retain("bench", &text, false, DEFAULT_PREVIEW)
                    .unwrap()
            })
        });
        let plain = tmp.path().join("plain.txt");
        group.bench_function("baseline", |b| {
            b.iter(|| std::fs::write(&plain, text.as_bytes()).unwrap())
        });
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
