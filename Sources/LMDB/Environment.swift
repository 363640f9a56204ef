import CLMDB
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How to open an ``Environment``.
public struct EnvironmentConfiguration: Sendable {
    /// Open without write access. Writes throw ``LMDBError/permissionDenied``.
    public var readOnly: Bool = false
    /// Extra flags; ``EnvironmentFlags/noThreadLocalStorage`` is always added.
    public var flags: EnvironmentFlags = []
    /// What a commit costs and survives.
    public var durability: Durability = .durable
    /// Named databases to open (and create, when writable and `createDatabases` is set) at open.
    public var databases: [String: DatabaseFlags] = [:]
    /// Create missing named databases (needs a writable environment).
    public var createDatabases: Bool = true
    /// Maximum number of named databases.
    public var maxDatabases: Int = 16
    /// Reader slots. Fixed by whoever creates `lock.mdb`: use one value everywhere (rule 4).
    public var maxReaders: Int = 126
    /// The map size requested at open. The map grows by doubling when full.
    public var initialMapSize: Int = 32 << 20
    /// The map never grows past this; a write that needs more fails with ``LMDBError/mapFull``.
    public var maxMapSize: Int = 64 << 30
    /// Permissions of newly created files.
    public var fileMode: UInt32 = 0o644
    /// How long to keep retrying an open that races another process's open or close (rule 6).
    public var openRetryMilliseconds: Int = 2000

    public init() {}
}

/// Sizes and counters of an environment (`mdb_env_info` plus the file size).
public struct EnvironmentInfo: Sendable, Hashable {
    /// Bytes mapped by this process.
    public var mapSize: Int
    /// Last page number in use.
    public var lastPageNumber: Int
    /// ID of the last committed transaction.
    public var lastTransactionID: Int
    /// Reader slots in the lock file.
    public var maxReaders: Int
    /// Reader slots used so far (high-water mark, including free ones).
    public var readerSlotsUsed: Int
    /// Page size in bytes.
    public var pageSize: Int
    /// Size of `data.mdb` on disk.
    public var fileSize: Int
    /// Bytes of the map in use: `(lastPageNumber + 1) * pageSize`.
    public var usedBytes: Int { (lastPageNumber + 1) * pageSize }
}

/// One live reader slot (`mdb_reader_list`).
public struct ReaderSlot: Sendable, Hashable {
    /// The process holding the slot.
    public var pid: Int32
    /// Transaction ID of the snapshot it reads, or `nil` if idle.
    public var transactionID: Int?
}

/// An LMDB environment: one directory holding `data.mdb` and `lock.mdb`.
///
/// There is exactly one underlying `MDB_env` per directory per process (docs/lmdb.md rule 1):
/// opening the same directory again, from any thread, returns a new handle to the same
/// environment, keyed by the directory's device and inode. The `MDB_env` is closed when
/// the last handle goes away.
///
/// ```swift
/// var config = EnvironmentConfiguration()
/// config.databases = ["items": []]
/// let env = try Environment.open(directory: "/path/to/dir", configuration: config)
/// let items = try env.database("items")
/// try env.write { txn in try txn.put(items, key: [1], value: Array("one".utf8)) }
/// let value = try env.read { txn in try txn.get(items, key: [1]) }
/// ```
public final class Environment: Sendable {
    let shared: SharedEnvironment
    /// Whether this handle may write.
    public let isReadOnly: Bool

    init(shared: SharedEnvironment, readOnly: Bool) {
        self.shared = shared
        self.isReadOnly = readOnly
    }

    deinit { EnvironmentRegistry.release(shared) }

    /// Opens (or joins this process's already open) environment in `directory`, which must exist.
    public static func open(directory: String, configuration: EnvironmentConfiguration = .init()) throws(LMDBError) -> Environment {
        try EnvironmentRegistry.open(directory: directory, configuration: configuration)
    }

    /// The directory path given at open.
    public var directory: String { shared.directory }

    /// The named database `name`, opened at open time; ``LMDBError/notFound`` if it does not exist.
    public func database(_ name: String) throws(LMDBError) -> Database {
        guard let db = shared.databases.withLock({ $0[name] }) else { throw .notFound }
        return db
    }

