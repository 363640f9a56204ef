#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
/// The projections a handle registers (``LedgerOptions/projections``), checked once at open,
/// and the upcasters its events are read through.
struct AppProjectionRegistry: Sendable {
    let projections: [AnyAppProjection]
    let upcasters: [EventUpcaster]
    /// The handle's decoded values (its reads and its appends' staging share it).
    let cache = AppProjectionCache()
    /// The handle's background builds (``LedgerOptions/projectionBuilds``).
    let builder = ProjectionBuilder()

    static let empty = AppProjectionRegistry(projections: [], upcasters: [])

    /// Checks names (format, duplicates, the built-in tables' names).
    static func make(_ options: LedgerOptions) throws(LedgerError) -> AppProjectionRegistry {
        var seen: [String: AnyAppProjection] = [:]
        var projections: [AnyAppProjection] = []
        for type in options.projections {
            let projection = type.erased
            try AppProjectionKeys.checkName(projection.name)
            if Schema.allNames.contains(projection.name) {
                throw .invalidArgument(name: "projection name", reason: "'\(projection.name)' is the name of one of the ledger's own tables")
            }
            guard projection.version >= 1 else {
                throw .invalidArgument(name: "projection version", reason: "\(projection.typeName()): version must be ≥ 1, got \(projection.version)")
            }
            if let other = seen[projection.name] {
                throw .invalidArgument(name: "projections", reason: "'\(projection.name)' is registered twice (\(other.typeName()) and \(projection.typeName()))")
            }
            seen[projection.name] = projection
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
    /// Applies `events` — already in the log — to the stored state of `meta`'s space and
    /// advances the record past them. An event `apply` refuses (or whose state could not be
    /// stored) is skipped and counted in the record: the events are staged again one at a time
    /// to find it. A build's chunk, a catch-up's, and (into an overlay) a read's.
    func applyStored(_ events: [Event], to meta: inout AppProjectionMeta, in store: some ProjectionStore, log: AppProjectionLog,
                     cache: AppProjectionCache?) throws {
        guard let last = events.last else { return }
        let space = AppProjectionSpace(meta)
        let path = log.tables.path
        func stageAndWrite(_ events: [Event]) throws {
            let changes = try stage(events, AppProjectionReader(store: store, space: space, path: path, cache: cache), .replaying,
                                    AppProjectionFold.Input(pending: meta.pending ?? [], log: log))
            try AppProjectionTable.write(changes, space: space, into: store, rows: &meta.rows)
            changes.record(in: &meta)
        }
        do {
            try stageAndWrite(events)
        } catch let error as LedgerError where AppProjectionMeta.failure(error) != nil {
            for event in events {
                do {
                    try stageAndWrite([event])
                } catch let error as LedgerError where AppProjectionMeta.failure(error) != nil {
                    meta.recordSkipped(error)
                }
            }
        }
        meta.appliedThrough = max(meta.appliedThrough, last.sequence)
    }

    /// Applies the events after `meta.appliedThrough` through `head` (at most `limit` of them)
    /// from `tables`' log; returns whether it reached `head`.
    func catchUp(_ meta: inout AppProjectionMeta, through head: UInt64, limit: Int, in tables: StoreTransaction, into store: some ProjectionStore,
                 registry: AppProjectionRegistry, cache: AppProjectionCache?) throws -> Bool {
        var budget = limit
        while meta.appliedThrough < head, budget > 0 {
            let events = try registry.upcast(tables.events.events(after: meta.appliedThrough, limit: min(budget, 1000)).filter { $0.sequence <= head })
            guard !events.isEmpty else { break }
            try applyStored(events, to: &meta, in: store, log: AppProjectionLog(tables: tables, registry: registry), cache: cache)
            budget -= events.count
        }
        if meta.appliedThrough < head, try tables.events.events(after: meta.appliedThrough, limit: 1).first.map({ $0.sequence > head }) ?? true {
            meta.appliedThrough = head  // nothing left at or below the head (trimmed, or none)
        }
        return meta.appliedThrough >= head
    }
}

/// The bounds app projections keep (docs/semantics.md, "App projections").
enum AppProjectionBounds {
    /// The most events a read replays in memory, or an append applies to catch a projection
    /// up with events other processes appended without it: past it, a read answers from the
    /// stored state with how far behind it is, and the catch-up is stored in steps of this
    /// many events (``Ledger/projections``' builder).
    static let catchUp = 1_000
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
    /// The registered spaces, by name (their keys built once).
    private var spaces: [String: AppProjectionSpace] = [:]

    init(_ tables: StoreTransaction) { self.tables = tables }

    private var store: TransactionStore { tables.projections }

    private mutating func meta(_ projection: AnyAppProjection) throws -> AppProjectionMeta? {
        if let cached = metas[projection.space.description] { return cached }
        spaces[projection.space.description] = projection.space
        let loaded = try AppProjectionTable.meta(projection.space, in: store, path: tables.path, cache: caches[projection.name])
        metas[projection.space.description] = .some(loaded)
        return loaded
    }

    /// The projections of `registry` kept inline for a request appending after `head`, each
    /// brought up to `head` first (events other processes appended without it) when that
    /// takes at most ``AppProjectionBounds/catchUp`` events. One whose version is not stored,
    /// is being built, or is further behind is left out: its events are applied later, by a
    /// build or a catch-up step (docs/semantics.md). A version a newer one replaces records
    /// this process as one that registers it.
    mutating func inline(_ registry: AppProjectionRegistry, head: UInt64) throws -> [AnyAppProjection] {
        var kept: [AnyAppProjection] = []
        for projection in registry.projections {
            caches[projection.name] = registry.cache
            guard let found = try meta(projection) else { continue }
            // A build with at most the bound left is finished here (below); a longer one is the builder's.
            guard found.status == .ready || found.buildEndsWithin(bound: AppProjectionBounds.catchUp, of: head) else {
                if found.status != .failed { registry.builder.schedule() }  // being built (or its build stopped): continued
                continue
            }
            var meta = found
            if meta.successor != nil, !(meta.registrants ?? []).contains(getpid()) {
                meta.registrants = (meta.registrants ?? []).filter(processIsAlive) + [getpid()]
                metas[projection.space.description] = .some(meta)
                dirty.insert(projection.space.description)
            }
            if meta.appliedThrough < head {
                let reached = try projection.catchUp(&meta, through: head, limit: AppProjectionBounds.catchUp, in: tables, into: store,
                                                     registry: registry, cache: registry.cache)
                metas[projection.space.description] = .some(meta)
                dirty.insert(projection.space.description)
                guard reached else {
                    registry.builder.schedule()  // the rest in the builder's steps (a step staged before this commit is staged again)
                    continue
                }
            }
            if meta.status == .building {
                meta.status = .ready  // the switch, in this append's transaction
                metas[projection.space.description] = .some(meta)
                dirty.insert(projection.space.description)
                registry.builder.schedule()  // the versions it replaces are dropped by a build step
            }
            kept.append(projection)
        }
        return kept
    }

    /// Stages `events` (the request's new events) for each of `projections`: all or nothing.
    func stage(_ events: [Event], for projections: [AnyAppProjection], registry: AppProjectionRegistry) throws(LedgerError) -> [(AnyAppProjection, AppProjectionChanges)] {
        guard !projections.isEmpty, !events.isEmpty else { return [] }  // only replays: nothing to apply
        let upcast = try registry.upcast(events)
        var staged: [(AnyAppProjection, AppProjectionChanges)] = []
        for projection in projections {
            guard let meta = metas[projection.space.description] ?? nil else { continue }
            let reader = AppProjectionReader(store: store, space: .of(meta, registered: projection.space), path: tables.path, cache: registry.cache)
            staged.append((projection, try projection.stage(upcast, reader, .appending,
                                                            AppProjectionFold.Input(pending: meta.pending ?? [], log: AppProjectionLog(tables: tables, registry: registry)))))
        }
        return staged
    }

    /// Writes what ``stage(_:for:registry:)`` returned and records each projection as applied through `head`.
    mutating func write(_ staged: [(AnyAppProjection, AppProjectionChanges)], through head: UInt64) throws {
        for (projection, changes) in staged {
            guard var meta = try meta(projection), meta.appliedThrough != head || !changes.isEmpty else { continue }
            if !changes.isEmpty {
                try AppProjectionTable.write(changes, space: .of(meta, registered: projection.space), into: store, rows: &meta.rows)
                changes.record(in: &meta)
            }
            meta.appliedThrough = head
            metas[projection.space.description] = .some(meta)
            dirty.insert(projection.space.description)
        }
    }

    /// Writes the records that changed.
    func finish() throws {
        for name in dirty.sorted() {
            guard let meta = metas[name] ?? nil else { continue }
            let bytes = try meta.encoded()
            let space = spaces[name].map { AppProjectionSpace.of(meta, registered: $0) } ?? AppProjectionSpace(meta)
            try store.put(.apps, space.record, bytes)
            caches[meta.name]?.remember(at: space.record, bytes, meta)
        }
    }
}
