#!/usr/bin/env bash
# The main job: the seeds' scenario played by real processes on one ledger — the host app
# syncing its inbox, two widgets reading and tapping, a notification extension raising the
# badge, the host's consumer completing every widget action exactly once, and a compaction
# worker — then what the widget shows and what `ledger inspect` says.
#   LEDGER_DIR   where the ledger lives (default: /tmp/inbox-ledger-demo, recreated each run)
#   DURATION     seconds to run (default: 10)
#   SEED         makes the run repeatable (default: 1)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
swift build -c release --product ledger >&2
LEDGER=".build/release/ledger"
DIR="${LEDGER_DIR:-/tmp/inbox-ledger-demo}"
rm -rf "$DIR"

"$LEDGER" simulate "$DIR" --duration "${DURATION:-10}" --seed "${SEED:-1}"
echo
"$LEDGER" widget "$DIR" --limit 5
echo
"$LEDGER" inspect "$DIR"
