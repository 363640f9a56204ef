#!/usr/bin/env bash
# The main job: the seeds' scenario played by real processes on one ledger — the host app
# syncing its inbox, two widgets reading and tapping, a notification extension raising the
# badge, the host's consumer completing every widget action exactly once, and a compaction
# worker — and, beside the inbox, the task tracker of docs/apps.md ("Your own read models": an
# app projection the host app and a widget keep in the append's transaction; `task-tracker`,
# Examples/TaskTracker) — then what the widget shows, today's task list and what
# `ledger inspect` says.
#   LEDGER_DIR   where the ledger lives (default: /tmp/inbox-ledger-demo, recreated each run)
#   DURATION     seconds to run (default: 10)
#   SEED         makes the run repeatable (default: 1)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
swift build -c release --product ledger >&2
swift build -c release --product task-tracker >&2
LEDGER=".build/release/ledger"
TASKS=".build/release/task-tracker"
DIR="${LEDGER_DIR:-/tmp/inbox-ledger-demo}"
rm -rf "$DIR"

# The task tracker's processes register their projection; the simulation's do not, and append
# beside them. Its report is printed after the simulation's.
"$TASKS" "$DIR" --setup
TASK_REPORT="$(mktemp)"
trap 'rm -f "$TASK_REPORT"' EXIT
"$TASKS" "$DIR" --duration "${DURATION:-10}" --seed "${SEED:-1}" >"$TASK_REPORT" 2>&1 &
TASK_PID=$!

status=0
"$LEDGER" simulate "$DIR" --duration "${DURATION:-10}" --seed "${SEED:-1}" || status=$?
wait "$TASK_PID" || status=$?
cat "$TASK_REPORT"
echo
"$LEDGER" widget "$DIR" --limit 5
echo
# The app's own read model, as stored (no app code needed), then the whole ledger.
"$LEDGER" projection "$DIR" com.example.tasks --limit 8
echo
"$LEDGER" inspect "$DIR"
exit "$status"
