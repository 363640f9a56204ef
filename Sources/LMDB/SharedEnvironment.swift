import CLMDB
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A reset read transaction in the pool. @unchecked Sendable: a pooled transaction is inactive
/// and owned by the pool; whoever pops it is its only user until it is pushed back (MDB_NOTLS
/// lets it be renewed on any thread).
struct IdleReader: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// The C handles of an open environment: the `MDB_env`, and this layer's own descriptor of
/// `lock.mdb` for the writer lock (-1 when the file cannot be written). Valid only while the
/// environment's gate is held; closed together (closing any descriptor of `lock.mdb` drops
/// every `fcntl` lock of the process on it, LMDB's included).
struct OpenHandle: @unchecked Sendable {
    // @unchecked: C handles; used only under the gate (see SharedEnvironment).
    let env: OpaquePointer
    let lockFile: Int32
    /// A duplicate of LMDB's `data.mdb` descriptor holding a shared `flock` while the
    /// environment is open, and the identity of both files at open (docs/lmdb.md rule 29).
    var dataFile: Int32 = -1
    var identity: FileIdentity? = nil
}

/// The single environment of one directory in this process. Its `MDB_env` can be closed —
/// by ``EnvironmentRegistry/suspendAll(waitingMilliseconds:)`` or after a quiet period — and is
/// reopened by the next call, transparently: every ``Environment`` handle, every ``Database``
/// (reopened in the same order, so with the same numbers) and every attachment stay valid.
final class SharedEnvironment: @unchecked Sendable {
    // @unchecked: `handle` is read only with `gate` held shared and replaced only with it held
    // exclusive; the C environment may be used from any thread (MDB_NOTLS). Every other
    // mutable piece of state sits in a Mutex or an Atomic.
    private var handle: OpenHandle?
    /// Mirrors `handle != nil` for the lock-free fast path of ``ensureOpen()``.
    private let isOpen = Atomic<Bool>(false)
    let directory: String
    let key: EnvironmentKey
    let configuration: EnvironmentConfiguration
    /// Opened without write access.
    var readOnly: Bool { configuration.readOnly }
    /// The largest the map may grow to.
    var maxMapSize: Int { max(configuration.maxMapSize, configuration.initialMapSize) }
    let gate = ResizeGate()
    let databases = Mutex<[String: Database]>([:])
    /// The order the named databases were opened in: a reopen opens them in this order again.
    private let databaseOrder = Mutex<[String]>([])
    let attachments = Mutex<[ErasedAttachmentKey: any AnyObject & Sendable]>([:])
    let currentDurability: Mutex<Durability>
    /// The map size to reopen with (the last one in use).
    private let reopenMapSize: Mutex<Int>
    /// When a call last used the environment (monotonic ms), for the idle close.
    private let lastUse = Atomic<Int>(0)
    private let writerLock = WriterLock()
    /// What this process proved on disk of the open file (``SyncProof``); reset at each open.
    private let syncProof = Mutex(SyncProof())
    /// Syncs made for answers that rested on what was already stored (``settleDurability``), for tests.
    let settlingSyncs = Atomic<Int>(0)
    /// The thread inside a write transaction of this environment: a write begun inside another
    /// on the same thread would wait forever for LMDB's writer mutex, which that thread holds.
    private let writingThread = Mutex<pthread_t?>(nil)
    /// Reset read transactions kept for reuse (`mdb_txn_renew` instead of `mdb_txn_begin`): a
    /// reset transaction keeps its reader slot but pins no snapshot.
    private let idleReaders = Mutex<[IdleReader]>([])
    /// At most this many reset read transactions are kept (each holds a reader slot).
    static let idleReaderLimit = 4
    /// Handles alive; guarded by the registry's lock.
    var handleCount = 0
    /// Set once the last handle is gone: nothing reopens it any more.
    private let isFinished = Atomic<Bool>(false)
    /// While the idle close is on, closes the environment after a quiet period: woken by each
    /// opening, it stops when the environment closes.
    private let idleWatch = DedicatedThread(lingerSeconds: 0)

