#!/usr/bin/env bash
# Runs the cargo-fuzz targets (config, frames, results) for SECONDS each (default 60),
# adding what they find to fuzz/corpus/. libFuzzer needs nightly flags; on the stable
# toolchain they are allowed with RUSTC_BOOTSTRAP=1. Not part of the test command: the
# committed corpus is replayed there on stable (tests/properties.rs).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root/fuzz"
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(config frames results)
command -v cargo-fuzz >/dev/null || cargo install --locked cargo-fuzz
for t in "${targets[@]}"; do
    RUSTC_BOOTSTRAP=1 cargo fuzz run "$t" "corpus/$t" -- -max_total_time="$seconds"
done
