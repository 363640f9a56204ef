/// Replaying the log into projections: what a projection upgrade rebuilds with
/// (``upgrade(_:)``, at a writable opening) and what `verify` compares the stored projections with.
struct ProjectionRebuild {
    /// The ledger's directory, for errors.
    let path: String
    /// What an upgrade does when the log was trimmed (``LedgerOptions/projectionUpgrade``).
    let upgrade: ProjectionUpgrade

    /// Where a replay of the projections starts.
    enum Start {
        /// The whole log when it is untrimmed, else the newest snapshot and the events after it.
        case newestSnapshotIfTrimmed
        /// The whole log, which must be untrimmed; else `projectionUpgradeNeeded(reason:)` of
        /// the stored version.
        case wholeLog(storedVersion: UInt32)
    }

    /// Applies the log to `store` (empty): from the newest snapshot plus the events after it
    /// once the log has been trimmed, else from the whole log.
    func replay(into store: some ProjectionStore, from start: Start, in tables: StoreTransaction) throws {
        let first = try tables.firstSequence()
        var after: UInt64 = 0
        if first > 1 {
            if case .wholeLog(let stored) = start {
                throw LedgerError.projectionUpgradeNeeded(
                    path: path, stored: stored, supported: ProjectionRules.version,
                    reason: "the log was trimmed (it starts at \(first)) and its snapshots hold state built by the old rules")
            }
            guard let snapshot = try tables.snapshots.headers().last, snapshot.sequence + 1 >= first else {
                throw LedgerError.corruptStore(path: path, reason: "the log starts at \(first) but no snapshot covers what was trimmed")
            }
            try tables.snapshots.load(snapshot.sequence, into: store)
            after = snapshot.sequence
        }
        let projector = try Projector(store: store)
        let boundaries = try tables.meta.builtInBoundaries()
        try tables.events.forEachEvent(after: after) { event in
            let seq = event.sequence
            let domain: DomainEvent
            do { domain = try boundaries.domainEvent(type: event.type, payload: event.payload, sequence: seq) } catch {
                // A stored built-in event was validated when appended (events an older
                // library stored under a name that is built-in now are custom events by the
                // ledger's `builtin-since` record): one that no longer validates is damage
                // (or a rule changed), and the rebuild would be wrong.
                throw LedgerError.corruptRecord(sequence: seq, reason: "stored \(event.type) event no longer validates: \(error)")
            }
            _ = try projector.apply(event, domain)
        }
        try projector.finish()
    }

    /// Rebuilds every projection by this library's rules in `tables` (one write transaction),
    /// unless they were built by these rules already (another process did it first).
    func upgrade(_ tables: StoreTransaction) throws {
        let stored = try tables.meta.projectionVersion(path: path) ?? 1
        guard stored < ProjectionRules.version else { return }
        // The events an older library stored under a name that is built-in now stay custom.
        try tables.meta.recordBuiltInTypes(from: tables.head() + 1)
        try tables.projections.removeAll()
        let fromSnapshot = upgrade == .fromNewestSnapshot || ProjectionRules.snapshotsCarryOver(from: stored)
        try replay(into: tables.projections, from: fromSnapshot ? .newestSnapshotIfTrimmed : .wholeLog(storedVersion: stored), in: tables)
        try tables.meta.put(Meta.projectionVersion, ProjectionRules.version)
    }
}
