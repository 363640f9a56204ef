import CLMDB
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a transaction is for: it decides how ``SharedEnvironment/transaction(_:_:)`` begins and
/// ends it.
enum TransactionKind: Equatable {
    /// A short read: a reset transaction of the ``ReaderPool`` renewed (or a new one), reset back
    /// into the pool at its end.
    case read
    /// The read that opens named databases, committed at its end so that their handles are shared
    /// by every later transaction (a read's commit writes nothing).
    case opening
    /// A write, taking this layer's writer lock first and waiting for it no longer than
    /// `timeoutMilliseconds` without progress, committed with `durability` (nil: the
    /// environment's) and its durability settled.
    case write(timeoutMilliseconds: Int, durability: Durability?)
}

/// What one attempt at a transaction came to.
enum Attempt<T> {
    case done(T)
    /// Another process grew the map (`MDB_MAP_RESIZED`): adopt its size and try again.
    case adoptMap
    /// The map is full (`seen` bytes): grow it and try again.
    case growMap(seen: Int)
    /// Every reader slot was taken and slots of dead processes were cleared: try again.
    case readersFull
    /// Every reader slot is held by a live process: read without one (a writable environment).
    case noReaderSlot
}

// MARK: - The one place a transaction begins

extension SharedEnvironment {
    /// Runs `body` in one transaction of `kind`: every transaction of this layer begins here
    /// (reads, writes, the opening of named databases and the creation of missing ones, the
    /// page walk's snapshot).
    ///
    /// **The lock order**, the same for every transaction of the process; no lock is taken while
    /// one that comes after it is held:
    /// 1. the registry's table (``EnvironmentRegistry``), held only while a handle opens or
    ///    closes — an opening that creates tables runs its write under it;
    /// 2. the gate of ``HandleLifetime``, shared for the whole transaction (exclusive only to
    ///    open, close or resize the environment, and never by a thread inside a transaction:
    ///    the map is adopted or grown after the attempt let go of it);
    /// 3. this layer's ``WriterLock``, writes only (and reads without a reader slot): waited
    ///    for while the writers make progress, so it is the only wait without a bound in time
    ///    that a stopped process cannot prolong forever;
    /// 4. LMDB's own: its writer mutex, which `mdb_txn_begin` of a write then takes at once
    ///    (every writer of every process holds the writer lock first), or a reader slot;
    /// 5. short mutexes that wait for nothing: the reader pool, the writing thread, the
    ///    durability, the sync proof.
    ///
    /// A read handles a full reader table (docs/lmdb.md rule 4): slots of dead processes are
    /// cleared and it begins again; when live processes hold every slot, a writable environment
    /// reads in a write transaction (it needs no slot) taken like a write and aborted — committed
    /// for ``TransactionKind/opening``, which writes nothing — and a read-only one throws
    /// ``LMDBError/readersFull``. `MDB_MAP_RESIZED` at the beginning: another process grew the
    /// map, adopt its size and begin again; `MDB_MAP_FULL` in a write: grow the map and run the
    /// write again (rule 8).
    ///
    /// Not generic (the body's result is the caller's to keep): a generic chain here ran
    /// unspecialized in every caller, asking the runtime for `Attempt<T>`'s and `Result<T>`'s
    /// metadata at every transaction — a tenth of a warm projection read (docs/benchmarks.md).
    func transaction(_ kind: TransactionKind, _ body: (Transaction) throws -> Void) throws {
        if case .write = kind, let writer = writingThread.withLock({ $0 }), pthread_equal(writer, pthread_self()) != 0 {
            // A programming error, like GRDB's re-entrant write: fail loudly instead of hanging.
            preconditionFailure("a write transaction was begun inside another one on the same thread: it would wait forever for LMDB's writer lock, which this thread holds")
        }
        var slotless = false
        var attempts = 0
        while true {
            attempts += 1
            let attempt: Attempt<Void> = try withHandle(untyped: { opened in
                try begin(kind, on: opened, slotless: slotless, retrying: attempts < 100, body)
            })
            switch attempt {
            case .done: return
            case .adoptMap: try adoptMapSize()
            case .growMap(let seen): try growMap(from: seen)
            case .readersFull: continue
            case .noReaderSlot: slotless = true
            }
        }
    }

