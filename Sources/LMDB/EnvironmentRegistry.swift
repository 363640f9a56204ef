import CLMDB
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Identifies a directory independently of the path used to reach it.
struct EnvironmentKey: Hashable, Sendable {
    var device: UInt64
    var inode: UInt64
}

/// The process-wide table of open environments (docs/lmdb.md rule 1): one `MDB_env` per
/// directory, shared by every handle, closed with the last handle.
enum EnvironmentRegistry {
    private static let open = Mutex<[EnvironmentKey: SharedEnvironment]>([:])

    static func key(forDirectory directory: String) throws(LMDBError) -> EnvironmentKey {
        var s = stat_t()
        guard stat(directory, &s) == 0 else { throw LMDBError(rawValue: errno) }
        guard (s.st_mode & S_IFMT) == S_IFDIR else { throw LMDBError(rawValue: ENOTDIR) }
        return EnvironmentKey(device: UInt64(s.st_dev), inode: UInt64(s.st_ino))
    }

    static func open(directory: String, configuration: EnvironmentConfiguration) throws(LMDBError) -> Environment {
        let key = try key(forDirectory: directory)
        return try Self.open.withLock { (table: inout [EnvironmentKey: SharedEnvironment]) throws(LMDBError) -> Environment in
            if let existing = table[key] {
                if existing.readOnly && !configuration.readOnly {
                    // This process opened the directory read-only; LMDB cannot have two
                    // environments for one file in one process, so it cannot also write.
                    throw .incompatible
                }
                try openDatabases(existing, configuration: configuration)
                existing.handleCount += 1
                return Environment(shared: existing, readOnly: configuration.readOnly)
            }
            let shared = try create(directory: directory, key: key, configuration: configuration)
            do throws(LMDBError) {
                _ = try shared.clearStaleReaders()
                try openDatabases(shared, configuration: configuration)
            } catch {
                shared.close()
                throw error
            }
            shared.handleCount = 1
            table[key] = shared
            return Environment(shared: shared, readOnly: configuration.readOnly)
        }
    }

    /// Whether this process has the environment of `key` open (for tests and diagnostics).
    static func isOpen(_ key: EnvironmentKey) -> Bool { open.withLock { $0[key] != nil } }

    static func release(_ shared: SharedEnvironment) {
        open.withLock { table in
            shared.handleCount -= 1
            if shared.handleCount == 0 {
                table[shared.key] = nil
                shared.close()
            }
        }
    }

    /// Creates and opens the `MDB_env`, retrying briefly when the open races another
    /// process's open or close (rule 6). The handle is freed on every failure path.
    private static func create(directory: String, key: EnvironmentKey, configuration: EnvironmentConfiguration) throws(LMDBError) -> SharedEnvironment {
        var flags = configuration.flags.union(.noThreadLocalStorage).union(configuration.durability.flags)
        flags.subtract([.noLock, .writeMap, .mapAsync])
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
            if code == 0 { code = mdb_env_set_mapsize(env, configuration.initialMapSize) }
            if code == 0 { code = mdb_env_open(env, directory, UInt32(flags.rawValue), mode_t(configuration.fileMode)) }
            if code == 0 {
                return SharedEnvironment(
                    env: env, directory: directory, key: key, readOnly: configuration.readOnly,
                    maxMapSize: max(configuration.maxMapSize, configuration.initialMapSize),
                    durability: configuration.durability)
            }
            mdb_env_close(env)
            let transient = code == EAGAIN || code == EBUSY || code == EINTR || code == ETIMEDOUT
            guard transient, monotonicMilliseconds() < deadline else { throw LMDBError(rawValue: code) }
            usleep(backoff)
            backoff = min(backoff * 2, 50_000)
        }
    }

    /// Opens every named database once: first in a read transaction (no writer lock, writes
    /// nothing); only if some are missing and creation is allowed, in one write transaction.
    private static func openDatabases(_ shared: SharedEnvironment, configuration: EnvironmentConfiguration) throws(LMDBError) {
        let wanted = configuration.databases.filter { name, _ in shared.databases.withLock { $0[name] == nil } }
        if wanted.isEmpty { return }
        var missing: [String: DatabaseFlags] = [:]
        try withTransaction(shared, readOnly: true) { (txn: OpaquePointer) throws(LMDBError) in
            for (name, flags) in wanted {
                var dbi: MDB_dbi = 0
                let code = mdb_dbi_open(txn, name, UInt32(flags.subtracting(.create).rawValue), &dbi)
                if code == MDB_NOTFOUND { missing[name] = flags; continue }
                try check(code)
                shared.databases.withLock { $0[name] = Database(name: name, handle: dbi) }
            }
        }
        guard !missing.isEmpty, configuration.createDatabases, !shared.readOnly, !configuration.readOnly else { return }
        try withTransaction(shared, readOnly: false) { (txn: OpaquePointer) throws(LMDBError) in
            for (name, flags) in missing {
                var dbi: MDB_dbi = 0
                try check(mdb_dbi_open(txn, name, UInt32(flags.union(.create).rawValue), &dbi))
                shared.databases.withLock { $0[name] = Database(name: name, handle: dbi) }
            }
        }
    }

    /// A raw transaction for opening handles: committed (so handles become shared) or aborted on error.
    private static func withTransaction(_ shared: SharedEnvironment, readOnly: Bool, _ body: (OpaquePointer) throws(LMDBError) -> Void) throws(LMDBError) {
        var attempts = 0
        while true {
            attempts += 1
            let resized = try shared.gate.withShared { () throws(LMDBError) -> Bool in
                var txnPointer: OpaquePointer?
                let code = mdb_txn_begin(shared.env, nil, readOnly ? UInt32(MDB_RDONLY) : 0, &txnPointer)
                if code == MDB_MAP_RESIZED, attempts < 100 { return true }
                try check(code)
                guard let txn = txnPointer else { throw .badTransaction }
                do throws(LMDBError) {
                    try body(txn)
                } catch {
                    mdb_txn_abort(txn)
                    throw error
                }
                try check(mdb_txn_commit(txn))
                return false
            }
            if !resized { return }
            try shared.adoptMapSize()
        }
    }
}

func monotonicMilliseconds() -> Int {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Int(ts.tv_sec) * 1000 + Int(ts.tv_nsec) / 1_000_000
}
