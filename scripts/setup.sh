#!/usr/bin/env bash
# Installs what the project needs on a fresh Debian machine: LMDB's headers and library
# (liblmdb-dev), its tools (lmdb-utils: mdb_stat, mdb_dump), SQLite's (libsqlite3-dev, for the
# comparison benchmarks), and PostgreSQL (postgresql: the sync server's tests, demo and benchmark
# start private clusters of it; docs/sync.md). Does nothing when everything is already there.
#
# PostgreSQL is the one package the library itself does not need: where it cannot be installed,
# this says so and goes on, and the sync server's tests are skipped with that message
# (scripts/sync-test.sh). Everything else is required.
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

missing=()
for pkg in liblmdb-dev lmdb-utils libsqlite3-dev pkg-config; do
    installed "$pkg" || missing+=("$pkg")
done
want_postgres=0
ls -d /usr/lib/postgresql/*/bin >/dev/null 2>&1 || want_postgres=1
if [ ${#missing[@]} -eq 0 ] && [ $want_postgres -eq 0 ]; then
    exit 0
fi
$SUDO apt-get update -qq
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}" >&2
    $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if [ $want_postgres -eq 1 ]; then
    echo "setup: installing postgresql (for the sync server's tests)" >&2
    # Debian's package starts a system cluster when it can; the tests never use it (they start
    # private clusters on free loopback ports).
    if ! $SUDO apt-get install -y -qq postgresql >/dev/null; then
        echo "setup: WARNING: postgresql could not be installed; the sync server's tests will be skipped" >&2
    fi
fi
