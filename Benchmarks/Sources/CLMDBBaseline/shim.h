#ifndef CLMDB_BASELINE_SHIM_H
#define CLMDB_BASELINE_SHIM_H
/* The raw-LMDB baseline of ledger-bench: LMDB's C API, used directly on purpose (it is the
   physical limit). A module of the laboratory's own, so that the product does not vend its
   C module (CLMDB) to apps. */
#include <lmdb.h>
#endif
