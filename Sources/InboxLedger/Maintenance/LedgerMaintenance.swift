/// A snapshot of a ledger's contents and of its LMDB environment, for `ledger inspect`.
public struct LedgerStatistics: Sendable, Hashable {
    /// Identity, format and durability floor of the ledger.
    public var metadata: LedgerMetadata
    /// Last sequence ever appended.
    public var headSequence: UInt64
    /// Lowest sequence still in the log.
    public var firstSequence: UInt64
    /// Events in the log.
    public var eventCount: Int
    /// Events in the log by type name.
    public var countsByType: [String: UInt64]
    /// Events in the log by origin role.
    public var countsByOrigin: [String: UInt64]
    /// Idempotency keys remembered.
    public var idempotencyKeys: Int
    /// Size of `data.mdb`.
    public var fileBytes: Int
    /// Map size of this process.
    public var mapBytes: Int
    /// Bytes of the map in use.
    public var usedBytes: Int
    /// Page size.
    public var pageSize: Int
    /// Last committed LMDB transaction.
    public var lastTransactionID: Int
    /// Reader slots in the lock file.
    public var maxReaders: Int
    /// Reader slots currently held (by live or dead processes), with their pids.
    public var readers: [Reader]
    /// Pages used by the log and by all tables together (branch, leaf, overflow).
    public var logPages: Int
    /// Pages used by all tables together.
    public var totalPages: Int
    /// Snapshots, oldest first.
    public var snapshots: [SnapshotInfo]
    /// The last compaction that finished.
    public var lastCompaction: CompactionSummary?
    /// Registered consumers.
    public var consumers: [ConsumerInfo]

    /// What the last finished compaction did.
    public struct CompactionSummary: Sendable, Hashable {
        /// When it finished.
        public var finishedAt: Timestamp
        /// The snapshot the trimmed log rests on.
        public var snapshotSequence: UInt64
        /// The last sequence trimmed.
        public var trimmedThrough: UInt64
        /// Events it deleted.
        public var eventsTrimmed: Int
        /// How long it took.
        public var seconds: Double
    }

    /// One held reader slot.
    public struct Reader: Sendable, Hashable {
        /// The process holding it.
        public var pid: Int32
        /// LMDB transaction the reader is on, if it is reading now.
        public var transactionID: Int?
        /// Whether the process still exists (a dead one's slot is stale).
        public var isAlive: Bool
    }

    /// How many transactions the oldest active reader is behind (it pins pages that older
    /// versions used), or nil if nobody is reading.
    public var oldestReaderLag: Int? {
        readers.compactMap(\.transactionID).min().map { max(0, lastTransactionID - $0) }
    }

    /// Things an operator should look at.
    public var warnings: [String] {
        var w: [String] = []
        let stale = readers.filter { !$0.isAlive }.map(\.pid)
        if !stale.isEmpty { w.append("stale reader slots of dead processes \(stale.map(String.init).joined(separator: ", ")) (cleared at the next open or write)") }
        if mapBytes > 0, Double(usedBytes) / Double(mapBytes) > 0.8 { w.append("the map is over 80 % full (it grows on demand up to maxMapSize)") }
        if let lag = oldestReaderLag, lag > 1000 { w.append("a reader is \(lag) transactions behind: it keeps old pages from being reused") }
        for c in consumers where c.cursor + 1 < firstSequence {
            w.append("consumer '\(c.name)' is behind the log (at \(c.cursor), log starts at \(firstSequence)): it must rebase")
        }
        if let slowest = consumers.min(by: { $0.cursor < $1.cursor }), headSequence > slowest.cursor, headSequence - slowest.cursor > 100_000 {
            w.append("consumer '\(slowest.name)' lags \(headSequence - slowest.cursor) events and holds compaction back")
        }
        return w
    }

    /// The last built-in event the projections applied (they are updated inline, in the
    /// append's transaction: never behind; `verify` compares them with a rebuild).
    public var projectionsAppliedThrough: UInt64
    /// The app projections' records (``LedgerProjections/list()``), read in the same transaction
    /// as the head (so none is ahead of it), or why they cannot be listed (a damaged record).
    public var appProjections: Result<[ProjectionInfo], LedgerError> = .success([])
}

/// The maintenance of a ledger (``Ledger/maintenance``): statistics, reader slots,
/// verification, snapshots and compacted copies — what `ledger inspect`, `verify` and
/// `compact` run, and what an app's own diagnostics screen reads.
///
/// ```swift
/// let stats = try ledger.maintenance.statistics()
/// print(stats.eventCount, stats.fileBytes, stats.warnings)
/// ```
public struct LedgerMaintenance: Sendable, LedgerAccessing {
    /// The internals of the handle it was reached from.
    let access: LedgerAccess

    /// Counts, sizes and reader slots, read in one short transaction.
    public func statistics() throws(LedgerError) -> LedgerStatistics {
        let info = try store.info()
        let readers: [(pid: Int32, transactionID: Int?)]
        switch store.readers() {
        case .slots(let slots): readers = slots
        case .unreadable(_, let error): throw error
        }
        return try read("read statistics") { tables in
            let head = try tables.head()
            let appProjections: Result<[ProjectionInfo], LedgerError>
            do {
                appProjections = .success(try AppProjectionTable.metas(in: tables.projections, path: path).map(ProjectionInfo.init))
            } catch {
                appProjections = .failure(error as? LedgerError ?? .unexpected(path: path, operation: "list projections", reason: "\(error)"))
            }
            let first = try tables.firstSequence()
            let counts = try tables.eventCounts()
            return LedgerStatistics(
                metadata: metadata, headSequence: head, firstSequence: first,
                eventCount: try tables.events.count(),
                countsByType: counts.byType, countsByOrigin: counts.byRole,
                idempotencyKeys: try tables.keys.count(),
                fileBytes: info.fileSize, mapBytes: info.mapSize, usedBytes: info.usedBytes,
                pageSize: info.pageSize, lastTransactionID: info.lastTransactionID,
                maxReaders: info.maxReaders,
                readers: readers.map { LedgerStatistics.Reader(pid: $0.pid, transactionID: $0.transactionID, isAlive: processIsAlive($0.pid)) },
                logPages: try tables.events.pages(),
                totalPages: info.lastPageNumber + 1,
                snapshots: try tables.snapshots.headers(),
                lastCompaction: try tables.meta.get(Meta.lastCompaction).map {
                    LedgerStatistics.CompactionSummary(
                        finishedAt: Timestamp(micros: $0.at), snapshotSequence: $0.snapshot, trimmedThrough: $0.trimmedThrough,
                        eventsTrimmed: Int($0.eventsTrimmed), seconds: Double($0.micros) / 1_000_000)
                },
                consumers: try tables.consumers.infos(head: head),
                projectionsAppliedThrough: try ProjectionState.load(from: tables.projections).appliedThrough,
                appProjections: appProjections)
        }
    }

    /// Clears reader slots left behind by processes that died; returns how many.
    @discardableResult
    public func clearStaleReaders() throws(LedgerError) -> Int {
        try store.clearStaleReaders()
    }
}
