import LMDB

// The LMDB layer's per-environment attachments, named here so that the folders above the store
// use them without importing LMDB. (The thread primitives and the monotonic clock are the
// LedgerThreads module's.)

/// A typed key of a per-directory object shared by every handle of the process.
typealias AttachmentKey<Value: AnyObject & Sendable> = LMDB.AttachmentKey<Value>

