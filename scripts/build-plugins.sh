#!/usr/bin/env bash
# Builds WebAssembly components for wasm32-wasip2, deterministically (paths remapped, so
# the bytes do not depend on where the checkout or the cargo home lives).
#
#   scripts/build-plugins.sh            rebuild the bundled plugins into host/assets/plugins/
#   scripts/build-plugins.sh --check    rebuild them and fail if they differ from the embedded bytes
#   scripts/build-plugins.sh --fixtures build the hostile test plugins (tests/plugins/)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cargo_home=${CARGO_HOME:-$HOME/.cargo}
export CARGO_TARGET_DIR="$root/target/wasm"
# Built for speed: WebAssembly SIMD (wasmtime enables it by default) lets memchr use its
# vector paths, and the standard plugin's redaction prefilter (plugins/standard/src/finder.rs).
export RUSTFLAGS="--remap-path-prefix=$root=/airlock --remap-path-prefix=$cargo_home=/cargo -C target-feature=+simd128"
out="$CARGO_TARGET_DIR/wasm32-wasip2/plugin"

build() {
    local args=()
    for p in "$@"; do args+=(-p "$p"); done
    cargo build --quiet --locked --profile plugin --target wasm32-wasip2 "${args[@]}"
}

case "${1:-}" in
    --fixtures)
        build airlock-fixture-hostile airlock-fixture-foreign-import airlock-fixture-future-contract airlock-fixture-contract-v01 airlock-fixture-policy
        ls "$out"/airlock_fixture_*.wasm
        ;;
    --check|"")
        build airlock-plugin-standard airlock-plugin-text-only airlock-plugin-policy
        status=0
        for name in standard text-only policy; do
            built="$out/airlock_plugin_${name//-/_}.wasm"
            embedded="host/assets/plugins/$name.wasm"
            if [ "${1:-}" = "--check" ]; then
                if ! cmp -s "$built" "$embedded"; then
                    echo "DRIFT: $embedded differs from a rebuild of plugins/$name ($(stat -c%s "$built") vs $(stat -c%s "$embedded") bytes); run scripts/build-plugins.sh" >&2
                    status=1
                else
                    echo "ok: $embedded matches a rebuild of plugins/$name ($(stat -c%s "$built") bytes)"
                fi
            else
                mkdir -p host/assets/plugins
                cp "$built" "$embedded"
                echo "wrote $embedded ($(stat -c%s "$embedded") bytes)"
            fi
        done
        exit $status
        ;;
    *)
        echo "usage: $0 [--check | --fixtures]" >&2
        exit 2
        ;;
esac
