#!/usr/bin/env bash
# Runs every benchmark in host/benches/ and prints each figure against its baseline
# measured in the same run, with the issue's target and whether it is met. The same
# table replaces the one between the `bench:begin` and `bench:end` markers in README.md.
#
#   scripts/bench-ratios.sh              run everything, print, update README.md
#   scripts/bench-ratios.sh --bench NAME run one benchmark, then print/update (rows it
#                                        did not measure keep their last figures)
#   scripts/bench-ratios.sh --report     only print/update from the last run's estimates
#
# The storage benchmark needs PostgreSQL and an S3 server: this script starts them
# (scripts/storage-services.sh) and stops them afterwards.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
with_storage() {
    local env
    env=$(scripts/storage-services.sh start)
    eval "$env"
    trap 'scripts/storage-services.sh stop "$AIRLOCK_TEST_STORAGE_DIR" "$AIRLOCK_TEST_PG_BIN"' EXIT
    "$@"
}
# The identity benchmark's provider is an npm test peer.
if [ "${1:-}" != --report ] && [ ! -d tests/peers/node_modules/oidc-provider ]; then
    (cd tests/peers && npm ci --no-audit --no-fund --loglevel=error)
fi
case "${1:-}" in
    --report) ;;
    --bench)
        export BENCH_ONLY="${2:?--bench needs a benchmark name}"
        case "$BENCH_ONLY" in
            storage) with_storage cargo bench --locked -p airlock-host --bench storage ;;
            # It loads the JavaScript plugin: built from source first, as in a full run.
            second_language)
                scripts/build-js-plugin.sh
                cargo bench --locked -p airlock-host --bench second_language
                ;;
            *) cargo bench --locked -p airlock-host --bench "$BENCH_ONLY" ;;
        esac
        ;;
    *)
        scripts/build-js-plugin.sh
        with_storage cargo bench --locked -p airlock-host \
            --bench pipeline --bench catalog_results --bench startup \
            --bench end_to_end --bench concurrency --bench memory --bench second_language \
            --bench eras --bench telemetry --bench identity \
            --bench storage
        ;;
esac
python3 - <<'PY'
import datetime, json, os, pathlib, re

base = pathlib.Path("target/criterion")

def mean(group, name):
    path = base / group / name / "new" / "estimates.json"
    return json.loads(path.read_text())["mean"]["point_estimate"] if path.exists() else None

def fmt(ns):
    if ns is None:
        return "—"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.3g} ns"

rows = []

def pair(key, what, group, a, b, target=None, check=None, speedup=False):
    x, y = mean(group, a), mean(group, b)
    ratio = x / y if x and y else None
    met = check(x, y, ratio) if (check and ratio) else None
    shown = "—"
    if ratio:
        shown = f"{1 / ratio:.0f}× faster" if speedup else f"{ratio:.2f}×"
    rows.append((key, what, fmt(x), fmt(y), shown, target or "", met))

def alone(key, what, group, name, target=None, check=None):
    x = mean(group, name)
    met = check(x) if (check and x) else None
    rows.append((key, what, fmt(x), "", "", target or "", met))

pair("P1", "content + redaction of 4 KiB: wasm vs the same code native, same thread",
     "content_redaction_4KiB", "wasm", "native", "≤ 1.5× and ≤ 20 µs",
     lambda x, y, r: r <= 1.5 and x <= 20e3)
pair("P1", "leaving the runtime worker for the plugins: in place (`block_in_place`, as calls do) vs a hop to the blocking pool and back (measured alone, in a task on a worker)",
     "blocking_hop", "block_in_place", "spawn_blocking")
for size, target in (("16B", "≤ 1.05×"), ("4KiB", "≤ 1.05×"), ("1MiB", None)):
    pair("P2", f"call end to end, {size}: `Calls::call_with` vs a plain rmcp client",
         f"call_{size}", "airlock", "baseline", target,
         (lambda x, y, r: r <= 1.05) if target else None)
for size in ("16B", "4KiB", "1MiB"):
    pair("gateway", f"call through `airlock serve` (stdio), {size}, vs a plain rmcp client",
         f"call_{size}", "gateway", "baseline")
for size, target in (("16B", "≤ 1.25×"), ("4KiB", "≤ 1.25×"), ("1MiB", None)):
    pair("gateway", f"call through `airlock serve` (stdio), {size}, vs the same client through a bare byte relay (two threads copying bytes: the floor of a second hop)",
         f"call_{size}", "gateway", "relay", target,
         (lambda x, y, r: r <= 1.25) if target else None)
for size in ("16B", "4KiB", "1MiB"):
    pair("gateway", f"call through `airlock serve` (stdio), {size}: its runtime on one worker (as it runs) vs one worker per core (`TOKIO_WORKER_THREADS`), same run",
         f"call_{size}", "gateway", "gateway_cores")
