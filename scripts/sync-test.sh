#!/usr/bin/env bash
# The sync server's tests (docs/sync.md, "Tests"), the last part of `make test`: builds
# Tools/ledger-server (a package of its own: Hummingbird, postgres-nio) and runs its tests, which
# start private PostgreSQL clusters and real server and device processes. PostgreSQL comes from
# scripts/setup.sh; where it could not be installed only the tests that need none run (the router
# on the in-memory store, the batch's JSON), and this says so.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cd Tools/ledger-server
swift build --build-tests
if ! ls -d /usr/lib/postgresql/*/bin >/dev/null 2>&1; then
    echo "sync-test: SKIPPED the sync server's tests that need PostgreSQL: it is not installed and could not be (see scripts/setup.sh's message above); running those that need none" >&2
    exec swift test --skip-build --disable-xctest --filter "RouterTests|UpBatchTests"
fi
swift test --skip-build --disable-xctest
