import LMDB

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An append-only, multi-process event log in one directory, backed by LMDB.
///
/// Any number of processes open the same directory and append; each event gets a dense,
/// global sequence number (1, 2, 3, …). Appends are atomic per batch, durable by default,
/// idempotent by key, and coalesced with concurrent appends of the same process into one
/// commit (group commit).
///
/// ```swift
/// let ledger = try Ledger(path: "/tmp/inbox", options: LedgerOptions(role: "app"))
/// let seq = try ledger.append(NewEvent(type: "badge.adjusted", payload: Array(#"{"delta":1}"#.utf8)))
/// for event in try ledger.events(after: 0, limit: 10) { print(event.sequence, event.type) }
/// ```
///
/// A `Ledger` is `Sendable`: share one across threads, or open as many as you like on the same
/// directory: they share one LMDB environment per process. No read transaction is kept open
/// between calls.
public final class Ledger: Sendable {
    /// The directory given at open.
    public let path: String
    /// The options given at open.
    public let options: LedgerOptions
    /// Identity and format of the ledger.
    public let metadata: LedgerMetadata
    /// The origin stamped on events this handle appends.
    public let origin: Origin
    /// The durability this handle's appends commit with: ``LedgerOptions/durability`` raised to
    /// the ledger's stored floor (``LedgerMetadata/durabilityFloor``).
    public let durability: LedgerDurability
    /// Why this handle may not write (nil: it may): opened read-only, or projections built by
    /// a newer library.
    let writeRefusal: LedgerError?

    let environment: Environment
    let schema: Schema
    let commitQueue: CommitQueue
    let changeMonitor: ChangeMonitor
    /// The last widget list read in this process (shared by every handle of the directory).
    let widgetCache: WidgetCache
    /// Runs the async forms' reads off the cooperative pool (one thread per directory).
    let readWorker: OffPoolWorker

    /// Opens the ledger in `path`, creating it (and its directory, never the directory's
    /// parents) if `options.create` allows.
    ///
    /// Fails without writing anything if `path` is not a ledger, was written by a newer format,
    /// or cannot be accessed as asked.
    public init(path: String, options: LedgerOptions = LedgerOptions()) throws(LedgerError) {
        try Ledger.validatePath(path)
        try Ledger.validateRole(options.role)
        self.path = path
        self.options = options
        self.origin = Origin(role: options.role)

        let creating = try Ledger.preflight(path: path, options: options)
        var config = EnvironmentConfiguration()
        config.readOnly = options.readOnly
        // Opening and creating commit durably; each append sets the mode it needs.
        config.durability = .durable
        config.initialMapSize = options.initialMapSize
        config.maxMapSize = options.maxMapSize
        config.writeTimeoutMilliseconds = Ledger.milliseconds(options.writeTimeout)
        config.closeWhenIdleMilliseconds = options.closesWhenIdle.map(Ledger.milliseconds)
        config.databases = Dictionary(uniqueKeysWithValues: Schema.allNames.map { ($0, DatabaseFlags()) })
        config.createDatabases = creating

        let environment = try Ledger.openEnvironment(path: path, configuration: config, options: options)
        let metadata = try Ledger.establish(environment, path: path, configuration: config, options: options)
        do { self.schema = try Schema(environment) } catch {
            throw .notALedger(path: path, reason: "missing table '\(Schema.allNames.first { !environment.hasDatabase($0) } ?? "?")'")
        }
        var opened = metadata
        if options.readOnly {
            writeRefusal = .readOnly(path: path)
        } else if metadata.projectionVersion > ProjectionRules.version {
            writeRefusal = .newerProjections(path: path, found: metadata.projectionVersion, supported: ProjectionRules.version)
        } else {
            writeRefusal = nil
            // Upgraded and rebuilt below, before the handle is returned (or the opening fails).
            opened.formatVersion = Schema.formatVersion
            opened.projectionVersion = ProjectionRules.version
        }
        self.metadata = opened
        self.durability = options.durability.atLeast(metadata.durabilityFloor)
        self.environment = environment
        self.commitQueue = environment.attachment(.commitQueue) { CommitQueue() }
        self.widgetCache = environment.attachment(.widgetCache) { WidgetCache() }
        self.readWorker = environment.attachment(.readWorker) { OffPoolWorker() }
        self.changeMonitor = environment.attachment(.changeMonitor) {
            ChangeMonitor(dataFile: path + "/data.mdb")
        }
        if writeRefusal == nil, metadata.formatVersion < Schema.formatVersion { try upgradeFormat() }
        if writeRefusal == nil, metadata.projectionVersion < ProjectionRules.version { try upgradeProjections() }
        // Before this handle appends: events already stored under a later built-in name stay custom.
        if writeRefusal == nil { try recordBuiltInTypes() }
    }

