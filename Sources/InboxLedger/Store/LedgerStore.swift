import LMDB
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The only way from the ledger to LMDB: one per handle, over the environment its directory
/// shares with every handle of the process.
///
/// The environment is private to it, so what every access owes LMDB and the caller holds by
/// construction, not by each caller remembering it:
/// - a write transaction is refused before it starts when the handle may not write
///   (``writeRefusal``: opened read-only, or projections built by a newer library);
/// - it commits with the handle's durability, or with the one asked for raised to the ledger's
///   stored floor (``LedgerMetadata/durabilityFloor``): never weaker;
/// - it waits for the writer lock no longer than ``LedgerOptions/writeTimeout``;
/// - every error comes out as a ``LedgerError`` (a timed-out writer lock names its holder).
final class LedgerStore: Sendable {
    /// The ledger's directory.
    let path: String
    /// The ledger's tables (and the directory), shared by every transaction of the store.
    let layout: StoreLayout
    /// The ledger's tables.
    var schema: Schema { layout.schema }
    /// The metadata as this handle opened it: a writable handle has upgraded the format and
    /// rebuilt the projections (or failed to open) before it is returned, so it reports the
    /// current versions.
    let metadata: LedgerMetadata
    /// The metadata as stored when the store was opened (what the opening upgrades from).
    let storedMetadata: LedgerMetadata
    /// Why this handle may not write (nil: it may).
    let writeRefusal: LedgerError?
    /// The durability a write commits with unless it asks for another: the options' raised to the floor.
    let durability: LedgerDurability
    /// How long a write waits for the writer lock.
    private let writeTimeout: Double
    private let writeTimeoutMilliseconds: Int
    private let environment: Environment
    private let readsBegun = Atomic<Int>(0)

    /// Opens the store of the ledger in `path` (``Ledger/init(path:options:)`` says what is
    /// checked and created).
    /// `projectionRules` is the version of the projection rules this library applies: a ledger
    /// whose projections a newer version built may be read, not written.
    static func open(path: String, options: LedgerOptions, projectionRules: UInt32) throws(LedgerError) -> LedgerStore {
        let creating = try preflight(path: path, options: options)
        var config = EnvironmentConfiguration()
        config.readOnly = options.readOnly
        // Opening and creating commit durably; each write sets the mode it needs.
        config.durability = .durable
        config.initialMapSize = options.initialMapSize
        config.maxMapSize = options.maxMapSize
        config.writeTimeoutMilliseconds = milliseconds(options.writeTimeout)
        config.closeWhenIdleMilliseconds = options.closesWhenIdle.map(milliseconds)
        config.databases = Dictionary(uniqueKeysWithValues: Schema.allNames.map { ($0, DatabaseFlags()) })
        config.createDatabases = creating

        let environment = try openEnvironment(path: path, configuration: config, options: options)
        let metadata = try establish(environment, path: path, configuration: config, options: options, projectionRules: projectionRules)
        let schema: Schema
        do { schema = try Schema(environment) } catch {
            throw .notALedger(path: path, reason: "missing table '\(Schema.allNames.first { !environment.hasDatabase($0) } ?? "?")'")
        }
        return LedgerStore(path: path, environment: environment, schema: schema, stored: metadata, options: options, projectionRules: projectionRules)
    }

    private init(path: String, environment: Environment, schema: Schema, stored: LedgerMetadata, options: LedgerOptions, projectionRules: UInt32) {
        self.path = path
        self.environment = environment
        self.layout = StoreLayout(schema: schema, path: path, formatVersion: stored.formatVersion)
        self.storedMetadata = stored
        var opened = stored
        if options.readOnly {
            writeRefusal = .readOnly(path: path)
        } else if stored.projectionVersion > projectionRules {
            writeRefusal = .newerProjections(path: path, found: stored.projectionVersion, supported: projectionRules)
        } else {
            writeRefusal = nil
            // Upgraded and rebuilt by the opening, before the handle is returned (or the opening fails).
            opened.formatVersion = Schema.formatVersion
            opened.projectionVersion = projectionRules
        }
        self.metadata = opened
        self.durability = options.durability.atLeast(stored.durabilityFloor)
        self.writeTimeout = options.writeTimeout
        self.writeTimeoutMilliseconds = LedgerStore.milliseconds(options.writeTimeout)
    }

