// LD_PRELOAD recorder of the writes and syncs a ledger's processes make to data.mdb, for the
// crash-state explorer (Tools/ledger-crash-states, docs/reliability.md "Power loss").
// It has no API: it interposes open/write/sync calls of the C library.
#pragma once
