#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The app projections stored in a ledger (``Ledger/projections``): what is stored, as JSON
/// for tools, and dropping one an app no longer registers. Their typed reads are in a
/// snapshot (``LedgerSnapshot/projection(_:)``), their observation ``LedgerObservation``.
///
/// ```swift
/// for info in try ledger.projections.list() { print(info.name, info.version, info.status, info.rows) }
/// try ledger.projections.drop(named: "old-tasks")
/// ```
public struct LedgerProjections: Sendable, LedgerAccessing {
    /// The internals of the handle it was reached from.
    let access: LedgerAccess

    /// The records of every app projection stored in the ledger (registered here or not).
    public func list() throws(LedgerError) -> [ProjectionInfo] {
        try read("list projections") { tables in try AppProjectionTable.metas(in: tables.projections, path: path).map(ProjectionInfo.init) }
    }

    /// The stored rows of projection `name` as JSON, in its order, and its document — what
    /// `ledger projection` prints; needs no registration (nor the app's types).
    public func dump(named name: String, limit: Int = .max) throws(LedgerError) -> (info: ProjectionInfo, document: [UInt8]?, rows: [(key: String, json: [UInt8])]) {
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

    /// Deletes the stored state of projection `name` (an app that no longer registers it:
    /// its record keeps the log from being trimmed past what it applied), in short transactions.
    ///
    /// The record goes in the first one: from then on no process (an older one still
    /// registering the projection) reads the half-deleted state or applies events to it, both
    /// needing the record. The entries left are deleted after it, unless a writable opening
    /// registering the projection has created it again meanwhile: its build clears them.
    public func drop(named name: String) throws(LedgerError) {
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
            if try AppProjectionTable.clear(name, in: store, limit: ProjectionBuildPacing.chunk) == ProjectionBuildPacing.chunk { return false }
            try store.delete(.apps, AppProjectionKeys.meta(name))
            return true
        }) == false {
            usleep(ProjectionBuildPacing.pauseMicros)
        }
    }
}
