import CLMDB
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import LedgerThreads

/// Identifies a directory independently of the path used to reach it.
struct EnvironmentKey: Hashable, Sendable {
    var device: UInt64
    var inode: UInt64
}

/// The process-wide table of open environments (docs/lmdb.md rule 1): one `MDB_env` per
/// directory, shared by every handle, closed with the last handle — and the process-wide
/// suspension that closes them all while keeping every handle valid.
enum EnvironmentRegistry {
    private static let open = Mutex<[EnvironmentKey: SharedEnvironment]>([:])
    private static let suspended = Atomic<Bool>(false)

    /// Whether ``suspendAll(waitingMilliseconds:)`` is in force.
    static var isSuspended: Bool { suspended.load(ordering: .acquiring) }

    static func key(forDirectory directory: String) throws(LMDBError) -> EnvironmentKey {
        var s = stat_t()
        guard stat(directory, &s) == 0 else { throw LMDBError(rawValue: errno) }
        guard (s.st_mode & S_IFMT) == S_IFDIR else { throw LMDBError(rawValue: ENOTDIR) }
        return EnvironmentKey(device: UInt64(s.st_dev), inode: UInt64(s.st_ino))
    }

    static func open(directory: String, configuration: EnvironmentConfiguration) throws(LMDBError) -> Environment {
        if isSuspended { throw .suspended }
        let key = try key(forDirectory: directory)
        return try Self.open.withLock { (table: inout [EnvironmentKey: SharedEnvironment]) throws(LMDBError) -> Environment in
            if isSuspended { throw .suspended }
            if let existing = table[key] {
                if existing.readOnly && !configuration.readOnly {
                    // This process opened the directory read-only; LMDB cannot have two
                    // environments for one file in one process, so it cannot also write.
                    throw .incompatible
                }
                try openDatabases(existing, configuration: configuration)
                existing.handleCount.add(1, ordering: .relaxed)
                return Environment(shared: existing, readOnly: configuration.readOnly)
            }
            let shared = SharedEnvironment(directory: directory, key: key, configuration: configuration)
            do throws(LMDBError) {
                try shared.ensureOpen()
                try openDatabases(shared, configuration: configuration)
            } catch {
                shared.finish()
                throw error
            }
            shared.handleCount.store(1, ordering: .relaxed)
            table[key] = shared
            return Environment(shared: shared, readOnly: configuration.readOnly)
        }
    }

    /// Whether this process has the environment of `key` open (for tests and diagnostics).
    static func isOpen(_ key: EnvironmentKey) -> Bool { open.withLock { $0[key] != nil } }

    static func release(_ shared: SharedEnvironment) {
        open.withLock { table in
            if shared.handleCount.subtract(1, ordering: .relaxed).newValue == 0 {
                table[shared.key] = nil
                shared.finish()
            }
        }
    }

    /// Refuses new calls, waits up to `milliseconds` for the transactions in flight, and closes
    /// every environment of the process. Returns the directories whose transactions did not end
    /// in time (their environments stay open; calls stay refused until ``resumeAll()``).
    static func suspendAll(waitingMilliseconds milliseconds: Int) -> [String] {
        suspended.store(true, ordering: .releasing)
        // Under the table's lock: an open racing the flag finishes first and is closed here too.
        let environments = open.withLock { Array($0.values) }
        let deadline = monotonicMilliseconds() + milliseconds
        return environments.filter { shared in
            !shared.closeHandle(waitingMilliseconds: max(0, deadline - monotonicMilliseconds()))
        }.map(\.directory)
    }

    /// Lets calls in again; each environment reopens with its next call.
    static func resumeAll() {
        suspended.store(false, ordering: .releasing)
    }

    /// Opens every named database once: first in a read transaction (no writer lock, writes
    /// nothing); only if some are missing and creation is allowed, in one write transaction —
    /// a write like any other, behind this layer's writer lock (``SharedEnvironment/transaction(_:_:)``).
    private static func openDatabases(_ shared: SharedEnvironment, configuration: EnvironmentConfiguration) throws(LMDBError) {
        let wanted = configuration.databases.filter { name, _ in shared.databases.withLock { $0[name] == nil } }
            .sorted { $0.key < $1.key }
        if wanted.isEmpty { return }
        for attempt in 1...100 {
            do throws(LMDBError) {
                try openDatabasesOnce(shared, wanted, configuration: configuration)
                return
            } catch {
                // Another process grew the map since this one opened: adopt it and try again.
                guard error == .mapResized, attempt < 100 else { throw error }
                try shared.adoptMapSize()
            }
        }
    }

    private static func openDatabasesOnce(_ shared: SharedEnvironment, _ wanted: [(key: String, value: DatabaseFlags)],
                                          configuration: EnvironmentConfiguration) throws(LMDBError) {
        var missing: [(String, DatabaseFlags)] = []
        try transaction(shared, .opening) { txn throws(LMDBError) in
            for (name, flags) in wanted {
                var dbi: MDB_dbi = 0
                let code = mdb_dbi_open(txn.pointer, name, UInt32(flags.subtracting(.create).rawValue), &dbi)
                if code == MDB_NOTFOUND { missing.append((name, flags)); continue }
                try check(code)
                shared.remember(Database(name: name, handle: dbi))
            }
        }
        guard !missing.isEmpty, configuration.createDatabases, !shared.readOnly, !configuration.readOnly else { return }
        try transaction(shared, .write(timeoutMilliseconds: configuration.writeTimeoutMilliseconds, durability: nil)) { txn throws(LMDBError) in
            for (name, flags) in missing {
                var dbi: MDB_dbi = 0
                try check(mdb_dbi_open(txn.pointer, name, UInt32(flags.union(.create).rawValue), &dbi))
                txn.changed = true  // the commit writes the new tables' records
                shared.remember(Database(name: name, handle: dbi))
            }
        }
    }

    /// ``SharedEnvironment/transaction(_:_:)`` for a body that throws only `LMDBError`.
    private static func transaction(_ shared: SharedEnvironment, _ kind: TransactionKind,
                                    _ body: (Transaction) throws(LMDBError) -> Void) throws(LMDBError) {
        do { try shared.transaction(kind) { txn in try body(txn) } } catch {
            throw (error as? LMDBError) ?? .badTransaction
        }
    }
}