    /// Throws why this handle may not write, if it may not.
    func checkWritable() throws(LedgerError) {
        if let writeRefusal { throw writeRefusal }
    }

    /// Opens (or joins) the LMDB environment, with an error that says what went wrong.
    private static func openEnvironment(path: String, configuration: EnvironmentConfiguration,
                                        options: LedgerOptions) throws(LedgerError) -> Environment {
        do {
            return try Environment.open(directory: path, configuration: configuration)
        } catch {
            switch error {
            case .incompatible:
                throw .permissionDenied(path: path, reason: "already open read-only in this process")
            case .busy where !options.readOnly:
                throw .storage(path: path, operation: "open", code: EBUSY, message: "another process has held lock.mdb's initialisation lock for more than \(Double(configuration.openRetryMilliseconds) / 1000) s (stopped or suspended while opening the ledger?)")
            case .busy:
                throw .permissionDenied(path: path, reason: "lock.mdb cannot be written here (read-only mount?) while other processes have the ledger open: a reader that cannot register its snapshot could read pages being reused under it; open it through a writable path, or when no other process uses it")
            case LMDBError(rawValue: EBADF):
                throw .storage(path: path, operation: "open", code: EBADF, message: "descriptors 0–2 are closed and /dev/null cannot be opened to fill them: LMDB's files would take them, and what the process prints would be written into the store (docs/lmdb.md rule 28)")
            case .permissionDenied where options.readOnly:
                throw .permissionDenied(path: path, reason: "cannot open lock.mdb for writing; LMDB keeps its reader table there, so even a read-only process needs write access to it")
            default:
                throw LedgerError.from(error, path: path, operation: "open")
            }
        }
    }

    /// Makes sure `environment` is a ledger this library can use and returns its metadata:
    /// refuses someone else's LMDB file (never touched), creates the tables and metadata of a
    /// new ledger, refuses a newer format, and adds the tables an older library did not have.
    private static func establish(_ environment: Environment, path: String, configuration: EnvironmentConfiguration,
                                  options: LedgerOptions) throws(LedgerError) -> LedgerMetadata {
        let writable = !options.readOnly && options.create
        /// Opens every table, creating the missing ones (the environment's databases are shared
        /// by every handle of the process, so `environment` sees them afterwards).
        func createTables(_ operation: String) throws(LedgerError) {
            var create = configuration
            create.createDatabases = true
            do { _ = try Environment.open(directory: path, configuration: create) } catch {
                throw LedgerError.from(error, path: path, operation: operation)
            }
        }
        var found = environment.hasDatabase(Schema.metaName) ? try readMetadata(environment, path: path) : nil
        if found == nil {
            // No ledger identity: only a creation of this library's own may be finished; anything
            // else is someone else's environment, refused before anything is written.
            switch try unidentified(environment, path: path) {
            case .ledger: found = try readMetadata(environment, path: path)  // its creator finished meanwhile
            case .foreign(let reason): throw .notALedger(path: path, reason: "data.mdb holds no ledger metadata: \(reason); nothing was written")
            case .creation: break
            }
        }
        if found == nil {
            guard writable else { throw .notALedger(path: path, reason: "data.mdb holds no ledger metadata") }
            try createTables("create ledger")
            found = try initialize(environment, path: path, durabilityFloor: options.durabilityFloor, clock: options.clock)
        }
        guard let metadata = found else { throw .notALedger(path: path, reason: "data.mdb holds no ledger metadata") }
        guard metadata.formatVersion <= Schema.formatVersion else {
            throw .newerFormat(path: path, found: metadata.formatVersion, supported: Schema.formatVersion)
        }
        // A ledger created by an older library may lack tables added since: create them now
        // (writable) or treat them as empty (read-only).
        if !options.readOnly, Schema.allNames.contains(where: { !environment.hasDatabase($0) }) {
            try createTables("open")
        }
        return metadata
    }

