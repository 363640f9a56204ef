#!/bin/sh
# Prints the folder dependency graph of Sources/InboxLedger (an edge A → B: a file of folder A
# names a type declared in folder B, or calls a member of `Ledger` declared in B; the files at the
# target's root are the node `(root)`) and checks that it has no cycle (FolderGraphTests).
# With an argument, the graph of that directory instead (another checkout's Sources/InboxLedger).
set -e
if [ -n "$1" ]; then FOLDER_GRAPH_SOURCES=$(cd "$1" && pwd); export FOLDER_GRAPH_SOURCES; fi
cd "$(dirname "$0")/.."
FOLDER_GRAPH_PRINT=1 swift test --disable-xctest --filter 'FolderGraphTests/theFoldersHaveNoCycle' 2>&1 | grep -E '→|✘|passed|failed'