    init(directory: String, key: EnvironmentKey, configuration: EnvironmentConfiguration) {
        self.directory = directory
        self.key = key
        self.configuration = configuration
        self.currentDurability = Mutex(configuration.durability)
        self.reopenMapSize = Mutex(configuration.initialMapSize)
    }

    // MARK: Opening and closing the C environment

    /// Opens the C environment if it is closed; throws ``LMDBError/suspended`` (without
    /// blocking or locking anything) while the process is suspended.
    func ensureOpen() throws(LMDBError) {
        if EnvironmentRegistry.isSuspended { throw .suspended }
        if isOpen.load(ordering: .acquiring) { return }
        let openedHere = try gate.withExclusive { () throws(LMDBError) -> Bool in
            if EnvironmentRegistry.isSuspended { throw .suspended }
            if handle != nil { return false }  // another thread opened it meanwhile
            if isFinished.load(ordering: .acquiring) { throw .badTransaction }
            let opened = try openHandle()
            do throws(LMDBError) {
                try reopenDatabases(opened)
            } catch {
                closeC(opened)
                throw error
            }
            handle = opened
            syncProof.withLock { $0 = SyncProof() }  // ids of the file opened now, which may not be the one before
            isOpen.store(true, ordering: .releasing)
            return true
        }
        // Each opening starts the idle watch (or wakes it): it ends when the environment closes.
        if openedHere, let idle = configuration.closeWhenIdleMilliseconds {
            let weak = WeakSharedEnvironment()
            weak.shared = self
            idleWatch.wake { thread in Self.watchIdle(weak, milliseconds: idle, on: thread) }
        }
    }

    /// Creates and opens the `MDB_env` — after making the files safe to map (StorePreparation) —
    /// retrying briefly when the open races another process's open or close (rule 6). The C
    /// handle is freed on every failure path.
    private func openHandle() throws(LMDBError) -> OpenHandle {
        var flags = configuration.flags.intersection([.noReadAhead, .noMemoryInitialization])
        flags.formUnion(EnvironmentFlags.noThreadLocalStorage.union(currentDurability.withLock { $0 }.flags))
        if configuration.readOnly { flags.insert(.readOnly) }
        try StorePreparation.prepare(directory: directory, configuration: configuration)
        let deadline = monotonicMilliseconds() + configuration.openRetryMilliseconds
        var backoff: UInt32 = 1000
        while true {
            var envPointer: OpaquePointer?
            try check(mdb_env_create(&envPointer))
            guard let env = envPointer else { throw .outOfMemory }
            var code = mdb_env_set_maxreaders(env, UInt32(configuration.maxReaders))
            if code == 0 { code = mdb_env_set_maxdbs(env, UInt32(configuration.maxDatabases)) }
            if code == 0 { code = mdb_env_set_mapsize(env, reopenMapSize.withLock { $0 }) }
            if code == 0 { code = mdb_env_open(env, directory, UInt32(flags.rawValue), mode_t(configuration.fileMode)) }
            if code == 0 {
                // Our own descriptor of lock.mdb for the writer lock, opened only once LMDB holds
                // its locks (it is closed only after mdb_env_close, see OpenHandle).
                let lockFile = configuration.readOnly ? -1 : open(directory + "/lock.mdb", O_RDWR | O_CLOEXEC)
                // The files LMDB opened must be the ones every process shares (docs/lmdb.md rule 29).
                let identity: FileIdentity, dataFile: Int32
                do throws(LMDBError) {
                    identity = try FileIdentity.capture(env: env, directory: directory)
                    if let problem = identity.problem(directory: directory) { throw FileSharing.refuse(directory, problem) }
                    dataFile = try FileSharing.holdDataFile(env: env)
                } catch {
                    mdb_env_close(env)
                    if lockFile >= 0 { close(lockFile) }
                    throw error
                }
                var dead: Int32 = 0
                _ = mdb_reader_check(env, &dead)  // best effort: a failure here is retried every 30 s by committers
                return OpenHandle(env: env, lockFile: lockFile, dataFile: dataFile, identity: identity)
            }
            mdb_env_close(env)
            let transient = code == EAGAIN || code == EBUSY || code == EINTR || code == ETIMEDOUT
            guard transient, monotonicMilliseconds() < deadline else { throw LMDBError(rawValue: code) }
            usleep(backoff)
            backoff = min(backoff * 2, 50_000)
        }
    }