    /// Whether the named database exists (was found or created at open).
    public func hasDatabase(_ name: String) -> Bool {
        shared.databases.withLock { $0[name] != nil }
    }

    /// The names stored in the unnamed (main) database: the named databases that exist in the
    /// file, whether or not this handle opened them.
    public func namedDatabases() throws -> [String] {
        try read { txn in
            var main: MDB_dbi = 0
            try check(mdb_dbi_open(txn.pointer, nil, 0, &main))
            return try txn.withCursor(Database(name: "", handle: main)) { cursor in
                var names: [String] = []
                var entry = try cursor.first()
                while let e = entry {
                    names.append(String(decoding: e.key, as: UTF8.self))
                    entry = try cursor.next()
                }
                return names
            }
        }
    }

    /// Runs `body` in a read-only transaction and ends it before returning.
    ///
    /// Adopts a map grown by another process (`MDB_MAP_RESIZED`) and retries.
    public func read<T>(_ body: (Transaction) throws -> T) throws -> T {
        try shared.read(body)
    }

    /// Runs `body` in a write transaction on the calling thread and commits it, or aborts it if
    /// `body` throws (the first error is rethrown).
    ///
    /// If the map fills (from a put or from the commit) the transaction is aborted, the map
    /// grows, and `body` runs again from the start, so `body` must not have effects outside the
    /// transaction that cannot be repeated. Never suspends: the writer lock is a process-shared
    /// mutex that must be released by the thread that took it (docs/lmdb.md rule 3).
    @available(*, noasync, message: "a write transaction must begin and end on one thread")
    public func write<T>(_ body: (Transaction) throws -> T) throws -> T {
        if isReadOnly { throw LMDBError.permissionDenied }
        return try shared.write(body)
    }

    /// Changes the durability of commits made by this process from now on.
    public func setDurability(_ durability: Durability) throws(LMDBError) {
        try shared.setDurability(durability)
    }

    /// The durability commits of this process currently use.
    public var durability: Durability { shared.currentDurability.withLock { $0 } }

    /// Map and file sizes, transaction and reader counters.
    public func info() throws(LMDBError) -> EnvironmentInfo { try shared.info() }

    /// Statistics of a database in a fresh read transaction.
    public func statistics(_ database: Database) throws -> DatabaseStatistics {
        try read { try $0.statistics(database) }
    }

    /// Clears reader slots left by dead processes (`mdb_reader_check`); returns how many.
    @discardableResult
    public func clearStaleReaders() throws(LMDBError) -> Int { try shared.clearStaleReaders() }

    /// The reader slots currently held by live or dead processes.
    public func readers() throws(LMDBError) -> [ReaderSlot] { try shared.readers() }

    /// Flushes written data to disk (`mdb_env_sync` with force).
    public func sync() throws(LMDBError) {
        try shared.gate.withShared { () throws(LMDBError) in try check(mdb_env_sync(shared.env, 1)) }
    }

    /// Writes a consistent copy of the environment into the existing, empty `directory`.
    /// With ``CopyFlags/compact`` free pages are omitted: the offline way to shrink a file.
    public func copy(to directory: String, flags: CopyFlags = []) throws(LMDBError) {
        try shared.gate.withShared { () throws(LMDBError) in
            try check(mdb_env_copy2(shared.env, directory, UInt32(flags.rawValue)))
        }
    }

    /// Process-wide state attached to this environment (shared by every handle of the
    /// directory in this process), created by `make` on first use.
    public func attachment<T: AnyObject & Sendable>(_ key: String, make: () -> T) -> T {
        shared.attachments.withLock { attachments in
            if let existing = attachments[key] as? T { return existing }
            let made = make()
            attachments[key] = made
            return made
        }
    }

    /// The version of the LMDB library in use, e.g. `"LMDB 0.9.24: (July 24, 2019)"`.
    public static var libraryVersion: String {
        guard let s = mdb_version(nil, nil, nil) else { return "LMDB" }
        return String(cString: s)
    }
}