    /// ``transaction(_:_:)`` on `opened`, the handle being opened under the exclusive gate (the
    /// reopening of named databases): the map is adopted in place.
    func transaction(_ kind: TransactionKind, on opened: OpenHandle, _ body: (Transaction) throws(LMDBError) -> Void) throws(LMDBError) {
        var slotless = false
        for attempt in 1...100 {
            let outcome: Attempt<Void>
            do {
                outcome = try begin(kind, on: opened, slotless: slotless, retrying: attempt < 100) { txn in try body(txn) }
            } catch {
                // Another process grew the map and wrote past this new mapping between the open
                // and this transaction (MDB_MAP_RESIZED): adopt its size and try again (rule 9).
                guard let error = error as? LMDBError else { throw .badTransaction }
                guard error == .mapResized, attempt < 100 else { throw error }
                try check(mdb_env_set_mapsize(opened.env, 0))
                continue
            }
            switch outcome {
            case .done: return
            case .adoptMap, .growMap: try check(mdb_env_set_mapsize(opened.env, 0))
            case .readersFull: continue
            case .noReaderSlot: slotless = true
            }
        }
        throw .mapResized
    }

    /// One attempt at a transaction of `kind` on the open handles.
    private func begin(_ kind: TransactionKind, on opened: OpenHandle, slotless: Bool, retrying: Bool,
                       _ body: (Transaction) throws -> Void) throws -> Attempt<Void> {
        if case .write(let timeout, let durability) = kind {
            try takeWriterLock(opened, timeoutMilliseconds: timeout)
            defer { writerLock.release(opened.lockFile) }
            return try writeOnce(opened, retrying: retrying, durability: durability, body)
        }
        if slotless { return try readWithoutSlot(kind, on: opened, retrying: retrying, body) }
        let (code, pointer) = kind == .read ? (readerPool.renew() ?? Self.beginC(opened, write: false)) : Self.beginC(opened, write: false)
        if code == MDB_MAP_RESIZED, retrying { return .adoptMap }
        if code == MDB_READERS_FULL {
            var dead: Int32 = 0
            try check(mdb_reader_check(opened.env, &dead))
            if dead > 0, retrying { return .readersFull }  // freed some: again
            guard canReadWithoutSlot(opened) else { throw LMDBError.readersFull }
            return .noReaderSlot
        }
        try check(code)
        guard let pointer else { throw LMDBError.badTransaction }
        let txn = Transaction(pointer: pointer, isReadOnly: true)
        if kind == .read {
            defer {
                txn.isLive = false
                readerPool.giveBack(pointer)
            }
            try body(txn)
            return .done(())
        }
        try Self.run(txn, committing: true, body)
        return .done(())
    }

    /// `mdb_txn_begin` of a new top-level transaction: the only call of it.
    private static func beginC(_ opened: OpenHandle, write: Bool) -> (code: Int32, txn: OpaquePointer?) {
        var txnPointer: OpaquePointer?
        let code = mdb_txn_begin(opened.env, nil, write ? 0 : UInt32(MDB_RDONLY), &txnPointer)
        return (code, txnPointer)
    }

    /// Runs `body` in `txn` and ends it: committed (a failed commit is not aborted again: rule 8)
    /// or aborted, and aborted when `body` throws.
    private static func run(_ txn: Transaction, committing: Bool, _ body: (Transaction) throws -> Void) throws {
        do {
            try body(txn)
        } catch {
            txn.isLive = false
            mdb_txn_abort(txn.pointer)
            throw error
        }
        txn.isLive = false
        if committing { try check(mdb_txn_commit(txn.pointer)) } else { mdb_txn_abort(txn.pointer) }
    }

    /// A read while live processes hold every reader slot: a write transaction (it needs no
    /// slot), taken like a write — this layer's writer lock, up to the write timeout — and
    /// aborted (committed for an opening, which writes nothing); `body` gets a read-only
    /// ``Transaction``.
    private func readWithoutSlot(_ kind: TransactionKind, on opened: OpenHandle, retrying: Bool,
                                 _ body: (Transaction) throws -> Void) throws -> Attempt<Void> {
        let me = pthread_self()
        if let writer = writingThread.withLock({ $0 }), pthread_equal(writer, me) != 0 {
            // A read inside this thread's own write would wait for itself: no slot, no way round.
            throw LMDBError.readersFull
        }
        try takeWriterLock(opened, timeoutMilliseconds: configuration.writeTimeoutMilliseconds)
        defer { writerLock.release(opened.lockFile) }
        let (code, pointer) = Self.beginC(opened, write: true)
        if code == MDB_MAP_RESIZED, retrying { return .adoptMap }
        try check(code)
        guard let pointer else { throw LMDBError.badTransaction }
        writingThread.withLock { $0 = me }
        defer { writingThread.withLock { $0 = nil } }
        try Self.run(Transaction(pointer: pointer, isReadOnly: true), committing: kind == .opening, body)
        return .done(())
    }

