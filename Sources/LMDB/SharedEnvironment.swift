import CLMDB
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import LedgerThreads

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
///
/// It composes one type per invariant, as GRDB's `DatabasePool` composes `Pool`,
/// `SerializedDatabase` and `ReadWriteLock`: the C handle's lifetime (``HandleLifetime``, with
/// the resize gate), the reader pool (``ReaderPool``), the writer lock (``WriterLock``) — and
/// one transaction-begin primitive over them, ``transaction(_:_:)`` (Transactions.swift), which
/// writes the lock order down once.
@usableFromInline
final class SharedEnvironment: Sendable {
    /// The C environment: opened, closed and used only through it.
    let lifetime = HandleLifetime()
    let directory: String
    let key: EnvironmentKey
    let configuration: EnvironmentConfiguration
    /// Opened without write access.
    var readOnly: Bool { configuration.readOnly }
    /// The largest the map may grow to.
    var maxMapSize: Int { max(configuration.maxMapSize, configuration.initialMapSize) }
    let databases = Mutex<[String: Database]>([:])
    /// The order the named databases were opened in: a reopen opens them in this order again.
    private let databaseOrder = Mutex<[String]>([])
    let attachments = Mutex<[ErasedAttachmentKey: any AnyObject & Sendable]>([:])
    let currentDurability: Mutex<Durability>
    /// The map size to reopen with (the last one in use).
    private let reopenMapSize: Mutex<Int>
    /// When a call last used the environment (monotonic ms), for the idle close.
    private let lastUse = Atomic<Int>(0)
    /// This layer's cross-process writer lock (every write transaction takes it first).
    let writerLock = WriterLock()
    /// What this process proved on disk of the open file (``SyncProof``); reset at each open.
    let syncProof = Mutex(SyncProof())
    /// Syncs made for answers that rested on what was already stored (``settleDurability``), for tests.
    let settlingSyncs = Atomic<Int>(0)
    /// The thread inside a write transaction of this environment: a write begun inside another
    /// on the same thread would wait forever for LMDB's writer mutex, which that thread holds.
    let writingThread = Mutex<pthread_t?>(nil)
    /// Reset read transactions kept for reuse.
    let readerPool = ReaderPool()
    /// Handles alive (changed under the registry's lock).
    let handleCount = Atomic<Int>(0)
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
        let openedHere = try lifetime.open { () throws(LMDBError) -> OpenHandle in
            let opened = try openHandle()
            do throws(LMDBError) {
                try reopenDatabases(opened)
            } catch {
                closeC(opened)
                throw error
            }
            syncProof.withLock { $0 = SyncProof() }  // ids of the file opened now, which may not be the one before
            return opened
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
        // Under the exclusive gate, on the handle being opened (``transaction(_:on:_:)``).
        try transaction(.opening, on: opened) { (txn: Transaction) throws(LMDBError) in
            for name in order {
                var dbi: MDB_dbi = 0
                try check(mdb_dbi_open(txn.pointer, name, 0, &dbi))
                guard dbi == known[name]?.handle else { throw .badDatabase }
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
        lifetime.close(waitingMilliseconds: milliseconds) { opened in
            reopenMapSize.withLock { $0 = Self.mapSize(opened.env) }
            readerPool.drain()
            closeC(opened)
        }
    }

    /// Closes for good (the last handle is gone).
    func finish() {
        lifetime.finish()
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
            let closed = !shared.lifetime.isOpen
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
            let outcome: T? = try lifetime.withShared { (handle: OpenHandle) throws(LMDBError) -> T in
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

    /// Whether a read may run in a write transaction when no reader slot is free: the
    /// environment may write, and this layer can take its writer lock.
    func canReadWithoutSlot(_ opened: OpenHandle) -> Bool {
        !configuration.readOnly && opened.lockFile >= 0
    }

    /// This layer's writer lock, waited for while the writers make progress (``WriterLock``).
    func takeWriterLock(_ opened: OpenHandle, timeoutMilliseconds: Int) throws(LMDBError) {
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
        try lifetime.withExclusive { (handle: OpenHandle?) throws(LMDBError) in
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
    func applyDurability(_ durability: Durability, _ opened: OpenHandle) throws(LMDBError) {
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
        try lifetime.withExclusive { (handle: OpenHandle?) throws(LMDBError) in
            guard let opened = handle else { return }  // closed: a reopen reads the current size
            readerPool.drain()
            try check(mdb_env_set_mapsize(opened.env, 0))
        }
    }

    /// Doubles the map (up to `maxMapSize`) unless another thread already grew it past `seen`.
    func growMap(from seen: Int) throws(LMDBError) {
        try lifetime.withExclusive { (handle: OpenHandle?) throws(LMDBError) in
            guard let opened = handle else { return }
            let current = Self.mapSize(opened.env)
            if current > seen { return }
            guard current < maxMapSize else { throw .mapFull }
            readerPool.drain()
            let target = min(maxMapSize, max(current * 2, current + (1 << 20)))
            try check(mdb_env_set_mapsize(opened.env, target))
        }
    }
}

/// The environment the idle watch looks after, without keeping it alive.
private final class WeakSharedEnvironment: @unchecked Sendable {
    // @unchecked: written once, before the thread starts.
    weak var shared: SharedEnvironment?
}
