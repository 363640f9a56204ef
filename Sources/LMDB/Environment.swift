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
    /// Extra flags: only ``EnvironmentFlags/noReadAhead`` and ``EnvironmentFlags/noMemoryInitialization``
    /// are honoured; every other flag has its own source of truth (``readOnly``, ``durability``).
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
    /// How long a write waits without seeing the writers make progress before failing with
    /// ``LMDBError/writeLockTimeout`` (a process stopped inside its transaction holds the lock;
    /// one that commits or runs is waited for: ``WriterProgress``).
    public var writeTimeoutMilliseconds: Int = 5000
    /// Close the C environment after this long without a call (nil: never); the next call
    /// reopens it. Set by the first opener of the directory in this process.
    public var closeWhenIdleMilliseconds: Int?

    /// The defaults: read-write, durable, 32 MiB initial map, 126 reader slots.
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
    @usableFromInline let shared: SharedEnvironment
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
        try read { txn in try namedDatabases(in: txn) }
    }

    /// The named databases as `txn` sees them (with `txn.id`, a consistent view: the meta page
    /// that ``info()`` reads is written before readers can see its transaction).
    public func namedDatabases(in txn: Transaction) throws -> [String] {
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

    /// Runs `body` in a read-only transaction and ends it before returning.
    ///
    /// Adopts a map grown by another process (`MDB_MAP_RESIZED`) and retries.
    @inlinable
    public func read<T>(_ body: (Transaction) throws -> T) throws -> T {
        var result: T?
        try shared.read { txn in result = try body(txn) }
        guard let result else { throw LMDBError.badTransaction }  // the body ran, or its error was thrown
        return result
    }

    /// Runs `body` in a write transaction on the calling thread and commits it, or aborts it if
    /// `body` throws (the first error is rethrown).
    ///
    /// If the map fills (from a put or from the commit) the transaction is aborted, the map
    /// grows, and `body` runs again from the start, so `body` must not have effects outside the
    /// transaction that cannot be repeated. Never suspends: the writer lock is a process-shared
    /// mutex that must be released by the thread that took it (docs/lmdb.md rule 3).
    ///
    /// Waits at most `timeoutMilliseconds` (default: the configuration's) for another process's
    /// write transaction, then throws ``LMDBError/writeLockTimeout``.
    @available(*, noasync, message: "a write transaction must begin and end on one thread")
    @inlinable
    public func write<T>(timeoutMilliseconds: Int? = nil, durability: Durability? = nil, _ body: (Transaction) throws -> T) throws -> T {
        var result: T?
        try write(timeoutMilliseconds: timeoutMilliseconds, durability: durability) { txn in result = try body(txn) }
        guard let result else { throw LMDBError.badTransaction }  // the body ran, or its error was thrown
        return result
    }

    /// ``write(timeoutMilliseconds:durability:_:)`` without a result: what it runs.
    @available(*, noasync, message: "a write transaction must begin and end on one thread")
    @usableFromInline
    func write(timeoutMilliseconds: Int?, durability: Durability?, _ body: (Transaction) throws -> Void) throws {
        if isReadOnly { throw LMDBError.permissionDenied }
        try shared.write(timeoutMilliseconds: timeoutMilliseconds ?? shared.configuration.writeTimeoutMilliseconds,
                         durability: durability, body)
    }

    /// Throws ``LMDBError/filesNotShared`` (``FileSharing/refusal(directory:)`` says why) unless
    /// `data.mdb` and `lock.mdb` are still the files this process opened, neither linked nor
    /// replaced: the check every write transaction makes first (docs/lmdb.md rule 29).
    public func checkFilesShared() throws(LMDBError) { try shared.checkFilesShared() }

    /// The pid of the process holding the writer lock now, if one does and it can be told.
    public func writeLockHolder() -> Int32? { shared.writeLockHolder() }

    /// Makes everything committed so far durable to `durability`'s standard, whoever committed it
    /// (another process, perhaps in a weaker mode): syncs the data file unless this process
    /// already proved it on disk (docs/lmdb.md rule 30). Call it before handing what was read to
    /// another system. Does nothing for a read-only environment or `.none`.
    ///
    /// ```swift
    /// let value = try environment.read { txn in try txn.get(db, key: Array("greeting".utf8)) }
    /// try environment.makeDurable(.durable)   // now tell the server about `value`
    /// ```
    public func makeDurable(_ durability: Durability = .durable) throws(LMDBError) { try shared.makeDurable(durability) }

    /// How many syncs made an answer that rested on what was already stored durable
    /// (docs/lmdb.md rule 30: writes that changed nothing, ``makeDurable(_:)``), in this process: for tests.
    package var settlingSyncs: Int { shared.settlingSyncs.load(ordering: .relaxed) }

    /// Suspends every environment of this process (the answer to iOS's 0xdead10cc): new calls
    /// throw ``LMDBError/suspended`` at once, without locking anything; transactions in flight
    /// get up to `waitingMilliseconds` to end; then every `MDB_env` is closed, which releases
    /// every file lock and reader slot the process held. Handles stay valid: after
    /// ``resumeAll()`` each environment reopens with its next call. Returns the directories
    /// whose transactions did not end in time (still open).
    ///
    /// ```swift
    /// let stillOpen = Environment.suspendAll(waitingMilliseconds: 2000)
    /// // … the process may now be suspended …
    /// Environment.resumeAll()
    /// ```
    @discardableResult
    public static func suspendAll(waitingMilliseconds: Int) -> [String] {
        EnvironmentRegistry.suspendAll(waitingMilliseconds: waitingMilliseconds)
    }

    /// Ends ``suspendAll(waitingMilliseconds:)``.
    public static func resumeAll() { EnvironmentRegistry.resumeAll() }

    /// Whether the process is suspended.
    public static var isSuspended: Bool { EnvironmentRegistry.isSuspended }

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
        try shared.withHandle { (opened: OpenHandle) throws(LMDBError) in try check(mdb_env_sync(opened.env, 1)) }
    }

    /// Writes a consistent copy of the environment into the existing, empty `directory`.
    /// With ``CopyFlags/compact`` free pages are omitted: the offline way to shrink a file.
    public func copy(to directory: String, flags: CopyFlags = []) throws(LMDBError) {
        try shared.withHandle { (opened: OpenHandle) throws(LMDBError) in
            try check(mdb_env_copy2(opened.env, directory, UInt32(flags.rawValue)))
        }
    }

    /// Process-wide state attached to this environment (shared by every handle of the
    /// directory in this process), created by `make` on first use. The key's type is the
    /// object's: a key returns only what it was made with.
    public func attachment<T: AnyObject & Sendable>(_ key: AttachmentKey<T>, make: () -> T) -> T {
        shared.attachments.withLock { attachments in
            // The table is keyed by name and type, so what a key finds is a T.
            if let existing = attachments[key.erased] { return unsafeDowncast(existing, to: T.self) }
            let made = make()
            attachments[key.erased] = made
            return made
        }
    }

    /// The version of the LMDB library in use, e.g. `"LMDB 0.9.24: (July 24, 2019)"`.
    public static var libraryVersion: String {
        guard let s = mdb_version(nil, nil, nil) else { return "LMDB" }
        return String(cString: s)
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
