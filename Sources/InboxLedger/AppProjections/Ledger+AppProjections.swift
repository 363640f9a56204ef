/// One row of an app projection, with its key.
public struct ProjectionRow<P: LedgerProjection>: Sendable, Equatable {
    /// The row's key.
    public var key: String
    /// The row.
    public var row: P.Row

    public init(key: String, row: P.Row) {
        self.key = key
        self.row = row
    }
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
}

/// What `ledger inspect` lists for an app projection: its stored record.
public struct ProjectionInfo: Sendable, Hashable, Codable {
    /// The projection's name.
    public var name: String
    /// The version its stored state was built by.
    public var version: Int
    /// `ready`, `building`, `clearing` or `failed`.
    public var status: String
    /// Every event through this sequence is applied.
    public var appliedThrough: UInt64
    /// The build read the log after this sequence (earlier events had been trimmed).
    public var builtFrom: UInt64
    /// Rows stored.
    public var rows: Int
    /// The event types it reads.
    public var eventTypes: [String]
    /// Why it failed (status `failed`).
    public var failure: String?
}

extension ProjectionInfo {
    init(_ meta: AppProjectionMeta) {
        self.init(name: meta.name, version: meta.version, status: meta.status.rawValue, appliedThrough: meta.appliedThrough,
                  builtFrom: meta.builtFrom, rows: meta.rows, eventTypes: meta.eventTypes, failure: meta.failure)
    }
}

extension Ledger {
    /// How many events (or deleted entries) one build transaction handles: short enough that
    /// other writers wait milliseconds, not the write timeout.
    static let projectionBuildChunk = 500

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
    /// process (see ``widgetListUpdates(limit:)``: coalesced, never a backlog).
    ///
    /// ```swift
    /// for try await state in ledger.projectionUpdates(TaskList.self, limit: 5) { tasks = state.rows }
    /// ```
    public func projectionUpdates<P: LedgerProjection>(_ projection: P.Type, limit: Int = .max) -> AsyncThrowingStream<ProjectionContents<P>, any Error> {
        observe { [self] () throws(LedgerError) in (try projectionContents(P.self, limit: limit), nil) }
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
                rows.append(ProjectionRow(key: key, row: try AppProjectionJSON.decode(P.Row.self, row.json, projection: P.name, what: "row '\(key)'")))
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
        guard let registered = log.projections.projection(named: P.name), registered.typeID == ObjectIdentifier(P.self) else {
            throw .projectionUnavailable(name: P.name, reason: "\(P.self) is not registered by this handle (LedgerOptions.projections)")
        }
        return try read("read projection '\(P.name)'") { tables in
            guard let metaBytes = try tables.projections.get(.apps, AppProjectionKeys.meta(P.name)) else {
                throw LedgerError.projectionUnavailable(name: P.name, reason: "it has not been built yet: open the ledger writable once with it registered")
            }
            var meta = try registered.metaCache.meta(metaBytes, path: path)
            guard meta.version == P.version else {
                throw LedgerError.projectionUnavailable(name: P.name, reason: "the ledger holds version \(meta.version), this process registers version \(P.version)"
                    + (meta.version > P.version ? " (a newer app built it: update this process)" : " (a writable opening with it registered rebuilds it)"))
            }
            switch meta.status {
            case .ready: break
            case .building, .clearing:
                throw LedgerError.projectionUnavailable(name: P.name, reason: "it is being built (through \(meta.appliedThrough)): the opening that builds it finishes first")
            case .failed:
                throw LedgerError.projectionUnavailable(name: P.name, reason: meta.failure ?? "it failed")
            }
            let head = try tables.head()
            var store: any ProjectionStore = tables.projections
            if meta.appliedThrough < head {
                // Events appended by processes without this version: applied here, in memory.
                let overlay = OverlayStore(base: tables.projections)
                var after = meta.appliedThrough
                while after < head {
                    let events = try log.projections.upcast(tables.events.events(after: after, limit: 1000))
                    guard let last = events.last else { break }
                    let changes = try registered.stage(events, AppProjectionReader(store: overlay, name: P.name, path: path))
                    try AppProjectionTable.write(changes, name: P.name, into: overlay, rows: &meta.rows)
                    after = last.sequence
                }
                store = overlay
            }
            return try body(AppProjectionReader(store: store, name: P.name, path: path), meta, head)
        }
    }

