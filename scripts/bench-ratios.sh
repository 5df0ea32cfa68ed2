#!/usr/bin/env bash
# Runs the pipeline benchmark and prints, per group, the wasm/native ratio of the mean
# times criterion measured in that same run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cargo bench -p airlock-host --bench pipeline -- "$@"
python3 - <<'PY'
import json, pathlib
base = pathlib.Path("target/criterion")
for group in sorted(p for p in base.iterdir() if (p / "wasm").is_dir() and (p / "native").is_dir()):
    mean = lambda name: json.loads((group / name / "new" / "estimates.json").read_text())["mean"]["point_estimate"]
    wasm, native = mean("wasm"), mean("native")
    print(f"{group.name:32} wasm {wasm/1e6:9.3f} ms   native {native/1e6:9.3f} ms   ratio {wasm/native:6.2f}x")
PY
