#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import LedgerThreads

/// The build of a handle's app projections: each registered version is built beside the
/// versions other processes still use, caught up when it fell behind, and the versions it
/// replaced are dropped once no live process registers them — in steps, each one short write
/// transaction that records how far it got, so that a killed build loses at most one step.
struct AppProjectionBuild: LedgerAccessing {
    let access: LedgerAccess

    /// The work one projection has (looked at in a read transaction first: nothing due, nothing written).
    private enum Work {
        /// Its version has no record: one is created (ready at once when the log holds no event).
        case create
        /// Its record is `clearing` (a drop was interrupted) or `building`, or it is behind the head.
        case advance
        /// This process registers a version another one replaces (or will): it says so in its record.
        case register
        /// An older version, replaced by this ready one, that no live process registers: dropped.
        case drop(AppProjectionMeta)
    }

    /// What is due for `projection` in `tables`, if anything.
    private func work(for projection: AnyAppProjection, in tables: StoreTransaction, head: UInt64) throws -> Work? {
        let versions = try AppProjectionTable.versions(of: projection.name, in: tables.projections, path: path)
        // A newer version is stored: this (older) one is never created again.
        guard let own = versions.first(where: { $0.version == projection.version }) else {
            return versions.contains { $0.version > projection.version } ? nil : .create
        }
        let replaced = versions.contains { $0.version > projection.version }
        switch own.status {
        case .clearing where own.dropLeaseHolds(at: access.options.clock.now().micros): return nil  // a drop in progress: left to it
        case .clearing, .building: return replaced ? nil : .advance  // a replaced version is never built again
        case .failed: return nil
        case .ready: break
        }
        if own.appliedThrough < head { return .advance }
        let me = getpid()
        if replaced {
            return own.successor == nil || !(own.registrants ?? []).contains(me) ? .register : nil
        }
        let now = access.options.clock.now().micros
        for old in versions where old.version < projection.version {
            if (old.registrants ?? []).contains(where: { $0 != me && processIsAlive($0) }) { continue }
            if let replaced = old.replacedAt, now - replaced < AppProjectionMeta.dropGraceMicros { continue }
            return .drop(old)
        }
        return nil
    }

    /// Whether any registered projection has work due (a read transaction).
    func isDue() throws(LedgerError) -> Bool {
        let projections = log.projections.projections
        guard !projections.isEmpty, writeRefusal == nil else { return false }
        return try read("look at projection builds") { tables in
            let head = try tables.head()
            return try projections.contains { try work(for: $0, in: tables, head: head) != nil }
        }
    }

    /// One step: the first registered projection with work due gets one write transaction.
    ///
    /// A build or catch-up step is worked out in a read transaction first, outside the writer
    /// lock: up to ``ProjectionBuildPacing/stagedEntries`` entries of state staged in memory
    /// over the stored state; the write transaction then only writes them, if the record is
    /// still the one they were staged from (else, or when nothing was staged, it applies the
    /// events itself, for at most ``ProjectionBuildPacing/stepNanoseconds``).
    ///
    /// `creating`: whether a registered version with no record is created (an opening, and an
    /// explicit ``LedgerProjections/build()``); the background builder does not, so a
    /// projection dropped while a process that registers it runs stays dropped until that
    /// process opens the ledger again.
    func step(creating: Bool = true) throws(LedgerError) -> ProjectionBuildStep {
        guard let first = try plan(creating: creating) else { return .idle }
        if let done = try perform(first, fallingBack: false) { return done }
        // Staged from a record another writer changed meanwhile (an append that left the
        // projection behind wakes the builder before its commit): staged once more, from it.
        guard let again = try plan(creating: creating) else { return .idle }
        return try perform(again)
    }

    /// What a step does, looked at (and a build's events staged) in a read transaction.
    struct StepPlan {
        fileprivate let staged: StagedAdvance?
        fileprivate let creating: Bool
        /// Whether it staged changes to write (not the in-transaction fallback).
        var isStaged: Bool { staged != nil }
    }

    /// The work due for `projection` that a step of this kind does.
    private func work(for projection: AnyAppProjection, in tables: StoreTransaction, head: UInt64, creating: Bool) throws -> Work? {
        let work = try work(for: projection, in: tables, head: head)
        if case .create = work, !creating { return nil }
        return work
    }