    /// Opens again, in their original order, the named databases a previous `MDB_env` had
    /// open, so that every ``Database`` keeps its handle number.
    private func reopenDatabases(_ opened: OpenHandle) throws(LMDBError) {
        let order = databaseOrder.withLock { $0 }
        if order.isEmpty { return }
        let known = databases.withLock { $0 }
        for attempt in 1...100 {
            do throws(LMDBError) {
                try openingTransaction(opened) { (txn: OpaquePointer) throws(LMDBError) in
                    for name in order {
                        var dbi: MDB_dbi = 0
                        try check(mdb_dbi_open(txn, name, 0, &dbi))
                        guard dbi == known[name]?.handle else { throw .badDatabase }
                    }
                }
                return
            } catch {
                // Another process grew the map and wrote past this new mapping between the open
                // and this transaction (MDB_MAP_RESIZED): adopt its size and try again (docs/lmdb.md rule 9).
                guard error == .mapResized, attempt < 100 else { throw error }
                try check(mdb_env_set_mapsize(opened.env, 0))
            }
        }
    }

    /// Records a database opened for the first time (by the registry, in the transaction `txn`
    /// that is about to commit).
    func remember(_ database: Database) {
        databases.withLock { $0[database.name] = database }
        databaseOrder.withLock { if !$0.contains(database.name) { $0.append(database.name) } }
    }

    /// Closes the C environment once no transaction of this process is active, waiting at most
    /// `milliseconds` (nil: as long as it takes). Returns false if a transaction did not end in
    /// time (the environment stays open). The next call reopens it.
    @discardableResult
    func closeHandle(waitingMilliseconds milliseconds: Int?) -> Bool {
        let close = { () -> Void in
            guard let opened = self.handle else { return }
            self.reopenMapSize.withLock { $0 = Self.mapSize(opened.env) }
            self.dropIdleReaders()
            self.closeC(opened)
            self.handle = nil
            self.isOpen.store(false, ordering: .releasing)
        }
        if let milliseconds {
            return gate.withExclusive(within: milliseconds, close) != nil
        }
        gate.withExclusive(close)
        return true
    }

    /// Closes for good (the last handle is gone).
    func finish() {
        isFinished.store(true, ordering: .releasing)
        closeHandle(waitingMilliseconds: nil)
    }

    private func closeC(_ opened: OpenHandle) {
        FileSharing.releaseDataFile(opened.dataFile)  // before LMDB's lock on lock.mdb goes (rule 29)
        mdb_env_close(opened.env)
        if opened.lockFile >= 0 { close(opened.lockFile) }
    }

    /// The idle watch's body: every quarter of the period (10 ms to 1 s) it closes the
    /// environment if no call used it for `milliseconds`; it stops once the environment is
    /// closed (an opening wakes it again).
    private static func watchIdle(_ weak: WeakSharedEnvironment, milliseconds: Int, on thread: DedicatedThread) {
        let interval = Double(max(10, min(milliseconds / 4, 1000))) / 1000
        while true {
            thread.waitForWake(timeoutSeconds: interval)  // woken: reopened, keep watching
            guard let shared = weak.shared else {
                _ = thread.stopUnlessWoken()
                return
            }
            let closed = !shared.isOpen.load(ordering: .acquiring)
                || (monotonicMilliseconds() - shared.lastUse.load(ordering: .relaxed) >= milliseconds
                    && shared.closeHandle(waitingMilliseconds: 0))
            if closed, thread.stopUnlessWoken() { return }
        }
    }