    /// What an LMDB environment without the ledger's identity (`meta`'s `format-version`) is.
    private enum Unidentified {
        /// The identity is there after all: another process finished the creation meanwhile.
        case ledger
        /// What this library's creation leaves before the identity is written: nothing committed
        /// (transaction 0), or the ledger's tables, every one empty, committed by the creation's
        /// first transaction (docs/operations.md, "Damaged beginnings and files that are not a ledger").
        case creation
        /// Anything else: another application's environment (`reason` says what gives it away).
        case foreign(String)
    }

    /// Tells this library's unfinished creation from another application's LMDB environment,
    /// in one read transaction (nothing is written): other tables, a table with entries, or
    /// committed transactions that left none of the ledger's tables.
    private static func unidentified(_ environment: Environment, path: String) throws(LedgerError) -> Unidentified {
        do {
            // The names and the count of transactions from one snapshot: a creator in another
            // process may commit meanwhile, and LMDB writes the meta page that `info()` reads
            // before readers see its transaction, so the two read apart could show the creator's
            // transaction without its tables and call a creation foreign.
            let (names, transactions) = try environment.read { txn in (try environment.namedDatabases(in: txn), txn.id) }
            let others = names.filter { !Schema.allNames.contains($0) }.sorted()
            if !others.isEmpty {
                return .foreign("it holds tables a ledger does not have (\(others.prefix(3).map { "'\($0)'" }.joined(separator: ", "))\(others.count > 3 ? ", …" : ""))")
            }
            if names.isEmpty {
                return transactions == 0 ? .creation
                    : .foreign("an empty LMDB environment with \(transactions) committed transaction(s) that this library did not create (its creation commits the ledger's tables in its first transaction)")
            }
            return try environment.read { txn -> Unidentified in
                if environment.hasDatabase(Schema.metaName), try txn.get(environment.database(Schema.metaName), key: Schema.MetaKey.format) != nil {
                    return .ledger
                }
                for name in names.sorted() {
                    let entries = try txn.statistics(environment.database(name)).entries
                    guard entries == 0 else {
                        return .foreign(name == Schema.metaName
                            ? "its 'meta' table has \(entries) entries but not the ledger's identity (format-version, ledger-id)"
                            : "ledger metadata is missing but table '\(name)' holds \(entries) entries")
                    }
                }
                // Empty tables of the ledger's only: the creation's first transaction (all of them at
                // once; every version of this library has created `meta` and `events` together) —
                // or, after it, the tables an older library's creation lacked.
                let core: Set = [Schema.metaName, Schema.eventsName]
                guard core.isSubset(of: names), transactions <= 1 || Set(names) == Set(Schema.allNames) else {
                    return .foreign("only some of the ledger's tables (\(names.count) of \(Schema.allNames.count)), empty, after \(transactions) committed transactions: not what this library's creation leaves")
                }
                return .creation
            }
        } catch {
            throw LedgerError.from(error, path: path, operation: "open")
        }
    }