/// A reset read transaction in the pool. @unchecked Sendable: a pooled transaction is inactive
/// and owned by the pool; whoever pops it is its only user until it is pushed back (MDB_NOTLS
/// lets it be renewed on any thread).
struct IdleReader: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// The single `MDB_env` of one directory in this process.
final class SharedEnvironment: @unchecked Sendable {
    // @unchecked: `env` is a C handle that LMDB allows to be used from any thread (with
    // MDB_NOTLS). Map size and flag changes are serialised by `gate`; every other mutable
    // piece of state sits in a Mutex.
    let env: OpaquePointer
    let directory: String
    let key: EnvironmentKey
    let readOnly: Bool
    let maxMapSize: Int
    let gate = ResizeGate()
    let databases = Mutex<[String: Database]>([:])
    let attachments = Mutex<[String: any AnyObject & Sendable]>([:])
    let currentDurability: Mutex<Durability>
    /// Reset read transactions kept for reuse (`mdb_txn_renew` instead of `mdb_txn_begin`): a
    /// reset transaction keeps its reader slot but pins no snapshot.
    private let idleReaders = Mutex<[IdleReader]>([])
    /// At most this many reset read transactions are kept (each holds a reader slot).
    static let idleReaderLimit = 4
    /// Handles alive; guarded by the registry's lock.
    var handleCount = 0

    init(env: OpaquePointer, directory: String, key: EnvironmentKey, readOnly: Bool, maxMapSize: Int, durability: Durability) {
        self.env = env
        self.directory = directory
        self.key = key
        self.readOnly = readOnly
        self.maxMapSize = maxMapSize
        self.currentDurability = Mutex(durability)
    }

    func close() {
        dropIdleReaders()
        mdb_env_close(env)
    }

    /// Frees the reset read transactions (before the map changes or the environment closes).
    private func dropIdleReaders() {
        for idle in idleReaders.withLock({ pool in defer { pool = [] }; return pool }) { mdb_txn_abort(idle.pointer) }
    }

    /// A read transaction: a reset one renewed, or a new one. Called under `gate` (shared).
    private func beginRead() -> (Int32, OpaquePointer?) {
        if let idle = idleReaders.withLock({ $0.popLast() })?.pointer {
            let code = mdb_txn_renew(idle)
            if code == 0 { return (0, idle) }
            mdb_txn_abort(idle)
            if code == MDB_MAP_RESIZED { return (code, nil) }
        }
        var txnPointer: OpaquePointer?
        let code = mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &txnPointer)
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

    func mapSize() -> Int {
        var info = MDB_envinfo()
        mdb_env_info(env, &info)
        return Int(info.me_mapsize)
    }

    func info() throws(LMDBError) -> EnvironmentInfo {
        var info = MDB_envinfo()
        var stat = MDB_stat()
        try check(mdb_env_info(env, &info))
        try check(mdb_env_stat(env, &stat))
        var fileStat = stat_t()
        let fileSize = Glibc_stat(directory + "/data.mdb", &fileStat) == 0 ? Int(fileStat.st_size) : 0
        return EnvironmentInfo(
            mapSize: Int(info.me_mapsize), lastPageNumber: Int(info.me_last_pgno),
            lastTransactionID: Int(info.me_last_txnid), maxReaders: Int(info.me_maxreaders),
            readerSlotsUsed: Int(info.me_numreaders), pageSize: Int(stat.ms_psize), fileSize: fileSize)
    }

    func clearStaleReaders() throws(LMDBError) -> Int {
        var dead: Int32 = 0
        try check(mdb_reader_check(env, &dead))
        return Int(dead)
    }

