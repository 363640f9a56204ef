/// The projections a handle registers (``LedgerOptions/projections``), checked once at open,
/// and the upcasters its events are read through.
struct AppProjectionRegistry: Sendable {
    let projections: [AnyAppProjection]
    let upcasters: [EventUpcaster]

    static let empty = AppProjectionRegistry(projections: [], upcasters: [])

    /// Checks names (format, duplicates, the built-in tables' names).
    static func make(_ options: LedgerOptions) throws(LedgerError) -> AppProjectionRegistry {
        var seen: [String: String] = [:]
        var projections: [AnyAppProjection] = []
        for type in options.projections {
            let projection = type.erased
            try AppProjectionKeys.checkName(projection.name)
            if Schema.allNames.contains(projection.name) {
                throw .invalidArgument(name: "projection name", reason: "'\(projection.name)' is the name of one of the ledger's own tables")
            }
            guard projection.version >= 1 else {
                throw .invalidArgument(name: "projection version", reason: "\(projection.typeName): version must be ≥ 1, got \(projection.version)")
            }
            if let other = seen[projection.name] {
                throw .invalidArgument(name: "projections", reason: "'\(projection.name)' is registered twice (\(other) and \(projection.typeName))")
            }
            seen[projection.name] = projection.typeName
            projections.append(projection)
        }
        return AppProjectionRegistry(projections: projections, upcasters: options.upcasters)
    }

    func projection(named name: String) -> AnyAppProjection? { projections.first { $0.name == name } }

    func upcast(_ events: [Event]) throws(LedgerError) -> [Event] {
        guard !upcasters.isEmpty else { return events }
        var out = events
        for i in out.indices { out[i] = try EventUpcaster.apply(upcasters, to: out[i]) }
        return out
    }
}

extension LedgerProjection {
    static var erased: AnyAppProjection { AnyAppProjection(Self.self) }
}

/// Reading and writing the `app-projections` table through any ``ProjectionStore``.
enum AppProjectionTable {
    static func meta(_ name: String, in store: some ProjectionStore, path: String) throws -> AppProjectionMeta? {
        try store.get(.apps, AppProjectionKeys.meta(name)).map { bytes throws(LedgerError) in try AppProjectionMeta.decode(bytes, path: path) }
    }

    static func putMeta(_ meta: AppProjectionMeta, in store: some ProjectionStore) throws {
        try store.put(.apps, AppProjectionKeys.meta(meta.name), meta.encoded())
    }

    /// Every stored projection's record, by name.
    static func metas(in store: some ProjectionStore, path: String) throws -> [AppProjectionMeta] {
        var found: [AppProjectionMeta] = []
        try store.scan(.apps, from: AppProjectionKeys.metaPrefix) { key, value in
            guard key.first == 0x00 else { return false }
            found.append(try AppProjectionMeta.decode(value, path: path))
            return true
        }
        return found
    }

    /// Writes `changes`: each row and its order-index entry (the old entry removed), the document.
    static func write(_ changes: AppProjectionChanges, name: String, into store: some ProjectionStore, rows: inout Int) throws {
        for (key, value) in changes.rows {
            let rowKey = AppProjectionKeys.row(name, key)
            if let old = try store.get(.apps, rowKey) {
                if let decoded = AppProjectionRow.decode(old) { try store.delete(.apps, AppProjectionKeys.order(name, decoded.order, key)) }
                if value == nil {
                    try store.delete(.apps, rowKey)
                    rows -= 1
                }
            } else if value != nil {
                rows += 1
            }
            guard let value, let row = AppProjectionRow.decode(value) else { continue }
            try store.put(.apps, rowKey, value)
            try store.put(.apps, AppProjectionKeys.order(name, row.order, key), Array(key.utf8))
        }
        if let document = changes.document { try store.put(.apps, AppProjectionKeys.document(name), document) }
    }

    /// Deletes up to `limit` entries of `name`'s state (rows, index, document; not its record);
    /// returns how many.
    static func clear(_ name: String, in store: some ProjectionStore, limit: Int) throws -> Int {
        let prefix = AppProjectionKeys.prefix(name)
        var keys: [[UInt8]] = []
        try store.scan(.apps, from: prefix) { key, _ in
            guard key.starts(with: prefix), keys.count < limit else { return false }
            keys.append(key)
            return true
        }
        for key in keys { try store.delete(.apps, key) }
        return keys.count
    }
}

/// The app projections inside one append's write transaction (``AppendTransaction``): each
/// request's new events are staged for every projection its handle registers and whose stored
/// version is that one, a request whose apply throws fails alone, and the records are written
/// once at the end.
struct AppProjectionsInTransaction {
    let tables: StoreTransaction
    private var metas: [String: AppProjectionMeta?] = [:]
    private var dirty: Set<String> = []
    /// The registered projections' caches of their last decoded record (by name): an append
    /// that finds the record its handle wrote last skips its JSON decoding.
    private var caches: [String: AppProjectionMetaCache] = [:]

    init(_ tables: StoreTransaction) { self.tables = tables }

    private var store: TransactionStore { tables.projections }

    private mutating func meta(_ name: String) throws -> AppProjectionMeta? {
        if let cached = metas[name] { return cached }
        let loaded: AppProjectionMeta?
        if let cache = caches[name] {
            loaded = try store.get(.apps, AppProjectionKeys.meta(name)).map { bytes throws(LedgerError) in try cache.meta(bytes, path: tables.path) }
        } else {
            loaded = try AppProjectionTable.meta(name, in: store, path: tables.path)
        }
        metas[name] = .some(loaded)
        return loaded
    }

