import LMDB

// The LMDB layer's concurrency primitives (docs/design.md, "Append and group commit"), named
// here so that the folders above the store use them without importing LMDB.

/// A lock that owns the state it guards, with a condition its waiters wait on.
typealias ConditionLock<Value> = LMDB.ConditionLock<Value>

/// A thread started on demand that lingers after its last work.
typealias DedicatedThread = LMDB.DedicatedThread

/// A typed key of a per-directory object shared by every handle of the process.
typealias AttachmentKey<Value: AnyObject & Sendable> = LMDB.AttachmentKey<Value>

/// Seconds on the monotonic clock.
func monotonicSeconds() -> Double { LMDB.monotonicSeconds() }
