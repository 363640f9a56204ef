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
            if (role == "app")
                printf "{\"type\":\"inbox.synced\",\"data\":{\"mode\":\"delta\",\"messages\":[{\"id\":\"m%d\",\"title\":\"Message %d\",\"sentAt\":\"2026-11-22T08:00:00Z\"}]},\"key\":\"sync-%d\"}\n", i, i, i
            else if (role == "widget")
                printf "{\"type\":\"widget.action\",\"data\":{\"actionID\":\"%s-%d\",\"kind\":\"markRead\",\"target\":\"m%d\"},\"key\":\"%s-%d\"}\n", role, i, i, role, i
            else
                printf "{\"type\":\"badge.adjusted\",\"data\":{\"delta\":1},\"key\":\"push-%d\"}\n", i
        }
    }'
}

echo "demo: 3 processes × $EVENTS events into $DIR" >&2
generate app | "$LEDGER" append "$DIR" --origin app --batch 50 >/dev/null &
generate widget | "$LEDGER" append "$DIR" --origin widget --batch 1 --durability singleSync >/dev/null &
generate notification-service | "$LEDGER" append "$DIR" --origin notification-service --batch 10 >/dev/null &
wait
"$LEDGER" inspect "$DIR"
