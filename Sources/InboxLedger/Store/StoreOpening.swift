import LMDB

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Opening a ledger's store: checks of the directory that touch nothing, the environment's
/// opening with errors that say what went wrong, and the ledger's identity (created, found, or
/// refused as someone else's).
extension LedgerStore {
    /// Opens (or joins) the LMDB environment, with an error that says what went wrong.
    static func openEnvironment(path: String, configuration: EnvironmentConfiguration,
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
    static func establish(_ environment: Environment, path: String, configuration: EnvironmentConfiguration,
                                  options: LedgerOptions, projectionRules: UInt32) throws(LedgerError) -> LedgerMetadata {
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
        // No ledger identity: only a creation of this library's own may be finished; anything
        // else is someone else's environment, refused before anything is written.
        var joins = 0
        identify: while found == nil {
            switch try unidentified(environment, path: path) {
            case .ledger: found = try readMetadata(environment, path: path)  // its creator finished meanwhile
            case .foreign(let reason): throw .notALedger(path: path, reason: "data.mdb holds no ledger metadata: \(reason); nothing was written")
            case .creation: break identify
            case .tablesAppeared:
                // Another process's creation committed tables after this process opened the
                // environment: open them (nothing is created or written) and look again.
                joins += 1
                guard joins <= 3 else { throw .corruptStore(path: path, reason: "the ledger's tables are listed but cannot be opened") }
                var join = configuration
                join.createDatabases = false
                do { _ = try Environment.open(directory: path, configuration: join) } catch {
                    throw LedgerError.from(error, path: path, operation: "open")
                }
                if environment.hasDatabase(Schema.metaName) { found = try readMetadata(environment, path: path) }
            }
        }
        if found == nil {
            guard writable else { throw .notALedger(path: path, reason: "data.mdb holds no ledger metadata") }
            try createTables("create ledger")
            found = try initialize(environment, path: path, durabilityFloor: options.durabilityFloor, clock: options.clock, projectionRules: projectionRules)
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
    enum Unidentified {
        /// The identity is there after all: another process finished the creation meanwhile.
        case ledger
        /// What this library's creation leaves before the identity is written: nothing committed
        /// (transaction 0), or the ledger's tables, every one empty, committed by the creation's
        /// first transaction (docs/operations.md, "Damaged beginnings and files that are not a ledger").
        case creation
        /// Anything else: another application's environment (`reason` says what gives it away).
        case foreign(String)
        /// The ledger's tables exist but this process opened the environment before they were
        /// committed (another process is creating the ledger): open them and look again.
        case tablesAppeared
    }

    /// Tells this library's unfinished creation from another application's LMDB environment,
    /// in one read transaction (nothing is written): other tables, a table with entries, or
    /// committed transactions that left none of the ledger's tables.
    static func unidentified(_ environment: Environment, path: String) throws(LedgerError) -> Unidentified {
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
            if names.contains(where: { !environment.hasDatabase($0) }) { return .tablesAppeared }
            return try environment.read { txn -> Unidentified in
                if environment.hasDatabase(Schema.metaName), try MetaRecord(txn: txn, table: environment.database(Schema.metaName)).contains(Meta.format) {
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
    static func preflight(path: String, options: LedgerOptions) throws(LedgerError) -> Bool {
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

    static func readMetadata(_ environment: Environment, path: String) throws(LedgerError) -> LedgerMetadata? {
        do {
            let meta = try environment.database(Schema.metaName)
            return try environment.read { txn -> LedgerMetadata? in try MetaRecord(txn: txn, table: meta).metadata(path: path) }
        } catch {
            throw LedgerError.from(error, path: path, operation: "read metadata")
        }
    }

    /// Writes the metadata record unless another process did it first (then keeps theirs).
    static func initialize(_ environment: Environment, path: String, durabilityFloor: LedgerDurability, clock: LedgerClock, projectionRules: UInt32) throws(LedgerError) -> LedgerMetadata {
        do {
            let meta = try environment.database(Schema.metaName)
            let events = try environment.database(Schema.eventsName)
            try environment.write { txn in
                let record = MetaRecord(txn: txn, table: meta)
                if try record.contains(Meta.format) { return }
                // Metadata missing beside recorded events: a damaged ledger, not a new one.
                guard try txn.statistics(events).entries == 0 else {
                    throw LedgerError.notALedger(path: path, reason: "ledger metadata is missing but the log holds events")
                }
                try record.create(LedgerMetadata(formatVersion: Schema.formatVersion, ledgerID: randomUUIDString(),
                                                 createdAtMicros: clock.now().micros, durabilityFloor: durabilityFloor,
                                                 projectionVersion: projectionRules))
            }
        } catch {
            throw LedgerError.from(error, path: path, operation: "create ledger")
        }
        guard let metadata = try readMetadata(environment, path: path) else {
            throw .notALedger(path: path, reason: "metadata missing after creation")
        }
        return metadata
    }
}