    /// The projections of `registry` kept inline for a request appending after `head`, each
    /// brought up to `head` first (events other processes appended without it). One whose
    /// stored version differs, that is being built or has failed is left alone: its events
    /// are applied later by a process that registers the stored version (docs/semantics.md).
    mutating func inline(_ registry: AppProjectionRegistry, head: UInt64) throws -> [AnyAppProjection] {
        var kept: [AnyAppProjection] = []
        for projection in registry.projections {
            caches[projection.name] = projection.metaCache
            guard var meta = try meta(projection.name), meta.version == projection.version, meta.status == .ready else { continue }
            if meta.appliedThrough < head {
                try catchUp(projection, &meta, through: head, registry: registry)
                metas[projection.name] = .some(meta)
                dirty.insert(projection.name)
                guard meta.status == .ready else { continue }
            }
            kept.append(projection)
        }
        return kept
    }

    /// Applies the events after the record's `appliedThrough` through `head`; an apply that
    /// throws marks the projection failed (the events are already in the log).
    private func catchUp(_ projection: AnyAppProjection, _ meta: inout AppProjectionMeta, through head: UInt64, registry: AppProjectionRegistry) throws {
        while meta.appliedThrough < head {
            let events = try registry.upcast(tables.events.events(after: meta.appliedThrough, limit: 1000).filter { $0.sequence <= head })
            guard let last = events.last else { break }
            do {
                let changes = try projection.stage(events, AppProjectionReader(store: store, name: projection.name, path: tables.path))
                try AppProjectionTable.write(changes, name: projection.name, into: store, rows: &meta.rows)
                meta.appliedThrough = last.sequence
            } catch let error as LedgerError {
                guard case .projectionRejected = error else { throw error }
                meta.status = .failed
                meta.failure = error.description
                return
            }
        }
        meta.appliedThrough = head
    }

    /// Stages `events` (the request's new events) for each of `projections`: all or nothing.
    func stage(_ events: [Event], for projections: [AnyAppProjection], registry: AppProjectionRegistry) throws(LedgerError) -> [(AnyAppProjection, AppProjectionChanges)] {
        guard !projections.isEmpty else { return [] }
        let upcast = try registry.upcast(events)
        var staged: [(AnyAppProjection, AppProjectionChanges)] = []
        for projection in projections {
            staged.append((projection, try projection.stage(upcast, AppProjectionReader(store: store, name: projection.name, path: tables.path))))
        }
        return staged
    }

    /// Writes what ``stage(_:for:registry:)`` returned and records each projection as applied through `head`.
    mutating func write(_ staged: [(AnyAppProjection, AppProjectionChanges)], through head: UInt64) throws {
        for (projection, changes) in staged {
            guard var meta = try meta(projection.name) else { continue }
            if !changes.isEmpty { try AppProjectionTable.write(changes, name: projection.name, into: store, rows: &meta.rows) }
            meta.appliedThrough = head
            metas[projection.name] = .some(meta)
            dirty.insert(projection.name)
        }
    }

    /// Writes the records that changed.
    func finish() throws {
        for name in dirty.sorted() {
            guard let meta = metas[name] ?? nil else { continue }
            let bytes = try meta.encoded()
            try store.put(.apps, AppProjectionKeys.meta(name), bytes)
            caches[name]?.remember(bytes, meta)
        }
    }
}

/// An in-memory layer of changes over a store: a read that finds events not applied yet
/// applies them here, never in the file.
final class OverlayStore: ProjectionStore {
    let base: any ProjectionStore
    /// Changed entries of `.apps` (nil: deleted).
    private var changes: [[UInt8]: [UInt8]?] = [:]

    init(base: any ProjectionStore) { self.base = base }

    func get(_ table: ProjectionTable, _ key: [UInt8]) throws -> [UInt8]? {
        if table == .apps, let change = changes[key] { return change }
        return try base.get(table, key)
    }

    func put(_ table: ProjectionTable, _ key: [UInt8], _ value: [UInt8]) throws {
        guard table == .apps else { throw LMDBOverlayRefusal() }
        changes[key] = .some(value)
    }

    func delete(_ table: ProjectionTable, _ key: [UInt8]) throws {
        guard table == .apps else { throw LMDBOverlayRefusal() }
        changes[key] = .some(nil)
    }

    /// The base's entries merged with the changes, in key order.
    func scan(_ table: ProjectionTable, from start: [UInt8], _ body: ([UInt8], [UInt8]) throws -> Bool) throws {
        guard table == .apps, !changes.isEmpty else { return try base.scan(table, from: start, body) }
        let pending = changes.keys.filter { !$0.lexicographicallyPrecedes(start) }.sorted { $0.lexicographicallyPrecedes($1) }
        var next = 0
        var stopped = false
        try base.scan(table, from: start) { key, value in
            while next < pending.count, pending[next].lexicographicallyPrecedes(key) {
                if let changed = changes[pending[next]] ?? nil, try !body(pending[next], changed) { stopped = true; return false }
                next += 1
            }
            if next < pending.count, pending[next] == key {
                next += 1
                guard let changed = changes[key] ?? nil else { return true }  // deleted
                if try !body(key, changed) { stopped = true; return false }
                return true
            }
            if try !body(key, value) { stopped = true; return false }
            return true
        }
        guard !stopped else { return }
        while next < pending.count {
            if let changed = changes[pending[next]] ?? nil, try !body(pending[next], changed) { return }
            next += 1
        }
    }
}

/// Only the app projections' table is ever changed in an overlay.
struct LMDBOverlayRefusal: Error {}