    // MARK: Running code with the open environment

    /// Runs `body` with the open C handles, the gate held shared; opens them first if needed.
    func withHandle<T>(_ body: (OpenHandle) throws(LMDBError) -> T) throws(LMDBError) -> T {
        while true {
            try ensureOpen()
            let outcome: T? = try gate.withShared { () throws(LMDBError) -> T? in
                guard let handle else { return nil }  // closed between ensureOpen and here: again
                // Only the idle close reads it: no clock read on the hot paths otherwise.
                if configuration.closeWhenIdleMilliseconds != nil { lastUse.store(monotonicMilliseconds(), ordering: .relaxed) }
                return try body(handle)
            }
            if let outcome { return outcome }
        }
    }

    /// As ``withHandle(_:)``, for bodies that throw any error.
    func withHandle<T>(untyped body: (OpenHandle) throws -> T) throws -> T {
        var result: Result<T, any Error>?
        try withHandle { (opened: OpenHandle) throws(LMDBError) in result = Result { try body(opened) } }
        guard let result else { throw LMDBError.badTransaction }
        return try result.get()
    }

    /// A raw transaction for opening handles: committed (so handles become shared) or aborted on error.
    static func rawTransaction(_ opened: OpenHandle, readOnly: Bool, _ body: (OpaquePointer) throws(LMDBError) -> Void) throws(LMDBError) {
        var txnPointer: OpaquePointer?
        try check(mdb_txn_begin(opened.env, nil, readOnly ? UInt32(MDB_RDONLY) : 0, &txnPointer))
        guard let txn = txnPointer else { throw .badTransaction }
        do throws(LMDBError) {
            try body(txn)
        } catch {
            mdb_txn_abort(txn)
            throw error
        }
        try check(mdb_txn_commit(txn))
    }

    /// The transaction that opens named databases, committed so that the handles stay open: a
    /// read transaction, or — when every reader slot is held by a live process (docs/lmdb.md
    /// rule 4) and this environment may write — a write transaction, which needs no reader slot
    /// and, opening existing databases only, changes nothing, so its commit writes nothing. It
    /// waits for the writer lock like a write (up to the write timeout).
    func openingTransaction(_ opened: OpenHandle, _ body: (OpaquePointer) throws(LMDBError) -> Void) throws(LMDBError) {
        for attempt in 1...100 {
            do throws(LMDBError) {
                return try Self.rawTransaction(opened, readOnly: true, body)
            } catch {
                // `mdb_txn_begin` failed before `body` ran: nothing to undo.
                guard error == .readersFull else { throw error }
                var dead: Int32 = 0
                try check(mdb_reader_check(opened.env, &dead))
                if dead > 0, attempt < 100 { continue }  // slots of dead processes freed: again
                guard canReadWithoutSlot(opened) else { throw error }
                try takeWriterLock(opened, timeoutMilliseconds: configuration.writeTimeoutMilliseconds)
                defer { writerLock.release(opened.lockFile) }
                return try Self.rawTransaction(opened, readOnly: false, body)
            }
        }
    }

    /// Whether a read may run in a write transaction when no reader slot is free: the
    /// environment may write, and this layer can take its writer lock.
    private func canReadWithoutSlot(_ opened: OpenHandle) -> Bool {
        !configuration.readOnly && opened.lockFile >= 0
    }

    /// This layer's writer lock, waited for while the writers make progress (``WriterLock``).
    private func takeWriterLock(_ opened: OpenHandle, timeoutMilliseconds: Int) throws(LMDBError) {
        try writerLock.acquire(opened.lockFile, timeoutMilliseconds: timeoutMilliseconds) {
            WriterProgress(lastTransaction: Self.lastTransactionID(opened.env), holder: WriterLock.holder(opened.lockFile))
        }
    }

    // MARK: Environment-wide operations

