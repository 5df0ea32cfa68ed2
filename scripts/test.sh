#!/usr/bin/env bash
# The test command. Installs everything the tests need — the wasm32-wasip2 target, the
# npm reference servers (tests/peers, pinned by package-lock.json), the Python MCP SDK
# (tests/.venv, pinned by requirements.txt, with Playwright), Debian's Chromium (the console's
# browser test) and the JavaScript plugin's pinned jco
# (plugins/policy-js) — builds that plugin from source, then runs every test.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

echo "== toolchain"
rustup target add wasm32-wasip2

echo "== npm test peers"
(cd tests/peers && npm ci --no-audit --no-fund --loglevel=error)

echo "== Python test peers"
if [ ! -x tests/.venv/bin/python ]; then
    python3 -m venv tests/.venv
fi
tests/.venv/bin/pip install --quiet --disable-pip-version-check -r tests/peers/python/requirements.txt

echo "== Chromium, for the operator console's browser test (tests/console.rs)"
if ! command -v chromium >/dev/null 2>&1; then
    sudo=""
    if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi
chromium --version 2>/dev/null  # (Debian's wrapper script warns on stderr about its memory check)

echo "== the JavaScript policy plugin, built from source (plugins/policy-js)"
scripts/build-js-plugin.sh

echo "== tests"
cargo test --locked -p airlock-host -p airlock-guest -p airlock-plugin-standard -p airlock-plugin-text-only -p airlock-plugin-policy "$@"

echo "== the embeddable library builds without the CLI feature"
cargo check --locked -p airlock-host --no-default-features

echo "== no test server outlived the tests"
sleep 1
leftover=$(pgrep -af "tests/peers/|demo-server|airlock_fixture" | grep -v pgrep || true)
if [ -n "$leftover" ]; then
    echo "processes left behind by the tests:" >&2
    echo "$leftover" >&2
    exit 1
fi
echo "none left"
