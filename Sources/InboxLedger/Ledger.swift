#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An append-only, multi-process event log in one directory, backed by LMDB: the handle a
/// process opens, reads through and appends through.
///
/// Any number of processes open the same directory and append; each event gets a dense,
/// global sequence number (1, 2, 3, …). Appends are atomic per batch, durable by default,
/// idempotent by key, and coalesced with concurrent appends of the same process into one
/// commit (group commit). Reads see one snapshot each (``read(_:)-(_)``), however many values
/// they take from it.
///
/// ```swift
/// let ledger = try Ledger(path: "/tmp/inbox", options: LedgerOptions(role: "app"))
/// try ledger.append(.badgeAdjusted(.delta(1)), key: "push-4711")
/// let (head, list) = try ledger.read { snapshot in (try snapshot.head(), try snapshot.widgetList(limit: 5)) }
/// print(head, list.badge)
/// ```
///
/// What is not reading or appending is a feature reached from the handle:
/// ``consumers`` (named readers with durable cursors), ``projections`` (the app's read models
/// stored in the ledger), ``maintenance`` (statistics, verification, snapshots, copies);
/// observation is ``LedgerObservation``.
///
/// A `Ledger` is `Sendable`: share one across threads, or open as many as you like on the same
/// directory: they share one LMDB environment per process. No read transaction is kept open
/// between calls.
public final class Ledger: Sendable, LedgerAccessing {
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

    /// The handle's internals, the one value its features hold.
    let access: LedgerAccess

    /// Opens the ledger in `path`, creating it (and its directory, never the directory's
    /// parents) if `options.create` allows.
    ///
    /// Fails without writing anything if `path` is not a ledger, was written by a newer format,
    /// or cannot be accessed as asked.
    public init(path: String, options: LedgerOptions = LedgerOptions()) throws(LedgerError) {
        try Ledger.validatePath(path)
        try Ledger.validateRole(options.role)
        let projections = try AppProjectionRegistry.make(options)  // before anything is opened or created
        self.path = path
        self.options = options
        self.origin = Origin(role: options.role)

        let store = try LedgerStore.open(path: path, options: options, projectionRules: ProjectionRules.version)
        self.metadata = store.metadata
        self.durability = store.durability
        // The per-directory objects hang off the store's environment (shared by every handle).
        let commitQueue = store.attachment(.commitQueue) { CommitQueue() }
        let changeMonitor = store.attachment(.changeMonitor) { ChangeMonitor(dataFile: path + "/data.mdb") }
        let log = EventLog(store: store, commitQueue: commitQueue, changeMonitor: changeMonitor, origin: origin,
                           durability: store.durability, options: options, projections: projections)
        self.access = LedgerAccess(
            path: path, options: options, origin: origin, store: store, log: log, changeMonitor: changeMonitor,
            widgetCache: store.attachment(.widgetCache) { WidgetCache() },
            readWorker: store.attachment(.readWorker) { OffPoolWorker() })
        let metadata = store.storedMetadata
        if writeRefusal == nil, metadata.formatVersion < Schema.formatVersion { try upgradeFormat() }
        if writeRefusal == nil, metadata.projectionVersion < ProjectionRules.version { try upgradeProjections() }
        // Before this handle appends: events already stored under a later built-in name stay custom.
        if writeRefusal == nil { try recordBuiltInTypes() }
        // The app's projections: records of new versions created (no event applied here), the
        // builds left to the builder (docs/apps.md, "Upgrading a projection").
        if options.projectionBuilds == .inBackground {
            // The handle's internals are held for one step at a time: a released ledger closes
            // after the step in progress, not after the whole build.
            projections.builder.bind { [weak access] () throws(LedgerError) -> Bool in
                while true {
                    guard let held = access else { return false }
                    guard try AppProjectionBuild(access: held).step(creating: false) == .worked else { return true }
                    usleep(ProjectionBuildPacing.pauseMicros)
                }
            }
        }
        if writeRefusal == nil {
            let build = AppProjectionBuild(access: access)
            try build.prepare()
            if try build.isDue() { projections.builder.schedule(delayMicros: ProjectionBuildPacing.openingDelayMicros) }
        }
    }