    static func mapSize(_ env: OpaquePointer) -> Int {
        var info = MDB_envinfo()
        mdb_env_info(env, &info)
        return Int(info.me_mapsize)
    }

    /// The id of the file's last committed transaction (any process's), from the newer meta page.
    static func lastTransactionID(_ env: OpaquePointer) -> Int {
        var info = MDB_envinfo()
        mdb_env_info(env, &info)
        return Int(info.me_last_txnid)
    }

    func info() throws(LMDBError) -> EnvironmentInfo {
        try withHandle { (opened: OpenHandle) throws(LMDBError) -> EnvironmentInfo in
            var info = MDB_envinfo()
            var stat = MDB_stat()
            try check(mdb_env_info(opened.env, &info))
            try check(mdb_env_stat(opened.env, &stat))
            var fileStat = stat_t()
            let fileSize = Glibc_stat(directory + "/data.mdb", &fileStat) == 0 ? Int(fileStat.st_size) : 0
            return EnvironmentInfo(
                mapSize: Int(info.me_mapsize), lastPageNumber: Int(info.me_last_pgno),
                lastTransactionID: Int(info.me_last_txnid), maxReaders: Int(info.me_maxreaders),
                readerSlotsUsed: Int(info.me_numreaders), pageSize: Int(stat.ms_psize), fileSize: fileSize)
        }
    }

    func clearStaleReaders() throws(LMDBError) -> Int {
        try withHandle { (opened: OpenHandle) throws(LMDBError) -> Int in
            var dead: Int32 = 0
            try check(mdb_reader_check(opened.env, &dead))
            return Int(dead)
        }
    }

