/// What a `Ledger` handle holds, in one value: the store (the only way to LMDB), the append
/// path, and the per-directory objects shared by every handle of the process. The handle's
/// features (`ledger.consumers`, `ledger.projections`, `ledger.maintenance`, snapshots) hold
/// this value, never the handle: they reach the handle's internals through it alone, and the
/// façade sits above them (docs/design.md, "Folders"). A class: every read and append passes
/// it along, and one reference costs one retain where a struct of these fields cost one each.
final class LedgerAccess: Sendable {
    /// The directory given at open.
    let path: String
    /// The options given at open.
    let options: LedgerOptions
    /// The origin stamped on events this handle appends.
    let origin: Origin
    /// The only way to LMDB: every transaction of this handle goes through it.
    let store: LedgerStore
    /// The append path (validation, group commit, the append transaction).
    let log: EventLog
    /// Wakes waiters when the head moves (one per directory per process).
    let changeMonitor: ChangeMonitor
    /// The last widget list read in this process (shared by every handle of the directory).
    let widgetCache: WidgetCache
    /// Runs the async forms' reads off the cooperative pool (one thread per directory).
    let readWorker: OffPoolWorker
    /// Runs `projections.build() async`'s steps: a thread of the handle's own, so that async
    /// reads never wait behind a step's staging.
    let buildWorker = OffPoolWorker()

    init(path: String, options: LedgerOptions, origin: Origin, store: LedgerStore, log: EventLog,
         changeMonitor: ChangeMonitor, widgetCache: WidgetCache, readWorker: OffPoolWorker) {
        self.path = path
        self.options = options
        self.origin = origin
        self.store = store
        self.log = log
        self.changeMonitor = changeMonitor
        self.widgetCache = widgetCache
        self.readWorker = readWorker
    }
}

/// A type that holds a ``LedgerAccess`` (the façade, its features): the handle's internals by
/// the names every feature uses.
protocol LedgerAccessing {
    /// The handle's internals.
    var access: LedgerAccess { get }
}

extension LedgerAccessing {
    /// The directory of the ledger.
    var path: String { access.path }
    /// The options given at open.
    var options: LedgerOptions { access.options }
    /// The store: every transaction goes through it.
    var store: LedgerStore { access.store }
    /// The append path.
    var log: EventLog { access.log }
    /// Identity and format of the ledger.
    var metadata: LedgerMetadata { access.store.metadata }
    /// The ledger's tables.
    var schema: Schema { access.store.schema }
    /// Why this handle may not write (nil: it may).
    var writeRefusal: LedgerError? { access.store.writeRefusal }
    /// Decoded app-projection values of this handle's reads and appends.
    var projectionCache: AppProjectionCache { access.log.projections.cache }
    /// How this handle replays the log into projections.
    var projectionRebuild: ProjectionRebuild { ProjectionRebuild(path: access.path, upgrade: access.options.projectionUpgrade) }
    /// The widget's reads over this ledger's projections, with the list kept by the process.
    var widgetModel: WidgetReadModel { WidgetReadModel(cache: access.widgetCache, path: access.path) }

    /// Throws why this handle may not write, if it may not.
    func checkWritable() throws(LedgerError) { try access.store.checkWritable() }

    /// Runs `body` in one short read transaction, mapping errors (``LedgerStore/read(_:_:)``).
    func read<T>(_ operation: String, _ body: (StoreTransaction) throws -> T) throws(LedgerError) -> T {
        try access.store.read(operation, body)
    }

    /// Runs `body` in one write transaction (on this thread) committed with this handle's
    /// durability, or with `durability` raised to the ledger's floor (``LedgerStore/write(_:durability:_:)``).
    func write<T>(_ operation: String, durability requested: LedgerDurability? = nil, _ body: (StoreTransaction) throws -> T) throws(LedgerError) -> T {
        try access.store.write(operation, durability: requested, body)
    }

    /// The head: the last sequence ever assigned (0 for an empty ledger), in its own read.
    func head() throws(LedgerError) -> UInt64 {
        try read("read head") { tables in try tables.head() }
    }

    /// Makes what this process has read durable as the handle's mode promises (``Ledger/makeDurable(_:)``).
    func makeDurable(_ durability: LedgerDurability? = nil) throws(LedgerError) {
        try access.store.makeDurable(durability)
    }

    /// `events` with every registered upcaster applied (no work without upcasters).
    func upcast(_ events: [Event]) throws(LedgerError) -> [Event] {
        guard !access.options.upcasters.isEmpty else { return events }
        var out = events
        for i in out.indices { out[i] = try upcast(out[i]) }
        return out
    }

    /// `event` with every registered upcaster applied.
    func upcast(_ event: Event) throws(LedgerError) -> Event {
        try EventUpcaster.apply(access.options.upcasters, to: event)
    }

    /// Waits until an append (from any process) moves the head past `sequence`; returns the new head.
    func waitForHead(after sequence: UInt64) async throws(LedgerError) -> UInt64 {
        let access = access
        do {
            return try await access.changeMonitor.wait(after: sequence) {
                Result { () throws(LedgerError) in try access.store.read("read head") { tables in try tables.head() } }
            }
        } catch {
            throw LedgerError.from(error, path: access.path, operation: "wait for a change")
        }
    }

    /// Runs `body` until it succeeds or throws what is not transient, waiting between tries
    /// (5 ms, doubling to 200 ms): a suspended process is polled, so a resume is noticed within
    /// 200 ms. Cancellation ends the wait with ``LedgerError/cancelled``.
    func retryingTransient<T: Sendable>(_ body: @Sendable () async throws(LedgerError) -> T) async throws(LedgerError) -> T {
        var delay = 5
        while true {
            do {
                return try await body()
            } catch where error.isTransient {
                do { try await Task.sleep(for: .milliseconds(delay)) } catch { throw .cancelled }
                delay = min(delay * 2, 200)
            }
        }
    }

    /// `body` run on the directory's read thread, off the cooperative pool (``OffPoolWorker``).
    func offPool<T: Sendable>(_ body: @escaping @Sendable () throws(LedgerError) -> T) async throws(LedgerError) -> T {
        try await access.readWorker.run(body)
    }
}