    /// Throws why this handle may not write, if it may not.
    func checkWritable() throws(LedgerError) {
        if let writeRefusal { throw writeRefusal }
    }

    /// Runs `body` in one short read transaction, mapping errors.
    ///
    /// Never inlined (nor ``write(_:durability:_:)``): inlined into their callers, the Swift 6
    /// optimizer's copy propagation fails an ownership check on the private environment's borrow
    /// (a compiler crash in release builds); one call per transaction costs nothing measurable.
    @inline(never)
    func read<T>(_ operation: String, _ body: (StoreTransaction) throws -> T) throws(LedgerError) -> T {
        readsBegun.add(1, ordering: .relaxed)
        do {
            return try environment.read { txn in try body(StoreTransaction(rawTransaction: txn, layout: layout)) }
        } catch {
            throw LedgerError.from(error, path: path, operation: operation)
        }
    }

    /// How many read transactions this handle has run: reads meant to agree must share one
    /// (the tests check it).
    var readTransactions: Int { readsBegun.load(ordering: .relaxed) }

    /// Runs `body` in one write transaction (on this thread), if this handle may write,
    /// committed with the handle's durability or with `requested` raised to the ledger's floor,
    /// mapping errors.
    @inline(never)
    func write<T>(_ operation: String, durability requested: LedgerDurability? = nil, _ body: (StoreTransaction) throws -> T) throws(LedgerError) -> T {
        try checkWritable()
        let mode = requested.map { $0.atLeast(storedMetadata.durabilityFloor) } ?? durability
        do {
            return try environment.write(timeoutMilliseconds: writeTimeoutMilliseconds, durability: mode.lmdb) { txn in
                try body(StoreTransaction(rawTransaction: txn, layout: layout))
            }
        } catch {
            throw writeError(error, operation: operation)
        }
    }

    /// Makes everything committed so far durable in `requested` (raised to the floor) or this
    /// handle's mode (``Ledger/makeDurable(_:)``); nothing for a read-only environment.
    func makeDurable(_ requested: LedgerDurability?) throws(LedgerError) {
        let mode = requested.map { $0.atLeast(storedMetadata.durabilityFloor) } ?? durability
        do {
            try environment.makeDurable(mode.lmdb)
        } catch {
            throw LedgerError.from(error, path: path, operation: "sync to disk")
        }
    }

    /// A write's error as a `LedgerError`; a timed-out writer lock names its holder.
    private func writeError(_ error: any Error, operation: String) -> LedgerError {
        if (error as? LMDBError) == .writeLockTimeout {
            return .writerBusy(path: path, holder: environment.writeLockHolder(), waitedSeconds: writeTimeout)
        }
        return LedgerError.from(error, path: path, operation: operation)
    }

    /// The object kept for this directory's environment under `key` (made by `make` the first
    /// time): shared by every handle of the directory in this process, released with it.
    func attachment<T: AnyObject & Sendable>(_ key: AttachmentKey<T>, make: () -> T) -> T {
        environment.attachment(key, make: make)
    }

    /// Sizes and counters of the environment.
    func info() throws(LedgerError) -> EnvironmentInfo {
        do { return try environment.info() } catch { throw LedgerError.from(error, path: path, operation: "read environment info") }
    }

    /// The reader table as read from `lock.mdb`.
    enum ReaderTable {
        /// Each held slot's pid and the transaction it reads, if any.
        case slots([(pid: Int32, transactionID: Int?)])
        /// It cannot be read: LMDB's message, and the error a call that needs it throws.
        case unreadable(message: String, error: LedgerError)
    }