    func readers() throws(LMDBError) -> [ReaderSlot] {
        final class Lines { var text = "" }
        let lines = Lines()
        let code = try withHandle { (opened: OpenHandle) throws(LMDBError) -> Int32 in
            withExtendedLifetime(lines) {
                mdb_reader_list(opened.env, { message, context in
                    guard let message, let context else { return 0 }
                    Unmanaged<Lines>.fromOpaque(context).takeUnretainedValue().text += String(cString: message)
                    return 0
                }, Unmanaged.passUnretained(lines).toOpaque())
            }
        }
        if code < 0 { throw LMDBError(rawValue: code) }
        var slots: [ReaderSlot] = []
        for line in lines.text.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 3, let pid = Int32(fields[0]) else { continue }
            slots.append(ReaderSlot(pid: pid, transactionID: Int(fields[2])))
        }
        return slots
    }

    /// The pid of the process holding the writer lock, if one does (and it can be told).
    func writeLockHolder() -> Int32? {
        (try? withHandle { (opened: OpenHandle) throws(LMDBError) -> Int32? in  // a closed or suspended environment has no holder to tell
            WriterLock.holder(opened.lockFile)
        }) ?? nil
    }

    /// Throws ``LMDBError/filesNotShared`` unless the paths still name the files this process
    /// opened — the check every write transaction makes (docs/lmdb.md rule 29).
    func checkFilesShared() throws(LMDBError) {
        try withHandle { (opened: OpenHandle) throws(LMDBError) in
            if let problem = opened.identity?.problem(directory: directory) { throw FileSharing.refuse(directory, problem) }
        }
    }

    func setDurability(_ durability: Durability) throws(LMDBError) {
        try ensureOpen()
        try gate.withExclusive { () throws(LMDBError) in
            guard let opened = handle else {  // closed: the next open uses `currentDurability`
                currentDurability.withLock { $0 = durability }
                return
            }
            try applyDurability(durability, opened)
        }
    }

    /// Sets the sync flags of `durability` on the open environment: for the write transaction
    /// the caller holds (LMDB 0.9 has no per-transaction sync flags: `mdb_txn_begin` ignores
    /// them), or with every transaction excluded (``setDurability(_:)``).
    private func applyDurability(_ durability: Durability, _ opened: OpenHandle) throws(LMDBError) {
        try currentDurability.withLock { (current: inout Durability) throws(LMDBError) in
            guard current != durability else { return }
            let all = Durability.durable.flags.union(Durability.singleSync.flags).union(Durability.none.flags)
            try check(mdb_env_set_flags(opened.env, UInt32(all.rawValue), 0))
            if !durability.flags.isEmpty { try check(mdb_env_set_flags(opened.env, UInt32(durability.flags.rawValue), 1)) }
            current = durability
        }
    }

    /// Takes another process's larger map (`mdb_env_set_mapsize(env, 0)`).
    func adoptMapSize() throws(LMDBError) {
        try gate.withExclusive { () throws(LMDBError) in
            guard let opened = handle else { return }  // closed: a reopen reads the current size
            dropIdleReaders()
            try check(mdb_env_set_mapsize(opened.env, 0))
        }
    }

    /// Doubles the map (up to `maxMapSize`) unless another thread already grew it past `seen`.
    func growMap(from seen: Int) throws(LMDBError) {
        try gate.withExclusive { () throws(LMDBError) in
            guard let opened = handle else { return }
            let current = Self.mapSize(opened.env)
            if current > seen { return }
            guard current < maxMapSize else { throw .mapFull }
            dropIdleReaders()
            let target = min(maxMapSize, max(current * 2, current + (1 << 20)))
            try check(mdb_env_set_mapsize(opened.env, target))
        }
    }

    // MARK: Transactions

    /// Frees the reset read transactions (before the map changes or the environment closes).
    private func dropIdleReaders() {
        for idle in idleReaders.withLock({ pool in defer { pool = [] }; return pool }) { mdb_txn_abort(idle.pointer) }
    }

    /// A read transaction: a reset one renewed, or a new one. Called under `gate` (shared).
    private func beginRead(_ opened: OpenHandle) -> (Int32, OpaquePointer?) {
        if let idle = idleReaders.withLock({ $0.popLast() })?.pointer {
            let code = mdb_txn_renew(idle)
            if code == 0 { return (0, idle) }
            mdb_txn_abort(idle)
            if code == MDB_MAP_RESIZED { return (code, nil) }
        }
        var txnPointer: OpaquePointer?
        let code = mdb_txn_begin(opened.env, nil, UInt32(MDB_RDONLY), &txnPointer)
        return (code, txnPointer)
    }

    /// Ends a read transaction, keeping it (reset) for the next `beginRead` when the pool has room.
    private func endRead(_ txn: OpaquePointer) {
        mdb_txn_reset(txn)
        let kept = idleReaders.withLock { pool in
            guard pool.count < Self.idleReaderLimit else { return false }
            pool.append(IdleReader(pointer: txn))
            return true
        }
        if !kept { mdb_txn_abort(txn) }
    }

    /// What one attempt at a transaction came to.
    private enum Attempt<T> {
        case done(T)
        /// Another process grew the map (`MDB_MAP_RESIZED`): adopt its size and try again.
        case adoptMap
        /// The map is full (`seen` bytes): grow it and try again.
        case growMap(seen: Int)
        /// Every reader slot is taken: clear those of dead processes and try again.
        case readersFull
        /// Every reader slot is held by a live process: read without one (a writable
        /// environment) or throw ``LMDBError/readersFull``.
        case noReaderSlot
    }

    /// Runs `body` in a read transaction. When every reader slot is taken, slots of dead
    /// processes are cleared first (`mdb_reader_check`); when live processes hold them all, a
    /// writable environment reads in a write transaction that it aborts (LMDB's write
    /// transactions need no reader slot: writers keep working, docs/lmdb.md rule 4), and a
    /// read-only one throws ``LMDBError/readersFull``.
    func read<T>(_ body: (Transaction) throws -> T) throws -> T {
        var attempts = 0
        while true {
            attempts += 1
            let attempt: Attempt<T> = try withHandle(untyped: { opened in
                let (code, txnPointer) = beginRead(opened)
                if code == MDB_MAP_RESIZED, attempts < 100 { return .adoptMap }
                if code == MDB_READERS_FULL {
                    var dead: Int32 = 0
                    try check(mdb_reader_check(opened.env, &dead))
                    if dead > 0, attempts < 100 { return .readersFull }  // freed some: again
                    guard canReadWithoutSlot(opened) else { throw LMDBError.readersFull }
                    return .noReaderSlot
                }
                try check(code)
                guard let txnPointer else { throw LMDBError.badTransaction }
                let txn = Transaction(pointer: txnPointer, isReadOnly: true)
                defer {
                    txn.isLive = false
                    endRead(txnPointer)
                }
                return .done(try body(txn))
            })
            switch attempt {
            case .done(let value): return value
            case .adoptMap, .growMap: try adoptMapSize()
            case .readersFull: continue
            case .noReaderSlot: return try readWithoutSlot(body)
            }
        }
    }

    /// A read while live processes hold every reader slot: a write transaction (it needs no
    /// slot), taken like a write — this layer's writer lock, up to the write timeout — and
    /// aborted, so nothing is written; `body` gets a read-only ``Transaction``.
    private func readWithoutSlot<T>(_ body: (Transaction) throws -> T) throws -> T {
        let me = pthread_self()
        if let writer = writingThread.withLock({ $0 }), pthread_equal(writer, me) != 0 {
            // A read inside this thread's own write would wait for itself: no slot, no way round.
            throw LMDBError.readersFull
        }
        var attempts = 0
        while true {
            attempts += 1
            let attempt: Attempt<T> = try withHandle(untyped: { opened in
                try takeWriterLock(opened, timeoutMilliseconds: configuration.writeTimeoutMilliseconds)
                defer { writerLock.release(opened.lockFile) }
                var txnPointer: OpaquePointer?
                let code = mdb_txn_begin(opened.env, nil, 0, &txnPointer)
                if code == MDB_MAP_RESIZED, attempts < 100 { return .adoptMap }
                try check(code)
                guard let txnPointer else { throw LMDBError.badTransaction }
                writingThread.withLock { $0 = me }
                let txn = Transaction(pointer: txnPointer, isReadOnly: true)
                defer {
                    txn.isLive = false
                    mdb_txn_abort(txnPointer)
                    writingThread.withLock { $0 = nil }
                }
                return .done(try body(txn))
            })
            switch attempt {
            case .done(let value): return value
            case .adoptMap, .growMap, .readersFull, .noReaderSlot: try adoptMapSize()
            }
        }
    }

    func write<T>(timeoutMilliseconds: Int, durability: Durability? = nil, _ body: (Transaction) throws -> T) throws -> T {
        let me = pthread_self()
        if let writer = writingThread.withLock({ $0 }), pthread_equal(writer, me) != 0 {
            // A programming error, like GRDB's re-entrant write: fail loudly instead of hanging.
            preconditionFailure("a write transaction was begun inside another one on the same thread: it would wait forever for LMDB's writer lock, which this thread holds")
        }
        var attempts = 0
        while true {
            attempts += 1
            let attempt: Attempt<T> = try withHandle(untyped: { opened in
                try takeWriterLock(opened, timeoutMilliseconds: timeoutMilliseconds)
                defer { writerLock.release(opened.lockFile) }
                return try writeOnce(opened, retrying: attempts < 100, durability: durability, body)
            })
            switch attempt {
            case .done(let value): return value
            case .adoptMap: try adoptMapSize()
            case .growMap(let seen): try growMap(from: seen)
            case .readersFull, .noReaderSlot: _ = try clearStaleReaders()
            }
        }
    }

    /// One write transaction: committed, or aborted (never after a failed commit: rule 8).
    private func writeOnce<T>(_ opened: OpenHandle, retrying: Bool, durability: Durability?, _ body: (Transaction) throws -> T) throws -> Attempt<T> {
        let mapSeen = Self.mapSize(opened.env)
        var txnPointer: OpaquePointer?
        let code = mdb_txn_begin(opened.env, nil, 0, &txnPointer)
        if code == MDB_MAP_RESIZED, retrying { return .adoptMap }
        try check(code)
        guard let txnPointer else { throw LMDBError.badTransaction }
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
        let value: T
        do {
            value = try body(txn)
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
        return .done(value)
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
        try check(mdb_env_sync(opened.env, 1))
        syncProof.withLock { $0.synced(through: snapshot) }
        settlingSyncs.add(1, ordering: .relaxed)
    }
}

