#!/usr/bin/env bash
# The sync benchmark (docs/sync.md, "Performance"): a private PostgreSQL with its default
# durable settings, one ledger-server (release build), and Tools/ledger-server's sync-bench:
# up (one device), ingest (50 devices at once), down (listings applied on a device).
#   UP_EVENTS, DEVICES, EVENTS_PER_DEVICE, LISTINGS   the workload sizes
#   INGEST_BATCH   events per ingest request (default 500)
#   INGEST_MIX     reads: every ingest event a message.read (default: half reads, half custom events)
#   SYNC_BENCH     which workloads, comma-separated (default up,ingest,down)
#   CONNECTIONS    the server's PostgreSQL connections (default 16)
#   PG_OPTIONS     extra PostgreSQL settings, space-separated (e.g. "commit_delay=200")
#   SERVER_ARGS    extra ledger-server serve options, space-separated (e.g. "--no-metrics")
set -euo pipefail
cd "$(dirname "$0")/.."
(cd Tools/ledger-server && swift build -c release --product ledger-server >&2 && swift build -c release --product sync-bench >&2)
BIN=Tools/ledger-server/.build/release
DIR=$(mktemp -d /tmp/ledger-sync-bench-XXXXXX)
chmod 755 "$DIR"
export LEDGER_SERVER_SECRET="bench-secret-$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')"
SERVER_PID=""
cleanup() {
    [ -n "$SERVER_PID" ] && kill -9 "$SERVER_PID" 2>/dev/null || true
    wait 2>/dev/null || true
    scripts/sync-postgres.sh stop "$DIR/postgres" || true
    rm -rf "$DIR"
}
trap cleanup EXIT
# shellcheck disable=SC2086  # PG_OPTIONS is a list of NAME=VALUE words
PGPORT=$(scripts/sync-postgres.sh start "$DIR/postgres" "max_connections=200" ${PG_OPTIONS:-})
# shellcheck disable=SC2086  # SERVER_ARGS is a list of options
"$BIN/ledger-server" serve --port 0 --connections "${CONNECTIONS:-16}" --database-url "postgres://ledger@127.0.0.1:$PGPORT/ledger" ${SERVER_ARGS:-} >"$DIR/server.log" 2>&1 &
SERVER_PID=$!
until grep -q "listening on" "$DIR/server.log"; do kill -0 "$SERVER_PID" || exit 1; sleep 0.1; done
URL="http://$(grep -o 'listening on [0-9.:]*' "$DIR/server.log" | cut -d' ' -f3)"
for i in $(seq 0 "${DEVICES:-50}"); do
    echo "user$i $("$BIN/ledger-server" token --user "user$i") $("$BIN/ledger-server" token --user "user$i" --scope publish)"
done >"$DIR/tokens"
"$BIN/sync-bench" "$URL" "$DIR/tokens" "$DIR"
