#ifndef CSQLITE_SHIM_H
#define CSQLITE_SHIM_H
// SQLite's C API, used only by the comparison benchmark (Tools/ledger-bench) as a baseline.
#include <sqlite3.h>
#endif