/// The environment the idle watch looks after, without keeping it alive.
private final class WeakSharedEnvironment: @unchecked Sendable {
    // @unchecked: written once, before the thread starts.
    weak var shared: SharedEnvironment?
}

/// The cross-process writer lock taken around every write transaction: a write lock on
/// ``ByteLock/writer`` of `lock.mdb` (LMDB's own writer mutex cannot time out). A process stopped
/// inside its write transaction keeps it, so others give up after their timeout and can name it;
/// a killed one loses it at once. `fcntl` locks belong to the process, so the threads of one
/// process share it: the first takes it, the last releases it.
///
/// A waiter gives up only when the writers made no progress for a whole timeout
/// (``WriterProgress``): while transactions commit, or the holder runs (only descheduled on a
/// busy machine, or waiting for the disk), it waits on — up to ``runningHolderLimit`` timeouts
/// for one holder that runs without committing (a write that never ends).
final class WriterLock: Sendable {
    /// Writers of this process inside their write (holding the lock).
    private let holders = Mutex<Int>(0)

    /// How many timeouts a waiter grants one holder that keeps running without committing.
    static let runningHolderLimit = 12

    /// Takes the lock, waiting while the writers make progress; `look` reads the progress
    /// signals (called only while waiting, once per timeout).
    func acquire(_ fd: Int32, timeoutMilliseconds: Int, look: () -> WriterProgress) throws(LMDBError) {
        if fd < 0 { return }  // lock.mdb not writable: no write will succeed anyway
        var deadline = monotonicMilliseconds() + timeoutMilliseconds
        var pause: UInt32 = 50
        var earlier: WriterProgress?
        /// When the holder began running without committing (for ``runningHolderLimit``).
        var runningSince: Int?
        while true {
            let taken = try holders.withLock { (count: inout Int) throws(LMDBError) -> Bool in
                if count > 0 { count += 1; return true }
                let code = ByteLock.set(fd, F_WRLCK, at: ByteLock.writer)
                guard code == 0 else {
                    guard code == EAGAIN || code == EACCES || code == EINTR else { throw LMDBError(rawValue: code) }
                    return false
                }
                count = 1
                return true
            }
            if taken { return }
            // A suspension waits for the transactions in flight: this one has not begun.
            if EnvironmentRegistry.isSuspended { throw .suspended }
            let now = monotonicMilliseconds()
            if earlier == nil { earlier = look() }
            if now > deadline, let before = earlier {  // ">": never less than the timeout
                let current = look()
                switch current.verdict(since: before) {
                case .committing:
                    runningSince = nil
                case .holderRunning:
                    let since = runningSince ?? (now - timeoutMilliseconds)
                    runningSince = since
                    if now - since >= timeoutMilliseconds * Self.runningHolderLimit { throw .writeLockTimeout }
                case .stalled:
                    throw .writeLockTimeout
                }
                earlier = current
                deadline = now + timeoutMilliseconds
            }
            usleep(pause)
            pause = min(pause * 2, 2000)
        }
    }

    func release(_ fd: Int32) {
        if fd < 0 { return }
        holders.withLock { count in
            count -= 1
            if count == 0 { _ = ByteLock.set(fd, F_UNLCK, at: ByteLock.writer) }
        }
    }

    /// The pid holding the lock in another process, if any.
    static func holder(_ fd: Int32) -> Int32? {
        guard fd >= 0 else { return nil }
        return (try? ByteLock.holder(fd, at: ByteLock.writer)) ?? nil  // a failed query names nobody
    }
}
