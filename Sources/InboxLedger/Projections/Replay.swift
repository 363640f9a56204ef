import LMDB

/// Replaying the log into projections: what the projection upgrade rebuilds with (its caller,
/// ``Ledger/upgradeProjections()``) and what `verify` compares the stored projections with.
extension Ledger {
    /// Where a replay of the projections starts.
    enum ReplayStart {
        /// The whole log when it is untrimmed, else the newest snapshot and the events after it.
        case newestSnapshotIfTrimmed
        /// The whole log, which must be untrimmed; else `projectionUpgradeNeeded(reason:)` of
        /// the stored version.
        case wholeLog(storedVersion: UInt32)
    }

    /// Applies the log to `store` (empty): from the newest snapshot plus the events after it
    /// once the log has been trimmed, else from the whole log.
    func replayProjections(into store: some ProjectionStore, from start: ReplayStart, in txn: Transaction) throws {
        let first = try firstSequence(in: txn)
        var after: UInt64 = 0
        if first > 1 {
            if case .wholeLog(let stored) = start {
                throw LedgerError.projectionUpgradeNeeded(
                    path: path, stored: stored, supported: ProjectionRules.version,
                    reason: "the log was trimmed (it starts at \(first)) and its snapshots hold state built by the old rules")
            }
            guard let snapshot = try snapshotHeaders(in: txn).last, snapshot.sequence + 1 >= first else {
                throw LedgerError.corruptStore(path: path, reason: "the log starts at \(first) but no snapshot covers what was trimmed")
            }
            try loadSnapshot(snapshot.sequence, into: store, in: txn)
            after = snapshot.sequence
        }
        let projector = try Projector(store: store)
        let boundaries = try builtInBoundaries(in: txn)
        try txn.forEachEntry(schema.events, from: after == 0 ? [] : SequenceKey.encode(after + 1)) { e in
            guard let seq = SequenceKey.decode(e.key) else {
                throw LedgerError.corruptStore(path: path, reason: "malformed event key")
            }
            let event = try decode(e.value, sequence: seq)
            let domain: DomainEvent
            do { domain = try boundaries.domainEvent(type: event.type, payload: event.payload, sequence: seq) } catch {
                // A stored built-in event was validated when appended (events an older
                // library stored under a name that is built-in now are custom events by the
                // ledger's `builtin-since` record): one that no longer validates is damage
                // (or a rule changed), and the rebuild would be wrong.
                throw LedgerError.corruptRecord(sequence: seq, reason: "stored \(event.type) event no longer validates: \(error)")
            }
            _ = try projector.apply(event, domain)
            return .next
        }
        try projector.finish()
    }
}
