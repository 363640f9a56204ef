#!/usr/bin/env bash
# The sync server's tests (docs/sync.md, "Tests"): installs Debian's postgresql if missing, builds
# Tools/ledger-server (its own package: Hummingbird, postgres-nio) and runs its tests, which start
# private PostgreSQL clusters and real server and device processes.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! ls -d /usr/lib/postgresql/*/bin >/dev/null 2>&1; then
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq postgresql >/dev/null
fi
cd Tools/ledger-server
swift build --build-tests
swift test --skip-build --disable-xctest