for size in ("16B", "4KiB"):
    pair("eras", f"call through `airlock serve --http`, {size}: a 2026-07-28 client (stateless requests) vs a 2025-11-25 session",
         f"era_call_{size}", "stateless", "handshake")
pair("identity", "call through `airlock serve --http`, 16 B: a JWT access token from an identity provider (`[serve.auth]`, verified against its JWKS, then kept until it expires) vs one of Airlock's own tokens, same gateway, taking turns",
     "identity_call_16B", "jwt", "own_token", "≤ 1.02×", lambda x, y, r: r <= 1.02)
call, probe = mean("telemetry_idle_4KiB", "call"), mean("telemetry_idle_4KiB", "instrumentation")
if call and probe:
    bare = call - probe
    rows.append(("telemetry", "P2 call, 4 KiB, nobody observing (the default: no subscriber, no recorder): the call vs the call less its telemetry statements (those timed alone in the same run)",
                 fmt(call), fmt(bare), f"{call / bare:.3f}×", "≤ 1.01×", call / bare <= 1.01))
turns = base / "telemetry_4KiB" / "paired.json"
if turns.exists():
    t = json.loads(turns.read_text())
    off, traced, dropped = t["off_ns"], t["traced_ns"], t["traced_dropped_ns"]
    rows.append(("telemetry", f"P2 call, 4 KiB: every span exported over OTLP/HTTP to a loopback receiver vs no exporter (the subscriber `airlock` installs either way, built as cli/logging.rs builds it); {t['turns']} rotating turns of these two and the next two rows' modes",
                 fmt(traced), fmt(off), f"{traced / off:.2f}×", "≤ 1.05×", traced / off <= 1.05))
    rows.append(("telemetry", "P2 call, 4 KiB: the same spans, their batches dropped instead of sent (the spans' own cost, apart from the export's work) vs no exporter, same turns",
                 fmt(dropped), fmt(off), f"{dropped / off:.2f}×", "", None))
    if "traced_p50_ns" in t:
        p50, off50 = t["traced_p50_ns"], t["off_p50_ns"]
        rows.append(("telemetry", "P2 call, 4 KiB, the median turn: every span exported vs no exporter, same turns (a shift of every call, not a tail, when it matches the mean's ratio)",
                     fmt(p50), fmt(off50), f"{p50 / off50:.2f}×", "", None))
    if "metrics_ns" in t:
        rows.append(("telemetry", "P2 call, 4 KiB: a Prometheus recorder recording every figure (what `airlock serve --http` does) vs none, same turns",
                     fmt(t["metrics_ns"]), fmt(off), f"{t['metrics_ns'] / off:.2f}×", "", None))
alone("telemetry", "one call's telemetry statements on their own (its 7 spans, no call), every span exported: the spans' share of the traced row's cost on the calling thread",
      "telemetry_spans", "traced")
for size in ("1MiB", "32MiB"):
    pair("P3", f"content + redaction of {size}: wasm vs native",
         f"content_redaction_{size}", "wasm", "native", "≤ 1.5×", lambda x, y, r: r <= 1.5)
pair("policy", "an allow decision of `builtin:policy` (every rule kind): wasm vs native, same thread",
     "policy_allow", "wasm", "native")
pair("plugins", "an allow decision of the JavaScript policy (plugins/policy-js) vs `builtin:policy` (Rust), comparable rules",
     "second_language_allow", "js", "rust", "≤ 50 µs", lambda x, y, r: x <= 50e3)
pair("plugins", "loading the JavaScript policy (a 1.7 MB QuickJS component), cold compile vs the Rust policy's",
     "second_language_load", "js_cold", "rust_cold", "≤ 2 s", lambda x, y, r: x <= 2e9)
pair("plugins", "loading the JavaScript policy from the compiled cache vs the Rust policy's",
     "second_language_load", "js_cached", "rust_cached")
pair("P4", "naming 1,000 tools: wasm vs native (with the host's checks)",
     "naming_1000_tools", "wasm", "native", "≤ 1.5×", lambda x, y, r: r <= 1.5)
pair("P5", "naming 10,000 tools: wasm (vs native)", "naming_10000_tools", "wasm", "native",
     "≤ 50 ms", lambda x, y, r: x <= 50e6)
pair("P5", "ranked search over 10,000 tools (vs a naive scan)", "search_10000_tools",
     "airlock", "baseline", "≤ 1 ms", lambda x, y, r: x <= 1e6)
pair("P6", "loading the bundled plugin: compiled cache vs cold compile", "plugin_load",
     "cached", "cold", "≥ 20× faster", lambda x, y, r: 1 / r >= 20, speedup=True)
for size in ("1MiB", "32MiB"):
    pair("", f"durable retention of {size} (digest, fsync, rename, record; on the writer thread) vs a plain file write",
         f"retain_{size}", "airlock", "baseline")
pair("", "start-up from a tested catalog vs connecting to learn the tools (demo server)",
     "startup_demo_server", "airlock", "baseline")
