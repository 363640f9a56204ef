import LMDB

/// The version of the projection rules this library applies (``Projector``): what each event
/// does to the widget list, the badge, the pending actions. Raise it with any change to what
/// the rules write for the same events; a ledger whose projections were built by an older
/// version is rebuilt when it is opened (docs/operations.md, "Upgrades").
enum ProjectionRules {
    /// 2: pushes (`push.received`) and local removals (`message.removed`), kept until a
    /// listing settles them (the `local` table); the server's badge.
    static let version: UInt32 = 2

    /// Whether projections (and so snapshots) built by rules `stored` are exactly what these
    /// rules build from the same events, so that a trimmed log upgrades from its newest snapshot
    /// without a decision: true when every version since `stored` only added built-in event
    /// types. Events of those names stored before the upgrade were custom events to the older
    /// rules, and stay custom (``BuiltInBoundaries``, recorded by the upgrade's transaction).
    /// Version 2 only added `push.received` and `message.removed`.
    static func snapshotsCarryOver(from stored: UInt32) -> Bool { stored >= 1 }
}

/// What a writable opening does when the ledger's projections were built by older rules and the
/// log was trimmed, so that the events before the newest snapshot cannot be replayed.
public enum ProjectionUpgrade: Sendable, Hashable {
    /// Refuse with ``LedgerError/projectionUpgradeNeeded(path:stored:supported:reason:)``,
    /// writing nothing (the default: never mix rules silently).
    case fromWholeLog
    /// Rebuild from the newest snapshot (state built by the old rules up to it) plus the
    /// events after it replayed by the new rules: the documented way out.
    case fromNewestSnapshot
}

extension Ledger {
    /// The projection rules version stored in the ledger (nil: a ledger from before versions
    /// were stored, built by version 1).
    func storedProjectionVersion(in txn: Transaction) throws -> UInt32? {
        try schema.metaRecord(txn).projectionVersion(path: path)
    }

    /// Rebuilds every projection by this library's rules in one write transaction (other
    /// processes see the old projections until it commits, then the new ones), unless another
    /// process did it first.
    func upgradeProjections() throws(LedgerError) {
        try write("upgrade projections") { txn in
            let stored = try storedProjectionVersion(in: txn) ?? 1
            guard stored < ProjectionRules.version else { return }
            // The events an older library stored under a name that is built-in now stay custom.
            try recordBuiltInTypes(in: txn)
            for table in ProjectionTable.allCases {
                guard let db = schema.projections[table] else { continue }
                try txn.removeAll(db)
            }
            let fromSnapshot = options.projectionUpgrade == .fromNewestSnapshot || ProjectionRules.snapshotsCarryOver(from: stored)
            let start: ReplayStart = fromSnapshot ? .newestSnapshotIfTrimmed : .wholeLog(storedVersion: stored)
            try replayProjections(into: schema.store(txn), from: start, in: txn)
            try writeProjectionVersion(ProjectionRules.version, in: txn)
        }
        widgetCache.forget()
    }

    func writeProjectionVersion(_ version: UInt32, in txn: Transaction) throws {
        try schema.metaRecord(txn).put(Meta.projectionVersion, version)
    }
}