    // MARK: Building

    /// Builds every registered projection whose stored state is missing or of an older
    /// version, in short transactions (``projectionBuildChunk``), each recording how far it
    /// got: an opening killed mid-build leaves a record the next opening continues from.
    func buildAppProjections() throws(LedgerError) {
        let registered = log.projections.projections
        guard !registered.isEmpty else { return }
        // The usual opening (a widget's launch) finds every one built: a read transaction says
        // so, where a build step's write transaction would take the writer lock and sync
        // (ledger-bench W9-C). The same test as `buildStep`'s "nothing to do".
        let pending = try read("check projections") { tables in
            try registered.filter { projection in
                guard let meta = try AppProjectionTable.meta(projection.name, in: tables.projections, path: path) else { return true }
                if meta.version > projection.version { return false }
                return meta.version < projection.version || (meta.status != .ready && meta.status != .failed)
            }
        }
        for projection in pending {
            while try !buildStep(projection) {}
        }
    }

    /// One build transaction; true once there is nothing more to do for this handle.
    private func buildStep(_ projection: AnyAppProjection) throws(LedgerError) -> Bool {
        let registry = log.projections
        return try write("build projection '\(projection.name)'") { tables in
            let store = tables.projections
            let stored = try AppProjectionTable.meta(projection.name, in: store, path: path)
            guard var meta = stored, meta.version >= projection.version else {
                // New, or built by an older version: its old state is cleared first.
                let fresh = AppProjectionMeta(name: projection.name, version: projection.version, status: .clearing, appliedThrough: 0,
                                              builtFrom: 0, rows: 0, eventTypes: projection.eventTypes.sorted(), failure: nil)
                try AppProjectionTable.putMeta(fresh, in: store)
                return false
            }
            guard meta.version == projection.version else { return true }  // a newer version is stored: left to it
            switch meta.status {
            case .ready, .failed:
                return true
            case .clearing:
                if try AppProjectionTable.clear(projection.name, in: store, limit: Self.projectionBuildChunk) == Self.projectionBuildChunk { return false }
                let from = try tables.firstSequence() - 1
                meta.status = .building
                meta.appliedThrough = from
                meta.builtFrom = from
                meta.rows = 0
            case .building:
                let head = try tables.head()
                let events = try registry.upcast(tables.events.events(after: meta.appliedThrough, limit: Self.projectionBuildChunk))
                if let last = events.last {
                    do {
                        let changes = try projection.stage(events, AppProjectionReader(store: store, name: projection.name, path: path))
                        try AppProjectionTable.write(changes, name: projection.name, into: store, rows: &meta.rows)
                        meta.appliedThrough = last.sequence
                    } catch let error as LedgerError {
                        guard case .projectionRejected = error else { throw error }
                        meta.status = .failed
                        meta.failure = error.description
                    }
                }
                if meta.status == .building, meta.appliedThrough >= head || events.isEmpty {
                    meta.appliedThrough = head
                    meta.status = .ready
                }
            }
            try AppProjectionTable.putMeta(meta, in: store)
            return meta.status == .ready || meta.status == .failed
        }
    }

    /// Deletes the stored state of projection `name` (an app that no longer registers it:
    /// its record keeps the log from being trimmed past what it applied), in short transactions.
    public func dropProjection(named name: String) throws(LedgerError) {
        while try write("drop projection '\(name)'", { tables in
            let store = tables.projections
            guard try AppProjectionTable.meta(name, in: store, path: path) != nil else { return true }
            if try AppProjectionTable.clear(name, in: store, limit: Self.projectionBuildChunk) == Self.projectionBuildChunk { return false }
            try store.delete(.apps, AppProjectionKeys.meta(name))
            return true
        }) == false {}
    }
}