pair("scale", "retain a 256 KiB result and page it back (6 pages): S3 (moto, loopback) vs the data directory",
     "retain_and_page_256KiB", "s3", "local")
pair("scale", "a grant check: PostgreSQL (loopback; kept in memory while every host's changes are heard) vs SQLite",
     "grant_check", "postgres", "sqlite", "≤ 5 µs", lambda x, y, r: x <= 5e3)
pair("scale", "the first grant check of an agent and service (or the first after a change to grants): PostgreSQL (one round trip) vs SQLite",
     "grant_check", "postgres_first", "sqlite")
pair("scale", "a gateway token presented by a request: PostgreSQL (kept in memory while every host's changes are heard) vs SQLite",
     "token_check", "postgres", "sqlite", "≤ 5 µs", lambda x, y, r: x <= 5e3)
pair("scale", "a gateway token presented by a request: PostgreSQL, asked (one round trip: an unseen token, or the first after a change to tokens) vs kept in memory",
     "token_check", "postgres_asked", "postgres")

memory = base / "memory" / "figures.json"
if memory.exists():
    m = json.loads(memory.read_text())
    s, i = m["per_idle_session_kib"], m["per_plugin_instance_kib"]
    rows.append(("P7", "host memory per idle session", f"{s:.0f} KiB", "", "", "≤ 1 MiB", s <= 1024))
    rows.append(("P7", "host memory per warm plugin instance", f"{i:.0f} KiB", "", "", "≤ 2 MiB", i <= 2048))
conc = base / "concurrency_64x8" / "latency.json"
one, two = mean("concurrency_64x8", "one_worker"), mean("concurrency_64x8", "two_workers")
if conc.exists() and one and two:
    c = json.loads(conc.read_text())
    for label, key in (("one worker", "one_worker"), ("two workers", "two_workers")):
        v = c[key]
        rows.append(("P8", f"64 callers on 8 services, {label}: calls/s, p50 / p99 latency",
                     f"{v['calls_per_sec']:.0f}/s", f"{v['p50_ms']:.2f} / {v['p99_ms']:.2f} ms", "", "", None))
    rows.append(("P8", "throughput, two workers vs one (a 512-call round)", fmt(two), fmt(one),
                 f"{one / two:.2f}× the throughput", "scales with the cores", None))

readme = pathlib.Path("README.md")
body = readme.read_text()
# A row this run did not measure (a benchmark run alone) keeps its line from the last
# run that did; each row's ratio is always against a baseline from its own run.
earlier = {}
old_block = re.search(r"<!-- bench:begin -->(.*?)<!-- bench:end -->", body, flags=re.S)
for line in (old_block.group(1).splitlines() if old_block else []):
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) == 7 and cells[0] != "#" and not cells[0].startswith("---"):
        earlier[(cells[0], cells[1])] = line
for key, present in (("P7", memory.exists()), ("P8", conc.exists() and one and two)):
    if not present:
        rows.extend((k, w, "—", "", "", "", None) for (k, w) in earlier if k == key)
# A benchmark this run did not measure makes some rows only from its data (their words
# name what was measured): its earlier rows are kept, each after the row it followed.
measured = {row[0] for row in rows if row[2] != "—"}
previous = None
for (k, w) in earlier:
    listed = [(row[0], row[1]) for row in rows]
    if k not in measured and (k, w) not in listed:
        at = listed.index(previous) + 1 if previous in listed else len(rows)
        rows.insert(at, (k, w, "—", "", "", "", None))
    previous = (k, w)
table = ["| # | figure | Airlock | baseline (same run) | ratio | target | met |",
         "|---|---|---|---|---|---|---|"]
kept = 0
for key, what, a, b, r, target, met in rows:
    if a == "—" and (key, what) in earlier:
        table.append(earlier[(key, what)])
        kept += 1
        continue
    table.append(f"| {key} | {what} | {a} | {b} | {r} | {target} | {'' if met is None else ('yes' if met else '**no**')} |")
text = "\n".join(table)
print(text)

only = os.environ.get("BENCH_ONLY")
if only:
    stamp = (f"Figures from `scripts/bench-ratios.sh` on this machine ({os.cpu_count()} cores): "
             f"the `{only}` benchmark's rows measured {datetime.date.today().isoformat()} "
             f"(`--bench {only}`); every other row is from its own benchmark's last run on this machine"
             f"{f', {kept} of them kept from the table before' if kept else ''}:")
else:
    stamp = f"Figures from `scripts/bench-ratios.sh` on this machine ({os.cpu_count()} cores), {datetime.date.today().isoformat()}"
    stamp += f"; {kept} rows not measured in that run are kept from the run before:" if kept else ":"
block = f"<!-- bench:begin -->\n{stamp}\n\n{text}\n<!-- bench:end -->"
new = re.sub(r"<!-- bench:begin -->.*?<!-- bench:end -->", lambda _: block, body, flags=re.S)
if new != body:
    readme.write_text(new)
    print("\nREADME.md updated.")
PY
