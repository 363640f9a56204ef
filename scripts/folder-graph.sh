#!/bin/sh
# Prints the folder dependency graph of Sources/InboxLedger (an edge A → B: a file of folder A
# names a type declared in folder B) and checks that it has no cycle (FolderGraphTests).
set -e
cd "$(dirname "$0")/.."
FOLDER_GRAPH_PRINT=1 swift test --disable-xctest --filter 'FolderGraphTests/theFoldersHaveNoCycle' 2>&1 | grep -E '→|✘|passed|failed'
