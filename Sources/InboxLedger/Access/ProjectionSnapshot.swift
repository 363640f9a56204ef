/// One row of an app projection, with its key (its `id`: `ForEach(contents.rows)` works).
public struct ProjectionRow<P: LedgerProjection>: Sendable, Equatable, Identifiable {
    /// The row's key.
    public var key: String
    /// The row.
    public var row: P.Row

    /// A row under `key`.
    public init(key: String, row: P.Row) {
        self.key = key
        self.row = row
    }

    /// The key.
    public var id: String { key }
}

/// An app projection's state as one read transaction saw it: the document and the first rows
/// in the projection's order, agreeing with the log through ``head``.
public struct ProjectionContents<P: LedgerProjection>: Sendable, Equatable {
    /// The document.
    public var document: P.Document
    /// The rows, in the projection's order (at most the limit asked for).
    public var rows: [ProjectionRow<P>]
    /// How many rows the projection holds in all.
    public var rowCount: Int
    /// The log's head the state reflects.
    public var head: UInt64
    /// How many events after ``head`` the state does not reflect yet: 0 unless more events
    /// than a read replays (1,000) were appended by processes that do not keep this projection
    /// and no builder has stored them yet (docs/semantics.md, "App projections": bounded catch-up).
    public var behind: UInt64 = 0

    /// Whether `other` holds the same document, rows and row count (whatever its head).
    public func sameState(as other: ProjectionContents<P>) -> Bool {
        document == other.document && rowCount == other.rowCount && rows == other.rows
    }
}

/// The typed reader of app projection `P` in a ``LedgerSnapshot`` (``LedgerSnapshot/projection(_:)``):
/// its rows, its document, both at once. Valid, like its snapshot, only inside the read's closure.
///
/// ```swift
/// let (task, firstTen) = try ledger.read { snapshot in
///     let tasks = try snapshot.projection(TaskList.self)
///     return (try tasks.row("t1"), try tasks.rows(limit: 10))
/// }
/// ```
public struct ProjectionSnapshot<P: LedgerProjection> {
    private let reader: AppProjectionReader
    /// How many rows the projection holds (its record's count, with the replayed events').
    private let rowCount: Int
    /// The log's head the state reflects (the snapshot's head unless ``behind`` is not 0).
    public let head: UInt64
    /// How many events of the snapshot's log after ``head`` the state does not reflect yet
    /// (``ProjectionContents/behind``).
    public let behind: UInt64
    /// The stored record's bytes when the state read is exactly the stored one (nothing
    /// replayed): what ``contents(limit:)``'s cache is keyed by.
    private let record: [UInt8]?
    /// The registered version's record key: what the cache keeps the contents by.
    private let recordKey: [UInt8]

    /// The row under `key` (nil: none).
    public func row(_ key: String) throws(LedgerError) -> P.Row? {
        try reader.row(P.self, key)
    }

    /// Up to `limit` rows in the projection's order (``LedgerProjection/order(of:key:)``),
    /// starting at the first at or after `start`.
    public func rows(from start: ProjectionOrder? = nil, limit: Int = .max) throws(LedgerError) -> [ProjectionRow<P>] {
        var rows: [ProjectionRow<P>] = []
        guard limit > 0 else { return rows }
        var failure: LedgerError?
        try reader.forEachRow(from: start?.bytes ?? []) { key, at, row in
            do throws(LedgerError) {
                if let cached: P.Row = reader.cache?.value(at: at, row.stored) {
                    rows.append(ProjectionRow(key: key, row: cached))
                } else {
                    let decoded = try AppProjectionJSON.decode(P.Row.self, row.json, projection: P.name, what: "row '\(key)'")
                    reader.cache?.store(at: at, row.stored, decoded)
                    rows.append(ProjectionRow(key: key, row: decoded))
                }
            } catch {
                failure = error
                return false
            }
            return rows.count < limit
        }
        if let failure { throw failure }
        return rows
    }

    /// The document (``LedgerProjection/initialDocument`` until an event sets it).
    public func document() throws(LedgerError) -> P.Document {
        try reader.document(P.self) ?? P.initialDocument
    }