    /// Decides whether a new ledger is to be created, checking everything that can be checked
    /// without touching the directory.
    private static func preflight(path: String, options: LedgerOptions) throws(LedgerError) -> Bool {
        switch FileSystem.kind(of: path) {
        case .missing:
            guard options.create, !options.readOnly else {
                throw .notALedger(path: path, reason: "no such directory (\(options.readOnly ? "a read-only opening" : "an opening with create: false") never creates one)")
            }
            // Only the ledger's own directory is created: a missing parent is most likely a typo,
            // which must not turn into a new, empty inbox.
            if let code = FileSystem.createDirectory(path) {
                if code == ENOENT || code == ENOTDIR {
                    throw .notALedger(path: path, reason: "cannot create it: its parent directory \(FileSystem.parent(of: path)) does not exist or is not a directory (a ledger's own directory is created, never its parents: create them first, or check the path); nothing was written")
                }
                throw code == EACCES || code == EROFS
                    ? .permissionDenied(path: path, reason: "cannot create directory: \(FileSystem.errorMessage(code))")
                    : .storage(path: path, operation: "create directory", code: code, message: FileSystem.errorMessage(code))
            }
            return true
        case .other:
            throw .notALedger(path: path, reason: "not a directory")
        case .inaccessible(let code):
            throw .permissionDenied(path: path, reason: FileSystem.errorMessage(code))
        case .directory:
            break
        }
        // Another process may be creating the ledger right now: LMDB writes a new data.mdb's
        // meta pages just after creating it. A data file shorter than two pages that does not
        // look like LMDB is given up to a second to become valid before it is judged.
        var attempts = 0
        while true {
            attempts += 1
            let probe = DataFileProbe.probe(directory: path)
            switch probe {
            case .valid:
                return false
            case .unfinishedCreation:
                // Nothing was ever committed: the environment layer creates the store afresh — only
                // for a caller that may create (a read-only or `create: false` opening writes nothing).
                guard options.create, !options.readOnly else {
                    throw .notALedger(path: path, reason: "its creation never finished (data.mdb holds no commit); open it once with write access and create allowed to finish it")
                }
                return true
            case .missing:
                guard options.create, !options.readOnly else { throw .notALedger(path: path, reason: "no data.mdb in the directory") }
                guard let entries = FileSystem.entries(of: path) else {
                    throw .permissionDenied(path: path, reason: "cannot list the directory")
                }
                if entries.contains("data.mdb") { continue }  // appeared since the probe: re-judge it
                let foreign = entries.filter { $0 != "lock.mdb" }
                guard foreign.isEmpty else {
                    throw .notALedger(path: path, reason: "directory is not empty and has no data.mdb (found \(foreign.sorted().prefix(3).joined(separator: ", ")))")
                }
                return true
            case .notRegularFile(let name, let kind):
                throw .notALedger(path: path, reason: "\(name) is a \(kind), not a regular file")
            case .unreadable(let code):
                throw .permissionDenied(path: path, reason: "cannot read data.mdb: \(FileSystem.errorMessage(code))")
            case .notLMDB, .truncated, .damagedMeta, .damagedPage:
                if attempts < 50, FileSystem.size(of: path + "/data.mdb").map({ $0 < 8192 }) ?? false {
                    usleep(20_000)
                    continue
                }
                switch probe {
                case .truncated(let size, let required):
                    throw .corruptStore(path: path, reason: "data.mdb is truncated (\(size) bytes; the pages its trees refer to need \(required))")
                case .damagedMeta(let reason), .damagedPage(let reason):
                    throw .corruptStore(path: path, reason: "data.mdb: \(reason)")
                default:
                    throw .notALedger(path: path, reason: "data.mdb is not an LMDB file")
                }
            }
        }
    }

