//! Storage beyond one machine, each pair in the same run: a retain-and-page round trip
//! of a 256 KiB result in S3 (moto on loopback) against the data directory, and a grant
//! check in PostgreSQL (loopback) against SQLite: kept in memory, and the first check of
//! a pair (a round trip); the same for a gateway token presented by a request (found by
//! its fingerprint): kept in memory against SQLite, and asked (a round trip) against
//! kept. Needs the services
//! `scripts/storage-services.sh` starts (`scripts/bench-ratios.sh --bench storage` starts
//! and stops them); without them it says so and measures nothing.

use airlock_host::config::{RegistryLocation, ResultsLocation, S3Location};
use airlock_host::registry::Registry;
use airlock_host::results::{DEFAULT_PREVIEW, ResultLimits, ResultStore};
use criterion::{Criterion, criterion_group, criterion_main};

/// The text kept: 256 KiB, paged back in six 48 KiB pages.
fn text() -> String {
    (0..8_192)
        .map(|i| format!("row {i:08} of the result, padded to 32\n"))
        .collect::<String>()[..256 << 10]
        .to_string()
}

fn round_trip(store: &ResultStore, text: &str) {
    let (record, _) = store
        .retain_for(Some("agent"), "svc", text, false, DEFAULT_PREVIEW)
        .unwrap();
    let id = record.output_id.unwrap();
    let mut offset = 0;
    loop {
        let page = store
            .read_for("agent", "svc", &id, offset, DEFAULT_PREVIEW)
            .unwrap();
        match page.next_offset {
            Some(next) => offset = next,
            None => break,
        }
    }
}

fn services() -> Option<(String, String, String)> {
    Some((
        std::env::var("AIRLOCK_TEST_POSTGRES_URL").ok()?,
        std::env::var("AIRLOCK_TEST_S3_ENDPOINT").ok()?,
        std::env::var("AIRLOCK_TEST_S3_BUCKET").ok()?,
    ))
}

fn storage(c: &mut Criterion) {
    let Some((postgres, endpoint, bucket)) = services() else {
        eprintln!(
            "storage bench: AIRLOCK_TEST_POSTGRES_URL / AIRLOCK_TEST_S3_* are not set; run it with scripts/bench-ratios.sh --bench storage"
        );
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let limits = ResultLimits::default();
    let tag = format!("bench{}", std::process::id());
    let s3 = ResultsLocation::S3(S3Location {
        bucket,
        prefix: tag.clone(),
        endpoint: Some(endpoint),
        region: Some("us-east-1".into()),
        access_key_id: Some("airlock-test".into()),
        secret_access_key: None,
    });
    let remote = ResultStore::open_at(
        tmp.path(),
        &s3,
        Some("airlock-test-secret".into()),
        limits,
        None,
    )
    .unwrap();
    let local = ResultStore::open(tmp.path(), limits).unwrap();
    let text = text();
    let mut group = c.benchmark_group("retain_and_page_256KiB");
    group.sample_size(30);
    group.bench_function("s3", |b| b.iter(|| round_trip(&remote, &text)));
    group.bench_function("local", |b| b.iter(|| round_trip(&local, &text)));
    group.finish();

    let sqlite = Registry::open(tmp.path()).unwrap();
    let pg = Registry::open_at(
        tmp.path(),
        &RegistryLocation::Postgres {
            url: postgres,
            schema: tag,
            bounds: Default::default(),
            token_key: None,
        },
    )
    .unwrap();
    for registry in [&sqlite, &pg] {
        registry.grant("agent", "svc").unwrap();
    }
    // The first check starts the listener; answers are kept once it listens.
    assert!(pg.is_granted("agent", "svc").unwrap());
    let listening = std::time::Instant::now();
    while !pg.hears_changes() {
        assert!(
            listening.elapsed() < std::time::Duration::from_secs(10),
            "the PostgreSQL registry never listened for changes"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let mut group = c.benchmark_group("grant_check");
    // Kept in memory after the first check, while changes are heard.
    group.bench_function("postgres", |b| {
        b.iter(|| assert!(pg.is_granted("agent", "svc").unwrap()))
    });
    // The first check of a pair (or the first after a change): one round trip.
    let mut pair = 0u64;
    group.bench_function("postgres_first", |b| {
        b.iter(|| {
            pair += 1;
            assert!(!pg.is_granted("agent", &format!("never{pair}")).unwrap())
        })
    });
    group.bench_function("sqlite", |b| {
        b.iter(|| assert!(sqlite.is_granted("agent", "svc").unwrap()))
    });
    group.finish();

    let token = airlock_host::registry::TokenRecord {
        id: "bench-token".into(),
        agent: "agent".into(),
        fingerprint: "sha256:bench".into(),
        secret_ref: "secret:none".into(),
        created_at: 0,
    };
    for registry in [&sqlite, &pg] {
        registry.insert_token(&token).unwrap();
    }
    // The insert's own notification forgets what is kept: let it arrive first.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let found = |registry: &Registry| {
        registry
            .token_by_fingerprint("sha256:bench")
            .unwrap()
            .is_some()
    };
    let mut group = c.benchmark_group("token_check");
    group.bench_function("postgres", |b| b.iter(|| assert!(found(&pg))));
    // An unknown token is never kept: each is a round trip, as a token was before.
    group.bench_function("postgres_asked", |b| {
        b.iter(|| assert!(pg.token_by_fingerprint("sha256:unknown").unwrap().is_none()))
    });
    group.bench_function("sqlite", |b| b.iter(|| assert!(found(&sqlite))));
    group.finish();
}

criterion_group!(benches, storage);
criterion_main!(benches);
