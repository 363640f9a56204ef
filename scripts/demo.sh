#!/usr/bin/env bash
# The main job: several processes append to one ledger at once, then `ledger inspect` shows it.
#   LEDGER_DIR   where the ledger lives (default: /tmp/inbox-ledger-demo, recreated each run)
#   EVENTS       events per writer process (default: 5000)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
swift build -c release --product ledger >&2
LEDGER=".build/release/ledger"
DIR="${LEDGER_DIR:-/tmp/inbox-ledger-demo}"
EVENTS="${EVENTS:-5000}"
rm -rf "$DIR"

# One generator per role: the shapes of the seeds' events (inbox syncs, read state, widget
# actions, badge deltas), as the JSON lines `ledger append` reads.
generate() {
    local role="$1"
    awk -v role="$role" -v n="$EVENTS" 'BEGIN {
        for (i = 1; i <= n; i++) {
            m = i % 40
            if (role == "app")
                printf "{\"type\":\"inbox.synced\",\"data\":{\"mode\":\"delta\",\"messages\":[{\"id\":\"m%d\",\"title\":\"Message %d, update %d\",\"subheading\":\"From the demo server\",\"sentAt\":\"2026-11-22T08:%02d:00Z\"}]},\"key\":\"sync-%d\"}\n", m, m, i, m, i
            else if (role == "widget")
                printf "{\"type\":\"widget.action\",\"data\":{\"actionID\":\"%s-%d\",\"kind\":\"%s\",\"target\":\"m%d\"},\"key\":\"%s-%d\"}\n", role, i, (i % 3 ? "markTaskDone" : "markRead"), (i * 7) % 40, role, i
            else
                printf "{\"type\":\"badge.adjusted\",\"data\":{\"delta\":%d},\"key\":\"push-%d\"}\n", (i % 4 ? 1 : -2), i
        }
    }'
}

echo "demo: 3 processes × $EVENTS events into $DIR" >&2
generate app | "$LEDGER" append "$DIR" --origin app --batch 50 >/dev/null &
generate widget | "$LEDGER" append "$DIR" --origin widget --batch 1 --durability singleSync >/dev/null &
generate notification-service | "$LEDGER" append "$DIR" --origin notification-service --batch 10 >/dev/null &
wait
# The host app's consumer reads everything after its cursor and completes the widget actions.
# (From Swift, Consumer.commit(_:appending:) does this in one transaction: exactly once.)
"$LEDGER" consume "$DIR" --name host-app --limit 1000000 \
    | grep '"type":"widget.action"' \
    | sed -E 's/.*"actionID":"([^"]+)".*/{"type":"action.completed","data":{"actionID":"\1","outcome":"done"},"key":"done-\1"}/' \
    | "$LEDGER" append "$DIR" --origin app --batch 500 >/dev/null
"$LEDGER" widget "$DIR" --limit 5
echo
"$LEDGER" inspect "$DIR"