    private static func readMetadata(_ environment: Environment, path: String) throws(LedgerError) -> LedgerMetadata? {
        do {
            let meta = try environment.database(Schema.metaName)
            return try environment.read { txn -> LedgerMetadata? in
                guard let formatBytes = try txn.get(meta, key: Schema.MetaKey.format) else { return nil }
                var r = ByteReader(formatBytes)
                guard formatBytes.count == 4, let format = r.u32le() else {
                    throw LedgerError.notALedger(path: path, reason: "unreadable format version")
                }
                let id = try txn.get(meta, key: Schema.MetaKey.ledgerID).flatMap { String(utf8: $0) } ?? ""
                let created = try txn.readUInt64(meta, Schema.MetaKey.createdAt) ?? 0
                var floor = LedgerDurability.singleSync
                if let stored = try txn.get(meta, key: Schema.MetaKey.durabilityFloor) {
                    guard stored.count == 1, let value = LedgerDurability(storedByte: stored[0]) else {
                        throw LedgerError.corruptStore(path: path, reason: "unreadable durability floor in the ledger metadata")
                    }
                    floor = value
                }
                let projections = try ProjectionRules.decodeStored(txn.get(meta, key: Schema.MetaKey.projectionVersion), path: path) ?? 1
                return LedgerMetadata(formatVersion: format, ledgerID: id, createdAtMicros: Int64(bitPattern: created),
                                      durabilityFloor: floor, projectionVersion: projections)
            }
        } catch {
            throw LedgerError.from(error, path: path, operation: "read metadata")
        }
    }

    /// Writes the metadata record unless another process did it first (then keeps theirs).
    private static func initialize(_ environment: Environment, path: String, durabilityFloor: LedgerDurability, clock: LedgerClock) throws(LedgerError) -> LedgerMetadata {
        do {
            let meta = try environment.database(Schema.metaName)
            let events = try environment.database(Schema.eventsName)
            try environment.write { txn in
                if try txn.get(meta, key: Schema.MetaKey.format) != nil { return }
                // Metadata missing beside recorded events: a damaged ledger, not a new one.
                guard try txn.statistics(events).entries == 0 else {
                    throw LedgerError.notALedger(path: path, reason: "ledger metadata is missing but the log holds events")
                }
                var w = ByteWriter(capacity: 4)
                w.u32le(Schema.formatVersion)
                try txn.put(meta, key: Schema.MetaKey.format, value: w.bytes)
                try txn.put(meta, key: Schema.MetaKey.ledgerID, value: Array(randomUUIDString().utf8))
                try txn.writeUInt64(meta, Schema.MetaKey.createdAt, UInt64(bitPattern: clock.now().micros))
                try txn.writeUInt64(meta, Schema.MetaKey.head, 0)
                try txn.put(meta, key: Schema.MetaKey.durabilityFloor, value: [durabilityFloor.storedByte])
                var rules = ByteWriter(capacity: 4)
                rules.u32le(ProjectionRules.version)
                try txn.put(meta, key: Schema.MetaKey.projectionVersion, value: rules.bytes)
            }
        } catch {
            throw LedgerError.from(error, path: path, operation: "create ledger")
        }
        guard let metadata = try readMetadata(environment, path: path) else {
            throw .notALedger(path: path, reason: "metadata missing after creation")
        }
        return metadata
    }

    /// The longest origin role, in bytes of UTF-8 (``LedgerOptions/role``).
    public static let maxRoleBytes = 64

    /// A role is 1–64 bytes of printable UTF-8: no control characters and no line or paragraph
    /// separators (it is printed on one line by `ledger inspect`, `events` and `consumers`).
    static func validateRole(_ role: String) throws(LedgerError) {
        let count = role.utf8.count
        guard (1...maxRoleBytes).contains(count) else {
            throw .invalidArgument(name: "origin role", reason: "must be 1–\(maxRoleBytes) bytes of UTF-8, got \(count)")
        }
        var offset = 0
        for scalar in role.unicodeScalars {
            switch scalar.properties.generalCategory {
            case .control, .lineSeparator, .paragraphSeparator:
                let code = String(scalar.value, radix: 16, uppercase: true)
                throw .invalidArgument(name: "origin role", reason: "must be printable: U+\(String(repeating: "0", count: max(0, 4 - code.count)) + code) at byte \(offset) of \(String(reflecting: role))")
            default:
                offset += scalar.utf8.count
            }
        }
    }

