#!/usr/bin/env bash
# Builds the JavaScript policy plugin (plugins/policy-js) from source with its pinned
# tool (componentize-qjs 0.4.5, QuickJS, --sync --stub-wasi; package-lock.json),
# runs its own tests, and
# writes the component to target/js-plugins/policy-js.wasm, which the tests and the
# second-language benchmark load.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root/plugins/policy-js"
npm ci --no-audit --no-fund --loglevel=error
npm test
mkdir -p "$root/target/js-plugins"
OUT="$root/target/js-plugins/policy-js.wasm" npm run build
