#!/usr/bin/env bash
# The test command. Installs everything the tests need — the wasm32-wasip2 target, the
# npm reference servers (tests/peers, pinned by package-lock.json), the Python MCP SDK
# (tests/.venv, pinned by requirements.txt, with Playwright and moto; and its 2.x, which
# speaks 2026-07-28, in tests/.venv-modern), Debian's Chromium (the console's browser
# test) and Prometheus (tests/metrics.rs scrapes /metrics), PostgreSQL (Debian's
# package, when missing) and the JavaScript plugin's pinned componentize-qjs
# (plugins/policy-js) — builds that plugin from source, starts PostgreSQL and an S3
# server (moto) on loopback, then runs every test: once with the local storage pair
# (SQLite and the data directory), and the library and gateway suites again with the
# remote pair (PostgreSQL and S3). The services stop at the end.
set -euo pipefail
# A clean clone builds once: incremental compilation's caches only cost it time.
if [ -n "${CI:-}" ]; then
    export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
fi
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

echo "== toolchain"
rustup target add wasm32-wasip2
rustup component add rustfmt clippy

echo "== formatting and lints: cargo fmt --check, clippy -D warnings (full and lean builds)"
cargo fmt --all --check
cargo clippy --locked -p airlock-host --all-targets -- -D warnings
cargo clippy --locked -p airlock-host --no-default-features -- -D warnings

echo "== npm test peers"
(cd tests/peers && npm ci --no-audit --no-fund --loglevel=error)

echo "== Python test peers"
if [ ! -x tests/.venv/bin/python ]; then
    python3 -m venv tests/.venv
fi
tests/.venv/bin/pip install --quiet --disable-pip-version-check -r tests/peers/python/requirements.txt
# The 2026-07-28-era SDK (2.x) cannot share a venv with the 1.x one: it has its own.
if [ ! -x tests/.venv-modern/bin/python ]; then
    python3 -m venv tests/.venv-modern
fi
tests/.venv-modern/bin/pip install --quiet --disable-pip-version-check -r tests/peers/python-modern/requirements.txt

# Installs Debian's package $1 unless its command is already on PATH.
apt_install() {
    if ! command -v "$1" >/dev/null 2>&1; then
        local sudo=""
        if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$1" >/dev/null
    fi
}

echo "== Chromium, for the operator console's browser test (tests/console.rs)"
apt_install chromium
chromium --version 2>/dev/null  # (Debian's wrapper script warns on stderr about its memory check)

echo "== Prometheus, scraping /metrics in tests/metrics.rs"
apt_install prometheus
prometheus --version 2>&1 | head -1

echo "== the JavaScript policy plugin, built from source (plugins/policy-js)"
scripts/build-js-plugin.sh

echo "== storage services: PostgreSQL and an S3 server (moto), on loopback"
storage_env=$(scripts/storage-services.sh start)
eval "$storage_env"
stop_storage() {
    scripts/storage-services.sh stop "$AIRLOCK_TEST_STORAGE_DIR" "$AIRLOCK_TEST_PG_BIN"
}
trap stop_storage EXIT
echo "PostgreSQL and S3 up ($AIRLOCK_TEST_S3_ENDPOINT)"

echo "== tests (storage: SQLite and the data directory; tests/scale.rs: PostgreSQL and S3)"
cargo test --locked -p airlock-host -p airlock-guest -p airlock-plugin-standard -p airlock-plugin-text-only -p airlock-plugin-policy "$@"

# tests/protocol.rs is not among them: it walks protocol eras (Python clients and
# servers, two minutes of CPU), and what it stores is what tests/gateway.rs stores.
echo "== the library and gateway suites again, storage: PostgreSQL and S3"
AIRLOCK_TEST_STORAGE=remote cargo test --locked -p airlock-host \
    --test access --test results --test registry --test reconcile --test gateway \
    --test process_cleanup --test policy --test policy_engines \
    --test sessions --test console --test catalog --test limits --test redaction \
    --test content --test cli --test import --test oauth --test tasks --test upstreams "$@"
stop_storage
trap - EXIT

echo "== the embeddable library (built lean by the lint step) links no storage client it does not use"
heavy=$(cargo tree --locked -p airlock-host --no-default-features -e normal --prefix none \
    | grep -E '^(tokio-postgres|postgres-native-tls|object_store|clap|keyring|reqwest|sse-stream|openssl) ' | sort -u || true)
if [ -n "$heavy" ]; then
    echo "the lean build (--no-default-features) still depends on:" >&2
    echo "$heavy" >&2
    exit 1
fi
echo "lean: no tokio-postgres, object_store, clap, keyring, reqwest or openssl"

echo "== no test server outlived the tests"
sleep 1
leftover=$(pgrep -af "tests/peers/|demo-server|airlock_fixture" | grep -v pgrep || true)
if [ -n "$leftover" ]; then
    echo "processes left behind by the tests:" >&2
    echo "$leftover" >&2
    exit 1
fi
echo "none left"
