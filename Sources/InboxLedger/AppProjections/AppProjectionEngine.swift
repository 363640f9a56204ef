/// The projections a handle registers (``LedgerOptions/projections``), checked once at open,
/// and the upcasters its events are read through.
struct AppProjectionRegistry: Sendable {
    let projections: [AnyAppProjection]
    let upcasters: [EventUpcaster]
    /// The handle's decoded values (its reads and its appends' staging share it).
    let cache = AppProjectionCache()

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

extension AnyAppProjection {
    /// Applies `events` — already in the log — to the stored state and advances the record
    /// past them; an event `apply` refuses marks the projection failed (nothing skips it).
    /// The deferred catch-up of an append and a build's chunk.
    func applyStored(_ events: [Event], to meta: inout AppProjectionMeta, in store: some ProjectionStore, path: String, cache: AppProjectionCache?) throws {
        guard let last = events.last else { return }
        do {
            let changes = try stage(events, AppProjectionReader(store: store, name: name, path: path, cache: cache))
            try AppProjectionTable.write(changes, name: name, into: store, rows: &meta.rows)
            meta.appliedThrough = last.sequence
        } catch let error as LedgerError {
            guard let failure = AppProjectionMeta.failure(error) else { throw error }
            meta.status = .failed
            meta.failure = failure
        }
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
    private var caches: [String: AppProjectionCache] = [:]

    init(_ tables: StoreTransaction) { self.tables = tables }

    private var store: TransactionStore { tables.projections }

    private mutating func meta(_ name: String) throws -> AppProjectionMeta? {
        if let cached = metas[name] { return cached }
        let loaded: AppProjectionMeta?
        if let cache = caches[name] {
            loaded = try store.get(.apps, AppProjectionKeys.meta(name)).map { bytes throws(LedgerError) in try cache.meta(name, bytes, path: tables.path) }
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
            caches[projection.name] = registry.cache
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
            guard !events.isEmpty else { break }
            try projection.applyStored(events, to: &meta, in: store, path: tables.path, cache: registry.cache)
            if meta.status == .failed { return }
        }
        meta.appliedThrough = head
    }

    /// Stages `events` (the request's new events) for each of `projections`: all or nothing.
    func stage(_ events: [Event], for projections: [AnyAppProjection], registry: AppProjectionRegistry) throws(LedgerError) -> [(AnyAppProjection, AppProjectionChanges)] {
        guard !projections.isEmpty, !events.isEmpty else { return [] }  // only replays: nothing to apply
        let upcast = try registry.upcast(events)
        var staged: [(AnyAppProjection, AppProjectionChanges)] = []
        for projection in projections {
            staged.append((projection, try projection.stage(upcast, AppProjectionReader(store: store, name: projection.name, path: tables.path, cache: registry.cache))))
        }
        return staged
    }

    /// Writes what ``stage(_:for:registry:)`` returned and records each projection as applied through `head`.
    mutating func write(_ staged: [(AnyAppProjection, AppProjectionChanges)], through head: UInt64) throws {
        for (projection, changes) in staged {
            guard var meta = try meta(projection.name), meta.appliedThrough != head || !changes.isEmpty else { continue }
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
            caches[name]?.remember(name, bytes, meta)
        }
    }
}