    /// The path must name a directory: an empty one would resolve to whatever the working
    /// directory is.
    static func validatePath(_ path: String) throws(LedgerError) {
        guard !path.isEmpty else { throw .invalidArgument(name: "path", reason: "is empty: give the ledger's directory") }
        guard !path.utf8.contains(0) else { throw .invalidArgument(name: "path", reason: "contains a NUL byte: \(String(reflecting: path))") }
    }

    /// Runs `body` in one write transaction (on this thread) committed with this handle's
    /// durability, or with `durability` raised to the ledger's floor, mapping errors.
    func write<T>(_ operation: String, durability requested: LedgerDurability? = nil, _ body: (Transaction) throws -> T) throws(LedgerError) -> T {
        try checkWritable()
        let mode = requested.map { $0.atLeast(metadata.durabilityFloor) } ?? durability
        do {
            return try environment.write(timeoutMilliseconds: Ledger.milliseconds(options.writeTimeout), durability: mode.lmdb, body)
        } catch {
            throw writeError(error, operation: operation)
        }
    }

    /// A write's error as a `LedgerError`; a timed-out writer lock names its holder.
    func writeError(_ error: any Error, operation: String) -> LedgerError {
        if (error as? LMDBError) == .writeLockTimeout {
            return .writerBusy(path: path, holder: environment.writeLockHolder(), waitedSeconds: options.writeTimeout)
        }
        return LedgerError.from(error, path: path, operation: operation)
    }

    /// Seconds as whole milliseconds, clamped to what makes sense for a timeout.
    static func milliseconds(_ seconds: Double) -> Int {
        guard seconds.isFinite else { return seconds > 0 ? Int(Int32.max) : 0 }
        return Int(min(max(seconds, 0), Double(Int32.max) / 1000) * 1000)
    }

    /// Suspends every ledger of this process, for an app about to be suspended (iOS kills a
    /// suspended process that holds a file lock in a shared container: 0xdead10cc).
    ///
    /// From the call on, every ledger call throws ``LedgerError/suspended`` at once, without
    /// locking or touching anything; transactions in flight get up to `seconds` to end; then
    /// every LMDB environment of the process is closed, which releases every file lock and
    /// reader slot it held. `Ledger` handles, consumers, compactors and parked
    /// `waitForChange`/`changes` waiters stay valid: after ``resume()`` the first call reopens
    /// the files. Throws ``LedgerError/writerBusy(path:holder:waitedSeconds:)`` naming a ledger
    /// whose transaction did not end in time (it is still open; calls stay refused).
    ///
    /// ```swift
    /// .onChange(of: scenePhase) { _, phase in
    ///     if phase == .background { try? Ledger.suspend() } else if phase == .active { Ledger.resume() }
    /// }
    /// ```
    public static func suspend(waitingUpTo seconds: Double = 2) throws(LedgerError) {
        let stillOpen = Environment.suspendAll(waitingMilliseconds: milliseconds(seconds))
        if let path = stillOpen.first { throw .writerBusy(path: path, holder: getpid(), waitedSeconds: seconds) }
    }

    /// Ends ``suspend(waitingUpTo:)``: calls work again, each ledger reopening its files with its next call.
    public static func resume() { Environment.resumeAll() }

    /// Whether ``suspend(waitingUpTo:)`` is in force in this process.
    public static var isSuspended: Bool { Environment.isSuspended }

    /// Runs `body` in one short read transaction, mapping errors.
    func read<T>(_ operation: String, _ body: (Transaction) throws -> T) throws(LedgerError) -> T {
        do {
            return try environment.read(body)
        } catch {
            throw LedgerError.from(error, path: path, operation: operation)
        }
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