    /// The document and the first `limit` rows: what a widget shows at launch.
    ///
    /// ```swift
    /// let state = try ledger.read { try $0.projection(TaskList.self).contents(limit: 5) }
    /// print(state.document.open, state.rows.map(\.row.title))
    /// ```
    public func contents(limit: Int = .max) throws(LedgerError) -> ProjectionContents<P> {
        if let record, let cached: ProjectionContents<P> = reader.cache?.contents(at: recordKey, record: record, limit: limit) { return cached }
        let contents = ProjectionContents<P>(document: try document(), rows: try rows(limit: limit), rowCount: rowCount, head: head, behind: behind)
        if let record { reader.cache?.storeContents(at: recordKey, record: record, limit: limit, contents) }
        return contents
    }

    /// `P`'s state in `snapshot`: the stored state, with the events appended since by processes
    /// that do not keep it replayed in memory (never written by a read) — at most
    /// ``AppProjectionBounds/catchUp`` of them: past that, the state is as far as they reach,
    /// and ``behind`` says by how much.
    init(_: P.Type, in snapshot: LedgerSnapshot) throws(LedgerError) {
        let access = snapshot.access
        let path = access.path
        let registry = access.log.projections
        guard let registered = registry.projection(named: P.name), registered.type == ObjectIdentifier(P.self) else {
            throw .projectionUnavailable(name: P.name, reason: "\(P.self) is not registered by this handle (LedgerOptions.projections)")
        }
        let tables = snapshot.tables
        let cache = registry.cache
        recordKey = registered.space.record
        (reader, rowCount, head, behind, record) = try snapshot.run("read projection") {
            guard let (stored, bytes) = try AppProjectionTable.record(registered.space, in: tables.projections, path: path, cache: cache) else {
                let newest = try AppProjectionTable.versions(of: P.name, in: tables.projections, path: path).map(\.version).max()
                if let newest, newest > P.version {
                    throw LedgerError.projectionUnavailable(name: P.name, reason: "the ledger holds version \(newest), this process registers version \(P.version) (a newer app built it: update this process)")
                }
                throw LedgerError.projectionUnavailable(name: P.name, reason: "version \(P.version) is not stored (not built yet, or dropped)" + (newest.map { " (the ledger holds version \($0))" } ?? "")
                    + ": a writable handle that registers it creates and builds it when it opens, or in projections.build()")
            }
            var meta = stored
            let head = try tables.head()
            func building() -> LedgerError {
                snapshot.refreshSoon()  // a build's steps do not move the head: an observation looks again
                if access.store.writeRefusal == nil { registry.builder.schedule() }  // a stopped build continues
                return .projectionBuilding(name: P.name, through: stored.appliedThrough)
            }
            switch meta.status {
            case .ready: break
            case .building where meta.buildEndsWithin(bound: AppProjectionBounds.catchUp, of: head): break  // answered, the rest replayed
            case .building, .clearing: throw building()
            case .failed: throw LedgerError.projectionUnavailable(name: P.name, reason: meta.failure ?? "it failed")
            }
            if meta.appliedThrough >= head {
                return (AppProjectionReader(store: tables.projections, space: .of(meta, registered: registered.space), path: path, cache: cache), meta.rows, head, 0,
                        meta.status == .ready ? bytes : nil)
            }
            // Events not applied yet (appended by processes without this version, or not built
            // yet): applied here, in memory, up to the bound.
            let overlay = OverlayStore(base: tables.projections)
            _ = try registered.catchUp(&meta, through: head, limit: AppProjectionBounds.catchUp, in: tables, into: overlay, registry: registry, cache: nil)
            if meta.appliedThrough < head {
                if meta.status == .building { throw building() }  // trimmed events counted in the bound: not reached
                if access.store.writeRefusal == nil { registry.builder.schedule() }  // a writable handle stores the rest
                snapshot.refreshSoon()
            }
            return (AppProjectionReader(store: overlay, space: AppProjectionSpace(meta), path: path), meta.rows, meta.appliedThrough, head - meta.appliedThrough, nil)
        }
    }
}

@available(*, unavailable, message: "a projection's snapshot is one thread's read transaction: read inside the closure")
extension ProjectionSnapshot: Sendable {}
