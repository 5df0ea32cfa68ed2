#!/usr/bin/env bash
# Runs the pipeline benchmark and prints, per group, the wasm/native ratio of the mean
# times criterion measured in that same run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cargo bench -p airlock-host --bench pipeline --bench catalog_results --bench startup -- "$@"
python3 - <<'PY'
import json, pathlib
base = pathlib.Path("target/criterion")
mean = lambda group, name: json.loads((group / name / "new" / "estimates.json").read_text())["mean"]["point_estimate"]
for a, b in [("wasm", "native"), ("airlock", "baseline")]:
    for group in sorted(p for p in base.iterdir() if (p / a).is_dir() and (p / b).is_dir()):
        x, y = mean(group, a), mean(group, b)
        print(f"{group.name:28} {a} {x/1e6:10.3f} ms   {b} {y/1e6:10.3f} ms   ratio {x/y:7.2f}x")
PY
