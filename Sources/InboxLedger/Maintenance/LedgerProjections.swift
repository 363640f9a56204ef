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
    /// `ledger projection` prints; needs no registration (nor the app's types). Of the versions
    /// stored, `version`, else the newest ready one (else the newest).
    public func dump(named name: String, version: Int? = nil, limit: Int = .max) throws(LedgerError) -> (info: ProjectionInfo, document: [UInt8]?, rows: [(key: String, json: [UInt8])]) {
        try read("read projection") { tables in
            let versions = try AppProjectionTable.versions(of: name, in: tables.projections, path: path)
            let chosen = if let version { versions.first { $0.version == version } } else { versions.last { $0.status == .ready } ?? versions.last }
            guard let meta = chosen else {
                throw LedgerError.projectionUnavailable(name: name, reason: version.map { "version \($0) of it is not stored" } ?? "no projection of that name is stored")
            }
            let space = AppProjectionSpace(meta)
            let reader = AppProjectionReader(store: tables.projections, space: space, path: path)
            var rows: [(key: String, json: [UInt8])] = []
            try reader.forEachRow { key, _, row in
                guard rows.count < limit else { return false }
                rows.append((key, Array(row.json)))
                return true
            }
            return (ProjectionInfo(meta), try tables.projections.get(.apps, space.document), rows)
        }
    }

    /// Runs this handle's projection builds until nothing is due: new versions built beside
    /// the old ones, catch-ups of events appended without them, versions no live process
    /// registers any more dropped (docs/apps.md, "Upgrading a projection"). Each step applies its
    /// events in memory, then holds the writer lock for a few milliseconds to write them and its
    /// progress, so a build cut short (killed,
    /// suspended) continues where it stopped. What a handle with
    /// ``LedgerOptions/projectionBuilds`` `.whenAsked` calls; with `.inBackground` (the default)
    /// it waits for what the background thread would do, doing it on this thread.
    ///
    /// ```swift
    /// try ledger.projections.build()   // then every registered projection is ready
    /// ```
    public func build() throws(LedgerError) {
        try checkWritable()
        try AppProjectionBuild(access: access).run()
    }

    /// ``build()`` without blocking the caller's thread, each step on a thread of the handle's
    /// own (not the one async reads run on); cancellation stops it between two steps with ``LedgerError/cancelled`` (what was
    /// built is kept: the next build continues from it). For a `BGProcessingTask` or a host
    /// app's launch.
    ///
    /// ```swift
    /// Task.detached(priority: .utility) { try await ledger.projections.build() }
    /// ```
    public func build() async throws(LedgerError) {
        try checkWritable()
        let build = AppProjectionBuild(access: access)
        while try await access.buildWorker.run({ () throws(LedgerError) in try build.step() }) == .worked {
            do { try await Task.sleep(for: .microseconds(Int(ProjectionBuildPacing.pauseMicros))) } catch { throw .cancelled }
        }
    }

    /// Deletes the stored state of every version of projection `name` (an app that no longer
    /// registers it: its records keep the log from being trimmed past what they applied), in
    /// short transactions.
    ///
    /// A version's record is marked first: from then on no process (an older one still
    /// registering the projection) reads the half-deleted state or applies events to it. The
    /// entries are deleted after it, then the record. While the drop runs (a lease each of its
    /// transactions renews), no build step of a process that still registers the projection
    /// touches the version, and a background build never creates it again: that process's next
    /// opening (or `build()`) does.
    public func drop(named name: String) throws(LedgerError) {
        while try write("drop projection '\(name)'", { tables in
            let store = tables.projections
            guard var meta = try AppProjectionTable.versions(of: name, in: store, path: path).first else { return true }
            let space = AppProjectionSpace(meta)
            // Marked first: a drop interrupted between its transactions leaves a projection
            // being cleared (never read; once its lease has passed, a build that registers it
            // clears and rebuilds it), not a partial state recorded as ready. Each transaction
            // renews the lease, so no build step touches the version while the drop runs.
            meta.status = .clearing
            meta.rows = 0
            meta.droppingUntil = access.options.clock.now().micros + AppProjectionMeta.dropLeaseMicros
            try AppProjectionTable.putMeta(meta, in: store)
            if try AppProjectionTable.clear(space, in: store, limit: ProjectionBuildPacing.dropChunk) == ProjectionBuildPacing.dropChunk { return false }
            try store.delete(.apps, space.record)
            return false  // the next version, if any
        }) == false {
            usleep(ProjectionBuildPacing.pauseMicros)
        }
    }
}