    /// The reader table's slots.
    func readers() -> ReaderTable {
        do { return .slots(try environment.readers().map { ($0.pid, $0.transactionID) }) } catch {
            return .unreadable(message: error.message, error: LedgerError.from(error, path: path, operation: "read environment info"))
        }
    }

    /// Clears reader slots left behind by processes that died; returns how many.
    func clearStaleReaders() throws(LedgerError) -> Int {
        do { return try environment.clearStaleReaders() } catch {
            throw LedgerError.from(error, path: path, operation: "check readers")
        }
    }

    /// Walks every page of the file (``Ledger/verify()``): the problems found, empty when every
    /// page is sound.
    func damagedPages() throws(LedgerError) -> [String] { try walkPages().problems }

    /// Walks every page of the file: what it visited and found.
    func walkPages() throws(LedgerError) -> PageWalkReport {
        do { return try environment.walkPages() } catch { throw LedgerError.from(error, path: path, operation: "walk pages") }
    }

    /// The damaged pages of the store in `path`, found without opening it
    /// (``Ledger/damagedPages(at:)``).
    static func damagedPages(at path: String) -> [String] {
        DataFileProbe.walkPages(directory: path)?.problems ?? []
    }

    /// Makes sure descriptors 0–2 are open (``Ledger/ensureStandardDescriptors()``).
    static func ensureStandardDescriptors() throws(LedgerError) {
        do { try Environment.ensureStandardDescriptors() } catch {
            throw .storage(path: "/dev/null", operation: "open standard descriptors", code: EBADF,
                           message: "descriptors 0–2 are not all open and /dev/null cannot be opened to fill them")
        }
    }

    /// LMDB's compacting copy of the whole environment into `directory`.
    func compactingCopy(to directory: String) throws(LedgerError) {
        do { try environment.copy(to: directory, flags: .compact) } catch {
            throw LedgerError.from(error, path: directory, operation: "compacting copy")
        }
    }

    /// Syncs made for answers that rested on what was already stored (docs/lmdb.md rule 30): for tests.
    var settlingSyncs: Int { environment.settlingSyncs }

    /// The durability the environment's last write committed with.
    var lastCommitDurability: Durability { environment.durability }

    /// Runs `body` in one write transaction on the ledger in `path` without opening a `Ledger`
    /// (whose opening would upgrade at once): the crash tests' format upgrade.
    static func withUnopenedStore(path: String, _ body: (StoreTransaction) throws -> Void) throws {
        var configuration = EnvironmentConfiguration()
        configuration.databases = Dictionary(uniqueKeysWithValues: Schema.allNames.map { ($0, DatabaseFlags()) })
        let environment = try Environment.open(directory: path, configuration: configuration)
        let layout = StoreLayout(schema: try Schema(environment), path: path, formatVersion: 0)
        try environment.write { txn in try body(StoreTransaction(rawTransaction: txn, layout: layout)) }
    }

    /// Suspends every environment of the process (``Ledger/suspend(waitingUpTo:)``).
    static func suspendAll(waitingUpTo seconds: Double) throws(LedgerError) {
        let stillOpen = Environment.suspendAll(waitingMilliseconds: milliseconds(seconds))
        if let path = stillOpen.first { throw .writerBusy(path: path, holder: getpid(), waitedSeconds: seconds) }
    }

    /// Ends ``suspendAll(waitingUpTo:)``.
    static func resumeAll() { Environment.resumeAll() }

    /// Whether ``suspendAll(waitingUpTo:)`` is in force.
    static var isSuspended: Bool { Environment.isSuspended }

    /// Seconds as whole milliseconds, clamped to what makes sense for a timeout.
    static func milliseconds(_ seconds: Double) -> Int {
        guard seconds.isFinite else { return seconds > 0 ? Int(Int32.max) : 0 }
        return Int(min(max(seconds, 0), Double(Int32.max) / 1000) * 1000)
    }
}

extension LedgerDurability {
    var lmdb: Durability {
        switch self {
        case .durable: .durable
        case .singleSync: .singleSync
        case .none: .none
        }
    }
}
