#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// The façade's part of app projections that its opening runs: the builds (the reads and the
// observation are in App/, the engine in AppProjections/, the table in Store/).

extension Ledger {
    /// Builds every registered projection whose stored state is missing or of an older
    /// version, in short transactions (``ProjectionBuildPacing/chunk``), each recording how far it
    /// got: an opening killed mid-build leaves a record the next opening continues from.
    func buildAppProjections() throws(LedgerError) {
        let projections = log.projections.projections
        guard !projections.isEmpty else { return }
        // Looked at in a read transaction first: an opening with nothing to build writes nothing.
        let stored = try read("list projections") { tables in
            try projections.map { try AppProjectionTable.meta($0.name, in: tables.projections, path: path) }
        }
        for (projection, meta) in zip(projections, stored) {
            if let meta, meta.version > projection.version || (meta.version == projection.version && [.ready, .failed].contains(meta.status)) { continue }
            while try !buildStep(projection) { usleep(ProjectionBuildPacing.pauseMicros) }
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
                if try AppProjectionTable.clear(projection.name, in: store, limit: ProjectionBuildPacing.chunk) == ProjectionBuildPacing.chunk { return false }
                let from = try tables.firstSequence() - 1
                meta.status = .building
                meta.appliedThrough = from
                meta.builtFrom = from
                meta.rows = 0
            case .building:
                let head = try tables.head()
                let events = try registry.upcast(tables.events.events(after: meta.appliedThrough, limit: ProjectionBuildPacing.chunk))
                try projection.applyStored(events, to: &meta, in: store, path: path, cache: nil)
                if meta.status == .building, meta.appliedThrough >= head || events.isEmpty {
                    meta.appliedThrough = head
                    meta.status = .ready
                }
            }
            try AppProjectionTable.putMeta(meta, in: store)
            return meta.status == .ready || meta.status == .failed
        }
    }
}