    /// One write transaction, under the writer lock: committed, or aborted (never after a
    /// failed commit: rule 8), its durability settled.
    private func writeOnce(_ opened: OpenHandle, retrying: Bool, durability: Durability?, _ body: (Transaction) throws -> Void) throws -> Attempt<Void> {
        let mapSeen = Self.mapSize(opened.env)
        let (code, pointer) = Self.beginC(opened, write: true)
        if code == MDB_MAP_RESIZED, retrying { return .adoptMap }
        try check(code)
        guard let txnPointer = pointer else { throw LMDBError.badTransaction }
        if let durability {
            // Set under LMDB's writer mutex, which this transaction holds: no other writer of the
            // process can commit between the change and this commit (docs/lmdb.md rule 27).
            do throws(LMDBError) { try applyDurability(durability, opened) } catch {
                mdb_txn_abort(txnPointer)
                throw error
            }
        }
        let mode = durability ?? currentDurability.withLock { $0 }
        // Under LMDB's writer mutex: the paths must still name the files this process writes
        // and coordinates through — two lstat calls (docs/lmdb.md rule 29, docs/benchmarks.md).
        if let problem = opened.identity?.problem(directory: directory) {
            mdb_txn_abort(txnPointer)
            throw FileSharing.refuse(directory, problem)
        }
        writingThread.withLock { $0 = pthread_self() }
        defer { writingThread.withLock { $0 = nil } }
        let txn = Transaction(pointer: txnPointer, isReadOnly: false)
        do {
            try body(txn)
        } catch {
            txn.isLive = false
            mdb_txn_abort(txnPointer)
            if txn.sawMapFull || (error as? LMDBError) == .mapFull { return .growMap(seen: mapSeen) }
            throw error
        }
        txn.isLive = false
        if txn.sawMapFull {
            mdb_txn_abort(txnPointer)
            return .growMap(seen: mapSeen)
        }
        // A failed commit has already freed the transaction: never abort after it (rule 8).
        let id = Int(mdb_txn_id(txnPointer))
        let commit = mdb_txn_commit(txnPointer)
        if commit == MDB_MAP_FULL { return .growMap(seen: mapSeen) }
        try check(commit)
        try settleDurability(opened, transaction: id, changed: txn.changed, mode: mode)
        return .done(())
    }

    /// After the commit of write transaction `id` in `mode`: whatever its answer names is on disk
    /// to the mode's standard, whoever wrote it (``SyncProof``). A commit that wrote pages synced
    /// as its mode says; one that changed nothing synced nothing, so its snapshot is synced now
    /// (`mdb_env_sync`) unless this process already proved it on disk.
    private func settleDurability(_ opened: OpenHandle, transaction id: Int, changed: Bool, mode: Durability) throws(LMDBError) {
        let snapshot = id - 1
        let needsSync = syncProof.withLock { proof in
            if changed {
                proof.committed(id, mode: mode)
                return false
            }
            return proof.needsSync(snapshot: snapshot, mode: mode)
        }
        guard needsSync else { return }
        try sync(opened, through: snapshot)
    }

    /// `mdb_env_sync(env, 1)` made after transaction `snapshot` committed: recorded in the proof.
    private func sync(_ opened: OpenHandle, through snapshot: Int) throws(LMDBError) {
        try check(mdb_env_sync(opened.env, 1))
        syncProof.withLock { $0.synced(through: snapshot) }
        settlingSyncs.add(1, ordering: .relaxed)
    }

    /// Makes everything committed so far — so everything this process has read — durable to
    /// `mode`'s standard, whoever committed it: a sync unless this process already proved it on
    /// disk (``SyncProof``). For data read and then handed to another system (a server, a file)
    /// that must not learn of anything a power cut could take back. Nothing for a read-only
    /// environment (it cannot sync; what it read is promised by whoever wrote it) or `none`.
    func makeDurable(_ mode: Durability) throws(LMDBError) {
        if readOnly || mode == .none { return }
        try withHandle { (opened: OpenHandle) throws(LMDBError) in
            let last = Self.lastTransactionID(opened.env)
            guard syncProof.withLock({ $0.needsSync(snapshot: last, mode: mode) }) else { return }
            try sync(opened, through: last)
        }
    }

    // MARK: The transactions of the environment

    // Not generic, and called from ``Environment``'s inlinable `read` and `write`, which keep
    // the body's result: those are specialized for it in the caller's module.

    @usableFromInline
    func read(_ body: (Transaction) throws -> Void) throws { try transaction(.read, body) }

    @usableFromInline
    func write(timeoutMilliseconds: Int, durability: Durability? = nil, _ body: (Transaction) throws -> Void) throws {
        try transaction(.write(timeoutMilliseconds: timeoutMilliseconds, durability: durability), body)
    }
}