    /// The features of the handle: each a value holding its internals (``LedgerAccess``).

    /// Named readers of the log with durable cursors: the host app's action queue, relays.
    ///
    /// ```swift
    /// let host = try ledger.consumers.consumer(named: "host-app")
    /// ```
    public var consumers: LedgerConsumers { LedgerConsumers(access: access) }

    /// The app's read models stored in the ledger (``LedgerOptions/projections``): listing,
    /// dumping and dropping them. Their rows are read in a snapshot (``LedgerSnapshot/projection(_:)``).
    ///
    /// ```swift
    /// for info in try ledger.projections.list() { print(info.name, info.version, info.rows) }
    /// ```
    public var projections: LedgerProjections { LedgerProjections(access: access) }

    /// Statistics, reader-slot cleanup, verification, snapshots and compacted copies: what
    /// `ledger inspect`, `verify` and `compact` run.
    ///
    /// ```swift
    /// let report = try ledger.maintenance.verify()
    /// if !report.isHealthy { report.findings.forEach { print($0) } }
    /// ```
    public var maintenance: LedgerMaintenance { LedgerMaintenance(access: access) }

    /// Runs `body` until it succeeds or throws what is not transient (``LedgerError/isTransient``),
    /// waiting between tries (5 ms, doubling to 200 ms): a suspended process is polled, so a
    /// resume is noticed within 200 ms. Cancellation ends the wait with `CancellationError`.
    /// (`package`: the sync client and the test agent wait the way the consumers do.)
    package func retryingTransient<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        var delay = 5
        while true {
            do {
                return try await body()
            } catch let error as LedgerError where error.isTransient {
                try await Task.sleep(for: .milliseconds(delay))
                delay = min(delay * 2, 200)
            }
        }
    }

    /// A role is 1–64 bytes of printable UTF-8: no control characters and no line or paragraph
    /// separators (it is printed on one line by `ledger inspect`, `events` and `consumers`).
    static func validateRole(_ role: String) throws(LedgerError) {
        let count = role.utf8.count
        guard (1...Limits.maxRoleBytes).contains(count) else {
            throw .invalidArgument(name: "origin role", reason: "must be 1–\(Limits.maxRoleBytes) bytes of UTF-8, got \(count)")
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

    /// Makes every event this process has read so far as durable as `durability` promises (nil:
    /// this handle's mode; raised to the ledger's floor), whoever committed it — another process
    /// may have appended it with `.singleSync`, whose last commit a power cut can undo. Call it
    /// before telling another system about events you read: a server, a file, another device
    /// (the sync client does, before each batch it sends and before it records a downloaded
    /// page). Syncs only what this process has not proved on disk yet (docs/operations.md,
    /// "Durability"); nothing for a read-only handle or `.none`.
    ///
    /// ```swift
    /// let batch = try relay.next(limit: 100)
    /// try ledger.makeDurable()          // before the server learns of these events
    /// ```
    public func makeDurable(_ durability: LedgerDurability? = nil) throws(LedgerError) {
        try access.store.makeDurable(durability)
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
        try LedgerStore.suspendAll(waitingUpTo: seconds)
    }

    /// Ends ``suspend(waitingUpTo:)``: calls work again, each ledger reopening its files with its next call.
    public static func resume() { LedgerStore.resumeAll() }

    /// Whether ``suspend(waitingUpTo:)`` is in force in this process.
    public static var isSuspended: Bool { LedgerStore.isSuspended }
}

// The per-directory objects of the façade, attached to the environment (one per directory per
// process, shared by every handle): one key per kind, whose type fixes what it returns.

extension AttachmentKey where Value == CommitQueue {
    static let commitQueue = AttachmentKey("InboxLedger.CommitQueue")
}

extension AttachmentKey where Value == WidgetCache {
    static let widgetCache = AttachmentKey("InboxLedger.WidgetCache")
}

extension AttachmentKey where Value == OffPoolWorker {
    /// The thread of the async reads.
    static let readWorker = AttachmentKey("InboxLedger.OffPoolWorker")
}

extension AttachmentKey where Value == ChangeMonitor {
    static let changeMonitor = AttachmentKey("InboxLedger.ChangeMonitor")
}