    /// The next step's plan; nil when nothing is due.
    func plan(creating: Bool = true) throws(LedgerError) -> StepPlan? {
        let registry = log.projections
        guard !registry.projections.isEmpty, writeRefusal == nil else { return nil }
        return try read("look at projection builds") { tables in
            let head = try tables.head()
            for projection in registry.projections {
                guard let work = try work(for: projection, in: tables, head: head, creating: creating) else { continue }
                guard case .advance = work else { return StepPlan(staged: nil, creating: creating) }
                return StepPlan(staged: try stageAdvance(projection, in: tables, head: head, registry: registry), creating: creating)
            }
            return nil
        }
    }

    /// Runs `plan` in one write transaction: writes what it staged, unless the record changed
    /// since — then, or when nothing was staged, the work due now is done in the transaction.
    func perform(_ plan: StepPlan) throws(LedgerError) -> ProjectionBuildStep {
        try perform(plan, fallingBack: true) ?? .idle  // falling back, it always returns a step
    }

    /// ``perform(_:)``; nil (nothing written) when the staged changes are stale and
    /// `fallingBack` is false.
    private func perform(_ plan: StepPlan, fallingBack: Bool) throws(LedgerError) -> ProjectionBuildStep? {
        let registry = log.projections
        return try write("build projections", durability: LedgerDurability.none) { tables -> ProjectionBuildStep? in
            let head = try tables.head()
            if let staged = plan.staged {
                if try staged.commit(in: tables, head: head) { return .worked }
                if !fallingBack { return nil }
            }
            for projection in registry.projections {
                guard let work = try work(for: projection, in: tables, head: head, creating: plan.creating) else { continue }
                try perform(work, for: projection, in: tables, head: head, registry: registry)
                return .worked
            }
            return .idle
        }
    }

    /// A build or catch-up step staged in a read transaction: the state's changes in memory,
    /// and the record before and after them.
    fileprivate struct StagedAdvance {
        let before: AppProjectionMeta
        let after: AppProjectionMeta
        let changes: OverlayStore

        /// Writes the changes and the record, unless the record is no longer `before`; returns
        /// whether it wrote. The switch to ready is made here, against the writer's head.
        func commit(in tables: StoreTransaction, head: UInt64) throws -> Bool {
            let store = tables.projections
            guard try AppProjectionTable.meta(before.name, version: before.version, in: store, path: tables.path) == before else { return false }
            try changes.replay(into: store)
            var meta = after
            if meta.status == .building, meta.appliedThrough >= head { meta.status = .ready }  // the switch: one transaction
            try AppProjectionTable.putMeta(meta, in: store)
            return true
        }
    }

    /// Stages the next events of `projection`'s build or catch-up in memory, over the state
    /// `tables` reads; nil when there is nothing to stage that way (a version being cleared).
    private func stageAdvance(_ projection: AnyAppProjection, in tables: StoreTransaction, head: UInt64,
                              registry: AppProjectionRegistry) throws -> StagedAdvance? {
        guard let before = try AppProjectionTable.meta(projection.name, version: projection.version, in: tables.projections, path: path),
              before.status == .building || before.status == .ready, before.appliedThrough < head else { return nil }
        let overlay = OverlayStore(base: tables.projections)
        var meta = before
        var events = 0
        while meta.appliedThrough < head, overlay.changedEntries < ProjectionBuildPacing.stagedEntries, events < ProjectionBuildPacing.stagedEvents {
            let from = meta.appliedThrough
            _ = try projection.catchUp(&meta, through: head, limit: ProjectionBuildPacing.chunk, in: tables, into: overlay, registry: registry, cache: nil)
            guard meta.appliedThrough > from else { break }
            events += ProjectionBuildPacing.chunk
        }
        return StagedAdvance(before: before, after: meta, changes: overlay)
    }

