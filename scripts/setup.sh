#!/usr/bin/env bash
# Installs what the project needs on a fresh Debian machine: LMDB's headers and library
# (liblmdb-dev), its tools (lmdb-utils: mdb_stat, mdb_dump) and SQLite's (libsqlite3-dev,
# for the comparison benchmarks). Does nothing when everything is already there.
set -euo pipefail

missing=()
for pkg in liblmdb-dev lmdb-utils libsqlite3-dev pkg-config; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
echo "setup: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
