#!/usr/bin/env bash
# Builds the JavaScript policy plugin (plugins/policy-js) from source with its pinned
# tool (componentize-qjs, QuickJS; package-lock.json), runs its own tests, and writes the
# component to target/js-plugins/policy-js.wasm, which the tests and the second-language
# benchmark load. The build command and its flags are the package's `build` script.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root/plugins/policy-js"
npm ci --no-audit --no-fund --loglevel=error
npm test
mkdir -p "$root/target/js-plugins"
OUT="$root/target/js-plugins/policy-js.wasm" npm run build