    /// What a writable opening does itself, in one small write transaction when anything is
    /// due: creates the records of registered versions the ledger does not hold (ready at
    /// once on an empty log, else `building`) and registers this process in a version another
    /// replaces. It applies no event: the rest is the builder's.
    func prepare() throws(LedgerError) {
        let registry = log.projections
        func due(_ tables: StoreTransaction, _ head: UInt64) throws -> [(AnyAppProjection, Work)] {
            try registry.projections.compactMap { projection in
                switch try work(for: projection, in: tables, head: head) {
                case .create: (projection, .create)
                case .register: (projection, .register)
                case .advance, .drop, nil: nil
                }
            }
        }
        guard !registry.projections.isEmpty, writeRefusal == nil,
              try read("look at projection builds", { tables in try !due(tables, tables.head()).isEmpty }) else { return }
        try write("prepare projections", durability: LedgerDurability.none) { tables in
            let head = try tables.head()
            for (projection, work) in try due(tables, head) { try perform(work, for: projection, in: tables, head: head, registry: registry) }
        }
    }

    /// Runs steps until nothing is due (pausing between them), or `shouldStop` says so.
    func run(shouldStop: () -> Bool = { false }) throws(LedgerError) {
        while !shouldStop(), try step() == .worked {
            usleep(ProjectionBuildPacing.pauseMicros)
        }
    }

    private func perform(_ work: Work, for projection: AnyAppProjection, in tables: StoreTransaction, head: UInt64, registry: AppProjectionRegistry) throws {
        let store = tables.projections
        let me = getpid()
        switch work {
        case .create:
            let from = try tables.firstSequence() - 1
            let empty = from >= head
            var meta = AppProjectionMeta(name: projection.name, version: projection.version, status: empty ? .ready : .building,
                                         appliedThrough: empty ? head : from, builtFrom: from, rows: 0,
                                         eventTypes: projection.eventTypes.sorted(), failure: nil)
            // The versions it replaces learn of it: their processes register, and keep them until they exit.
            for var old in try AppProjectionTable.versions(of: projection.name, in: store, path: path) where old.version < projection.version {
                if old.successor == nil { old.replacedAt = access.options.clock.now().micros }
                old.successor = max(old.successor ?? 0, projection.version)
                try AppProjectionTable.putMeta(old, in: store)
            }
            // A state left by a drop of this version interrupted before its record went: cleared first.
            if try AppProjectionTable.holdsState(AppProjectionSpace(meta), in: store) { meta.status = .clearing }
            try AppProjectionTable.putMeta(meta, in: store)
        case .advance:
            guard var meta = try AppProjectionTable.meta(projection.name, version: projection.version, in: store, path: path) else { return }
            let started = monotonicNanoseconds()
            switch meta.status {
            case .clearing:
                if try AppProjectionTable.clear(AppProjectionSpace(meta), in: store, limit: ProjectionBuildPacing.dropChunk) == ProjectionBuildPacing.dropChunk { break }
                let from = try tables.firstSequence() - 1
                meta.status = .building
                meta.droppingUntil = nil
                meta.appliedThrough = from
                meta.builtFrom = from
                meta.rows = 0
                meta.skipped = nil
                meta.lastSkipped = nil
                meta.pending = nil  // cleared with the state: the build folds the log again
            case .building, .ready:
                while meta.appliedThrough < head, monotonicNanoseconds() - started < ProjectionBuildPacing.stepNanoseconds {
                    _ = try projection.catchUp(&meta, through: head, limit: ProjectionBuildPacing.chunk, in: tables, into: store,
                                               registry: registry, cache: nil)
                }
                if meta.status == .building, meta.appliedThrough >= head { meta.status = .ready }  // the switch: one transaction
            case .failed:
                return
            }
            try AppProjectionTable.putMeta(meta, in: store)
        case .register:
            guard var meta = try AppProjectionTable.meta(projection.name, version: projection.version, in: store, path: path) else { return }
            let newer = try AppProjectionTable.versions(of: projection.name, in: store, path: path).map(\.version).filter { $0 > projection.version }
            meta.successor = max(meta.successor ?? 0, newer.max() ?? 0)
            meta.registrants = (meta.registrants ?? []).filter { $0 != me && processIsAlive($0) } + [me]
            try AppProjectionTable.putMeta(meta, in: store)
        case .drop(var old):
            let space = AppProjectionSpace(old)
            if old.status != .clearing {
                // Marked first: no process reads or applies a half-deleted state.
                old.status = .clearing
                old.rows = 0
                try AppProjectionTable.putMeta(old, in: store)
            }
            if try AppProjectionTable.clear(space, in: store, limit: ProjectionBuildPacing.dropChunk) < ProjectionBuildPacing.dropChunk {
                try store.delete(.apps, space.record)
            }
        }
    }
}

