#!/usr/bin/env bash
# The suite on a busy machine (docs/reliability.md, "Tests on a busy machine"): clones this
# repository at COMMIT (default HEAD) into a fresh directory, starts HOGS CPU-bound processes
# (default 8) before the build, and runs `CI=true make test` RUNS times in a row (default 3) with
# stdin closed, stopping at the first failure. Each run's output goes to OUT/run-N.log, a line per
# run to OUT/summary.log and the load average every minute to OUT/load.log (OUT defaults to a new
# temporary directory, printed first). Exits with the first failing run's status, else 0.
#
#   bash scripts/loaded-test.sh                 # HEAD, 8 hogs, 3 runs: about 1 h 40 min on 2 cores
#   HOGS=4 RUNS=1 bash scripts/loaded-test.sh 381d5a4
set -u
COMMIT=${1:-HEAD}
HOGS=${HOGS:-8}
RUNS=${RUNS:-3}
REPO=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$(mktemp -d /tmp/loaded-test.XXXXXX)}
mkdir -p "$OUT"
echo "logs: $OUT"
CLONE="$OUT/clone"
git clone -q "$REPO" "$CLONE" && git -C "$CLONE" checkout -q "$COMMIT" || exit 2

pids=()
trap 'kill "${pids[@]}" 2>/dev/null' EXIT
for _ in $(seq 1 "$HOGS"); do (while :; do :; done) & pids+=($!); done
( while :; do echo "$(date +%T) $(cut -d' ' -f1-3 /proc/loadavg)"; sleep 60; done ) > "$OUT/load.log" &
pids+=($!)

status=0
for run in $(seq 1 "$RUNS"); do
  start=$(date +%s)
  (cd "$CLONE" && CI=true make test) > "$OUT/run-$run.log" 2>&1 < /dev/null
  rc=$?
  line="run $run at $(git -C "$CLONE" rev-parse --short HEAD): rc=$rc in $(( $(date +%s) - start )) s, load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "$line" | tee -a "$OUT/summary.log"
  grep -h 'Test run with' "$OUT/run-$run.log" | sed 's/^/  /' | tee -a "$OUT/summary.log"
  if [ $rc -ne 0 ]; then status=$rc; break; fi
done
exit $status
