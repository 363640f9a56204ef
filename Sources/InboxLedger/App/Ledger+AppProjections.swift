#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One row of an app projection, with its key (its `id`: `ForEach(contents.rows)` works).
public struct ProjectionRow<P: LedgerProjection>: Sendable, Equatable, Identifiable {
    /// The row's key.
    public var key: String
    /// The row.
    public var row: P.Row

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

    /// Whether `other` holds the same document, rows and row count (whatever its head).
    public func sameState(as other: ProjectionContents<P>) -> Bool {
        document == other.document && rowCount == other.rowCount && rows == other.rows
    }
}

extension Ledger {

    // MARK: Reads

    /// The row of `projection` under `key` (nil: none), in one short read transaction.
    ///
    /// ```swift
    /// let task = try ledger.projectionRow(TaskList.self, "t1")
    /// ```
    public func projectionRow<P: LedgerProjection>(_ projection: P.Type, _ key: String) throws(LedgerError) -> P.Row? {
        try withProjection(P.self) { reader throws(LedgerError) in try reader.row(P.self, key) }
    }

    /// Up to `limit` rows of `projection` in its order (``LedgerProjection/order(of:key:)``),
    /// starting at the first at or after `start`, in one short read transaction.
    ///
    /// ```swift
    /// let firstTen = try ledger.projectionRows(TaskList.self, limit: 10)
    /// ```
    public func projectionRows<P: LedgerProjection>(_ projection: P.Type, from start: ProjectionOrder? = nil, limit: Int = .max) throws(LedgerError) -> [ProjectionRow<P>] {
        try withProjection(P.self) { reader throws(LedgerError) in try Self.rows(P.self, reader, from: start, limit: limit) }
    }

    /// The document of `projection`, in one short read transaction.
    public func projectionDocument<P: LedgerProjection>(_ projection: P.Type) throws(LedgerError) -> P.Document {
        try withProjection(P.self) { reader throws(LedgerError) in try reader.document(P.self) ?? P.initialDocument }
    }

    /// The document and the first `limit` rows of `projection`, from one read transaction:
    /// what a widget shows at launch.
    ///
    /// ```swift
    /// let state = try ledger.projectionContents(TaskList.self, limit: 5)
    /// print(state.document.open, state.rows.map(\.row.title))
    /// ```
    public func projectionContents<P: LedgerProjection>(_ projection: P.Type, limit: Int = .max) throws(LedgerError) -> ProjectionContents<P> {
        try withProjection(P.self) { reader, meta, head throws(LedgerError) in
            ProjectionContents(document: try reader.document(P.self) ?? P.initialDocument,
                            rows: try Self.rows(P.self, reader, from: nil, limit: limit), rowCount: meta.rows, head: head)
        }
    }

    /// The state of `projection` now, then every distinct new state after commits by any
    /// process (see ``widgetListUpdates(limit:)``: coalesced, never a backlog). A commit that
    /// leaves the document, the rows shown and the row count as they were — an event of
    /// another type, another app's, the inbox's — yields nothing: states are compared without
    /// their ``ProjectionContents/head``. It ends when the iterating task is cancelled; an
    /// `@Observable` model over it is ``ProjectionModel``.
    ///
    /// ```swift
    /// for try await state in ledger.projectionUpdates(TaskList.self, limit: 5) { tasks = state.rows }
    /// ```
    public func projectionUpdates<P: LedgerProjection>(_ projection: P.Type, limit: Int = .max) -> AsyncThrowingStream<ProjectionContents<P>, any Error> {
        observe(same: { $0.sameState(as: $1) }) { [self] () throws(LedgerError) in (try projectionContents(P.self, limit: limit), nil) }
    }

    /// The records of every app projection stored in the ledger (registered here or not).
    public func projections() throws(LedgerError) -> [ProjectionInfo] {
        try read("list projections") { tables in try AppProjectionTable.metas(in: tables.projections, path: path).map(ProjectionInfo.init) }
    }

    /// The stored rows of projection `name` as JSON, in its order, and its document — what
    /// `ledger projection` prints; needs no registration (nor the app's types).
    public func projectionDump(named name: String, limit: Int = .max) throws(LedgerError) -> (info: ProjectionInfo, document: [UInt8]?, rows: [(key: String, json: [UInt8])]) {
        try read("read projection") { tables in
            guard let meta = try AppProjectionTable.meta(name, in: tables.projections, path: path) else {
                throw LedgerError.projectionUnavailable(name: name, reason: "no projection of that name is stored")
            }
            let reader = AppProjectionReader(store: tables.projections, name: name, path: path)
            var rows: [(key: String, json: [UInt8])] = []
            try reader.forEachRow { key, row in
                guard rows.count < limit else { return false }
                rows.append((key, Array(row.json)))
                return true
            }
            return (ProjectionInfo(meta), try tables.projections.get(.apps, AppProjectionKeys.document(name)), rows)
        }
    }

