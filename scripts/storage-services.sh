#!/usr/bin/env bash
# Starts (or stops) the storage services the tests use, on loopback:
#   - PostgreSQL: Debian's package (installed when missing), a temporary cluster run
#     by an unprivileged user, password authentication;
#   - an S3-compatible server: moto (pinned in tests/peers/python/requirements.txt).
# `start` prints the environment the tests read (AIRLOCK_TEST_POSTGRES_URL,
# AIRLOCK_TEST_S3_*) as `export` lines; `stop DIR` stops both and removes DIR.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

pg_bin() {
    if command -v initdb >/dev/null 2>&1; then
        dirname "$(command -v initdb)"
        return
    fi
    local found
    found=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
    if [ -z "$found" ]; then
        local sudo=""
        if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
        $sudo apt-get update -qq >&2
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends postgresql >/dev/null
        found=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
    fi
    echo "$found"
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Runs a command as the unprivileged owner of the cluster (PostgreSQL refuses root).
as_owner() {
    if [ "$(id -u)" = 0 ]; then
        setpriv --reuid=nobody --regid=nogroup --clear-groups -- "$@"
    else
        "$@"
    fi
}

start() {
    local dir
    dir=$(mktemp -d /tmp/airlock-storage.XXXXXX)
    chmod 755 "$dir"
    local bin pg_port s3_port password
    bin=$(pg_bin)
    pg_port=$(free_port)
    password=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
    mkdir -p "$dir/pg"
    echo "$password" > "$dir/pwfile"
    if [ "$(id -u)" = 0 ]; then chown -R nobody:nogroup "$dir/pg" "$dir/pwfile"; fi
    as_owner "$bin/initdb" -D "$dir/pg/data" -U airlock --auth=scram-sha-256 \
        --pwfile="$dir/pwfile" -E UTF8 >"$dir/initdb.log" 2>&1 ||
        { cat "$dir/initdb.log" >&2; exit 1; }
    as_owner "$bin/pg_ctl" -D "$dir/pg/data" -l "$dir/pg/server.log" -w \
        -o "-c listen_addresses=127.0.0.1 -p $pg_port -k $dir/pg -c max_connections=400 -c fsync=off" \
        start >"$dir/pg_ctl.log" 2>&1 ||
        { cat "$dir/pg_ctl.log" "$dir/pg/server.log" >&2; exit 1; }
    rm -f "$dir/pwfile"

    s3_port=$(free_port)
    "$root/tests/.venv/bin/moto_server" -H 127.0.0.1 -p "$s3_port" >"$dir/moto.log" 2>&1 &
    echo $! > "$dir/moto.pid"
    for _ in $(seq 1 100); do
        if curl -fs -o /dev/null "http://127.0.0.1:$s3_port/moto-api/" 2>/dev/null; then break; fi
        sleep 0.1
    done
    curl -fsS -X PUT -o /dev/null "http://127.0.0.1:$s3_port/airlock-test" ||
        { cat "$dir/moto.log" >&2; exit 1; }

    echo "export AIRLOCK_TEST_STORAGE_DIR=$dir"
    echo "export AIRLOCK_TEST_PG_BIN=$bin"
    echo "export AIRLOCK_TEST_POSTGRES_URL=postgres://airlock:$password@127.0.0.1:$pg_port/postgres"
    echo "export AIRLOCK_TEST_S3_ENDPOINT=http://127.0.0.1:$s3_port"
    echo "export AIRLOCK_TEST_S3_BUCKET=airlock-test"
}

stop() {
    local dir=$1 bin=${2:-$(pg_bin)}
    [ -d "$dir" ] || return 0
    if [ -f "$dir/moto.pid" ]; then kill "$(cat "$dir/moto.pid")" 2>/dev/null || true; fi
    if [ -d "$dir/pg/data" ]; then
        as_owner "$bin/pg_ctl" -D "$dir/pg/data" -m fast -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$dir"
}

case "${1:-}" in
    start) start ;;
    stop) stop "${2:?the folder start printed}" "${3:-}" ;;
    *) echo "usage: $0 start | stop DIR [PG_BIN]" >&2; exit 2 ;;
esac
