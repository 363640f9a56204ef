import CLMDB
import Synchronization

/// A reset read transaction in the pool. @unchecked Sendable: a pooled transaction is inactive
/// and owned by the pool; whoever pops it is its only user until it is pushed back (MDB_NOTLS
/// lets it be renewed on any thread).
struct IdleReader: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// The reset read transactions an environment keeps for reuse (GRDB's `Pool`): a read renews
/// one (`mdb_txn_renew`) instead of beginning a new one. A reset transaction keeps its reader slot
/// but pins no snapshot; the pool is drained before the map changes size and when the
/// environment closes (its transactions belong to that `MDB_env`).
final class ReaderPool: Sendable {
    /// At most this many are kept (each holds a reader slot).
    static let limit = 4
    private let idle = Mutex<[IdleReader]>([])

    /// A kept transaction, renewed: `(0, txn)`; `(MDB_MAP_RESIZED, nil)` when another process
    /// grew the map; nil when none is kept or it could not be renewed (begin a new one).
    func renew() -> (code: Int32, txn: OpaquePointer?)? {
        guard let txn = idle.withLock({ $0.popLast() })?.pointer else { return nil }
        let code = mdb_txn_renew(txn)
        if code == 0 { return (0, txn) }
        mdb_txn_abort(txn)
        return code == MDB_MAP_RESIZED ? (code, nil) : nil
    }

    /// Ends a read transaction: reset and kept when the pool has room, else freed.
    func giveBack(_ txn: OpaquePointer) {
        mdb_txn_reset(txn)
        let kept = idle.withLock { pool in
            guard pool.count < Self.limit else { return false }
            pool.append(IdleReader(pointer: txn))
            return true
        }
        if !kept { mdb_txn_abort(txn) }
    }

    /// Frees every kept transaction.
    func drain() {
        for reader in idle.withLock({ pool in defer { pool = [] }; return pool }) { mdb_txn_abort(reader.pointer) }
    }
}