    static func rows<P: LedgerProjection>(_: P.Type, _ reader: AppProjectionReader, from start: ProjectionOrder?, limit: Int) throws(LedgerError) -> [ProjectionRow<P>] {
        var rows: [ProjectionRow<P>] = []
        guard limit > 0 else { return rows }
        var failure: LedgerError?
        try reader.forEachRow(from: start?.bytes ?? []) { key, row in
            do throws(LedgerError) {
                if let cached: P.Row = reader.cache?.value(P.name, key, row.stored) {
                    rows.append(ProjectionRow(key: key, row: cached))
                } else {
                    let decoded = try AppProjectionJSON.decode(P.Row.self, row.json, projection: P.name, what: "row '\(key)'")
                    reader.cache?.store(P.name, key, row.stored, decoded)
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

    func withProjection<P: LedgerProjection, T>(_: P.Type, _ body: (AppProjectionReader) throws(LedgerError) -> T) throws(LedgerError) -> T {
        try withProjection(P.self) { reader, _, _ throws(LedgerError) in try body(reader) }
    }

    /// Runs `body` on the state of `P` in one read transaction: the stored state, with the
    /// events appended since by processes that do not keep it applied in memory (never
    /// written by a read), so the state always agrees with the log's head.
    func withProjection<P: LedgerProjection, T>(_: P.Type, _ body: (AppProjectionReader, AppProjectionMeta, UInt64) throws(LedgerError) -> T) throws(LedgerError) -> T {
        guard let registered = log.projections.projection(named: P.name), registered.type == ObjectIdentifier(P.self) else {
            throw .projectionUnavailable(name: P.name, reason: "\(P.self) is not registered by this handle (LedgerOptions.projections)")
        }
        return try read("read projection") { tables in
            guard let metaBytes = try tables.projections.get(.apps, AppProjectionKeys.meta(P.name)) else {
                throw LedgerError.projectionUnavailable(name: P.name, reason: "it has not been built yet: open the ledger writable once with it registered")
            }
            var meta = try projectionCache.meta(P.name, metaBytes, path: path)
            guard meta.version == P.version else {
                throw LedgerError.projectionUnavailable(name: P.name, reason: "the ledger holds version \(meta.version), this process registers version \(P.version)"
                    + (meta.version > P.version ? " (a newer app built it: update this process)" : " (a writable opening with it registered rebuilds it)"))
            }
            switch meta.status {
            case .ready: break
            case .building, .clearing:
                throw LedgerError.projectionBuilding(name: P.name, through: meta.appliedThrough)
            case .failed:
                throw LedgerError.projectionUnavailable(name: P.name, reason: meta.failure ?? "it failed")
            }
            let head = try tables.head()
            if meta.appliedThrough == head {
                return try body(AppProjectionReader(store: tables.projections, name: P.name, path: path, cache: projectionCache), meta, head)
            }
            // Events appended by processes without this version: applied here, in memory.
            let overlay = OverlayStore(base: tables.projections)
            var after = meta.appliedThrough
            while after < head {
                let events = try log.projections.upcast(tables.events.events(after: after, limit: 1000))
                guard let last = events.last else { break }
                do {
                    let changes = try registered.stage(events, AppProjectionReader(store: overlay, name: P.name, path: path))
                    try AppProjectionTable.write(changes, name: P.name, into: overlay, rows: &meta.rows)
                } catch let error as LedgerError {
                    // The event is in the log already: the next append of this handle records the failure.
                    guard let failure = AppProjectionMeta.failure(error) else { throw error }
                    throw LedgerError.projectionUnavailable(name: P.name, reason: failure)
                }
                after = last.sequence
            }
            return try body(AppProjectionReader(store: overlay, name: P.name, path: path), meta, head)
        }
    }

    /// Deletes the stored state of projection `name` (an app that no longer registers it:
    /// its record keeps the log from being trimmed past what it applied), in short transactions.
    ///
    /// The record goes in the first one: from then on no process (an older one still
    /// registering the projection) reads the half-deleted state or applies events to it, both
    /// needing the record. The entries left are deleted after it, unless a writable opening
    /// registering the projection has created it again meanwhile: its build clears them.
    public func dropProjection(named name: String) throws(LedgerError) {
        while try write("drop projection '\(name)'", { tables in
            let store = tables.projections
            guard var meta = try AppProjectionTable.meta(name, in: store, path: path) else { return true }
            if meta.status != .clearing {
                // Marked first: a drop interrupted between its transactions leaves a projection
                // being cleared (never read; a writable opening that registers it clears and
                // rebuilds it), not a partial state recorded as ready.
                meta.status = .clearing
                meta.rows = 0
                try AppProjectionTable.putMeta(meta, in: store)
            }
            if try AppProjectionTable.clear(name, in: store, limit: Self.projectionBuildChunk) == Self.projectionBuildChunk { return false }
            try store.delete(.apps, AppProjectionKeys.meta(name))
            return true
        }) == false {
            usleep(Self.projectionBuildPauseMicros)
        }
    }
}