    func readers() throws(LMDBError) -> [ReaderSlot] {
        final class Lines { var text = "" }
        let lines = Lines()
        let code = withExtendedLifetime(lines) {
            mdb_reader_list(env, { message, context in
                guard let message, let context else { return 0 }
                Unmanaged<Lines>.fromOpaque(context).takeUnretainedValue().text += String(cString: message)
                return 0
            }, Unmanaged.passUnretained(lines).toOpaque())
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

    func setDurability(_ durability: Durability) throws(LMDBError) {
        try gate.withExclusive { () throws(LMDBError) in
            try currentDurability.withLock { (current: inout Durability) throws(LMDBError) in
                guard current != durability else { return }
                let all = Durability.durable.flags.union(Durability.singleSync.flags).union(Durability.none.flags)
                try check(mdb_env_set_flags(env, UInt32(all.rawValue), 0))
                if !durability.flags.isEmpty {
                    try check(mdb_env_set_flags(env, UInt32(durability.flags.rawValue), 1))
                }
                current = durability
            }
        }
    }

    /// Takes another process's larger map (`mdb_env_set_mapsize(env, 0)`).
    func adoptMapSize() throws(LMDBError) {
        try gate.withExclusive { () throws(LMDBError) in
            dropIdleReaders()
            try check(mdb_env_set_mapsize(env, 0))
        }
    }

    /// Doubles the map (up to `maxMapSize`) unless another thread already grew it past `seen`.
    func growMap(from seen: Int) throws(LMDBError) {
        try gate.withExclusive { () throws(LMDBError) in
            let current = mapSize()
            if current > seen { return }
            guard current < maxMapSize else { throw .mapFull }
            dropIdleReaders()
            let target = min(maxMapSize, max(current * 2, current + (1 << 20)))
            try check(mdb_env_set_mapsize(env, target))
        }
    }

    func read<T>(_ body: (Transaction) throws -> T) throws -> T {
        var attempts = 0
        while true {
            attempts += 1
            var resized = false
            let result: T? = try gate.withShared {
                let (code, txnPointer) = beginRead()
                if code == MDB_MAP_RESIZED, attempts < 100 { resized = true; return nil }
                if code == MDB_READERS_FULL, attempts < 100 {
                    _ = try? clearStaleReaders()
                    resized = true
                    return nil
                }
                try check(code)
                guard let txnPointer else { throw LMDBError.badTransaction }
                let txn = Transaction(pointer: txnPointer, isReadOnly: true)
                defer {
                    txn.isLive = false
                    endRead(txnPointer)
                }
                return try body(txn)
            }
            if let result { return result }
            if resized { try adoptMapSize() }
        }
    }

    func write<T>(_ body: (Transaction) throws -> T) throws -> T {
        var attempts = 0
        while true {
            attempts += 1
            var retry = false
            var mapSeen = 0
            let result: T? = try gate.withShared {
                mapSeen = mapSize()
                var txnPointer: OpaquePointer?
                let code = mdb_txn_begin(env, nil, 0, &txnPointer)
                if code == MDB_MAP_RESIZED, attempts < 100 {
                    retry = true
                    mapSeen = Int.max
                    return nil
                }
                try check(code)
                guard let txnPointer else { throw LMDBError.badTransaction }
                let txn = Transaction(pointer: txnPointer, isReadOnly: false)
                let value: T
                do {
                    value = try body(txn)
                } catch {
                    txn.isLive = false
                    mdb_txn_abort(txnPointer)
                    if txn.sawMapFull || (error as? LMDBError) == .mapFull {
                        retry = true
                        return nil
                    }
                    throw error
                }
                txn.isLive = false
                if txn.sawMapFull {
                    mdb_txn_abort(txnPointer)
                    retry = true
                    return nil
                }
                // A failed commit has already freed the transaction: never abort after it (rule 8).
                let commit = mdb_txn_commit(txnPointer)
                if commit == MDB_MAP_FULL {
                    retry = true
                    return nil
                }
                try check(commit)
                return value
            }
            if let result { return result }
            guard retry else { throw LMDBError.badTransaction }
            if mapSeen == Int.max {
                try adoptMapSize()
            } else {
                try growMap(from: mapSeen)
            }
        }
    }
}

@inline(__always)
func Glibc_stat(_ path: String, _ buffer: inout stat_t) -> Int32 {
    stat(path, &buffer)
}

#if canImport(Glibc)
typealias stat_t = Glibc.stat
#elseif canImport(Darwin)
typealias stat_t = Darwin.stat
#endif
