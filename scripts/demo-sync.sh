#!/usr/bin/env bash
# The sync demo (docs/sync.md): a private PostgreSQL, ledger-server, and two device ledgers of
# one user each running `ledger sync --watch`. The backend publishes four messages; device A
# reads one and archives one, device B taps "mark read" on a third in its widget; both show the
# same inbox. Then both go offline and edit the same note (the shared notes of docs/apps.md,
# Examples/SharedNotes); back online, both show the same note. Then `ledger inspect` on both,
# and everything is stopped.
#   DEMO_DIR   where it all lives (default: /tmp/inbox-ledger-demo-sync, recreated each run)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
bash scripts/setup.sh
missing=()
for pkg in postgresql curl; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if [ -z "${LEDGER_BIN:-}" ]; then swift build --product ledger >&2; fi
if [ -z "${NOTES_BIN:-}" ]; then swift build --product shared-notes >&2; fi
(cd Tools/ledger-server && swift build --product ledger-server >&2)
LEDGER="${LEDGER_BIN:-$ROOT/.build/debug/ledger}"
NOTES="${NOTES_BIN:-$ROOT/.build/debug/shared-notes}"
SHARE=(--share com.example.note-edited --share com.example.task-added --share com.example.task-done)
SERVER="$ROOT/Tools/ledger-server/.build/debug/ledger-server"
DIR="${DEMO_DIR:-/tmp/inbox-ledger-demo-sync}"
rm -rf "$DIR"
mkdir -p "$DIR"
chmod 755 "$DIR"
export LEDGER_SERVER_SECRET="demo-secret-$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')"

pids=()
cleanup() {
    # SIGKILL: the server is stateless (what it acknowledged is committed in PostgreSQL) and a
    # SIGTERM would wait for its open long polls; the devices resume where they were.
    for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    scripts/sync-postgres.sh stop "$DIR/postgres" || true
}
trap cleanup EXIT

PGPORT=$(scripts/sync-postgres.sh start "$DIR/postgres")
echo "PostgreSQL on 127.0.0.1:$PGPORT ($DIR/postgres)"
"$SERVER" serve --port 0 --database-url "postgres://ledger@127.0.0.1:$PGPORT/ledger" >"$DIR/server.log" 2>&1 &
pids+=($!)
until grep -q "listening on" "$DIR/server.log"; do
    kill -0 "${pids[0]}" 2>/dev/null || { cat "$DIR/server.log"; exit 1; }
    sleep 0.1
done
URL="http://$(grep -o 'listening on [0-9.:]*' "$DIR/server.log" | cut -d' ' -f3)"
echo "ledger-server at $URL"
DEVICE=$("$SERVER" token --user alice)
PUBLISH=$("$SERVER" token --user alice --scope publish)

curl -sf -X POST "$URL/v1/publish" -H "Authorization: Bearer $PUBLISH" -H 'Content-Type: application/json' -d '{"messages": [
  {"id": "m1", "title": "Your order shipped", "sentAt": "2026-11-22T08:00:00Z"},
  {"id": "m2", "title": "Weekly digest", "sentAt": "2026-11-22T09:00:00Z"},
  {"id": "m3", "title": "Flight check-in open", "sentAt": "2026-11-22T10:00:00Z"},
  {"id": "m4", "title": "Invoice available", "sentAt": "2026-11-22T11:00:00Z"}]}' >/dev/null
echo "published 4 messages for alice"

declare -A syncing
for device in A B; do
    "$LEDGER" sync "$DIR/device-$device" --create --server "$URL" --token "$DEVICE" "${SHARE[@]}" --watch >"$DIR/sync-$device.log" 2>&1 &
    pids+=($!)
    syncing[$device]=$!
done
# Wait until both devices list the four messages.
converged() {
    local a b
    a=$("$LEDGER" widget "$DIR/device-A" --json 2>/dev/null | grep -o '"id":"m[0-9]"' | sort | tr -d '\n') || return 1
    b=$("$LEDGER" widget "$DIR/device-B" --json 2>/dev/null | grep -o '"id":"m[0-9]"' | sort | tr -d '\n') || return 1
    [ "$a" = "$b" ] && [ "$a" = "${1}" ]
}
until converged '"id":"m1""id":"m2""id":"m3""id":"m4"'; do sleep 0.2; done
echo "both devices list m1–m4"

echo '{"type":"message.read","data":{"ids":["m1"],"read":true}}' | "$LEDGER" append "$DIR/device-A" --origin app >/dev/null
echo '{"type":"message.removed","data":{"ids":["m2"]}}' | "$LEDGER" append "$DIR/device-A" --origin app >/dev/null
echo '{"type":"widget.action","data":{"actionID":"w-1","kind":"markRead","target":"m3"}}' | "$LEDGER" append "$DIR/device-B" --origin widget >/dev/null
echo "device A: read m1, archived m2; device B's widget: mark m3 read"

same() {
    local a b
    a=$("$LEDGER" widget "$DIR/device-A" --json 2>/dev/null | grep -o '"id":"m[0-9]"[^}]*"read":[a-z]*' | sort) || return 1
    b=$("$LEDGER" widget "$DIR/device-B" --json 2>/dev/null | grep -o '"id":"m[0-9]"[^}]*"read":[a-z]*' | sort) || return 1
    [ "$a" = "$b" ] && [ "$(echo "$a" | grep -c '"read":true')" = 2 ] && ! echo "$a" | grep -q '"m2"'
}
until same; do sleep 0.2; done
echo
for device in A B; do
    echo "== device $device"
    "$LEDGER" widget "$DIR/device-$device" --limit 5
    echo
done

# The app's own data on every device (docs/sync.md, "Custom events on every device"): both
# devices go offline and edit note n1; each shows its own edit at once.
for device in A B; do
    kill -9 "${syncing[$device]}" 2>/dev/null || true
    wait "${syncing[$device]}" 2>/dev/null || true
done
"$NOTES" "$DIR/device-A" edit n1 "Buy milk" --role app
"$NOTES" "$DIR/device-B" edit n1 "Buy oat milk and bread" --role widget
echo "offline, both devices edited note n1:"
for device in A B; do echo "  device $device: $("$NOTES" "$DIR/device-$device" show | grep '^note n1')"; done
# Back online: device A through the example's own client (its projections registered), device B
# through `ledger sync` (none registered: the example's next read applies what came down).
"$NOTES" "$DIR/device-A" sync --server "$URL" --token "$DEVICE" --watch >"$DIR/notes-sync-A.log" 2>&1 &
pids+=($!)
"$LEDGER" sync "$DIR/device-B" --server "$URL" --token "$DEVICE" "${SHARE[@]}" --watch >>"$DIR/sync-B.log" 2>&1 &
pids+=($!)
notes_same() {
    local a b
    a=$("$NOTES" "$DIR/device-A" show 2>/dev/null | grep '^note ') || return 1
    b=$("$NOTES" "$DIR/device-B" show 2>/dev/null | grep '^note ') || return 1
    [ "$a" = "$b" ] && ! echo "$a" | grep -q "not synced yet"
}
until notes_same; do sleep 0.2; done
echo "online again, both devices show the note the server placed last:"
for device in A B; do echo "  device $device: $("$NOTES" "$DIR/device-$device" show | grep '^note n1')"; done
echo
for device in A B; do
    echo "== ledger inspect device-$device"
    "$LEDGER" inspect "$DIR/device-$device"
    echo
done
echo "== the server's view (GET /v1/state)"
curl -sf "$URL/v1/state" -H "Authorization: Bearer $DEVICE"
echo
