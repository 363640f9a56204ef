import LMDB

/// The first difference between the materialised projections and a rebuild from the log.
public struct ProjectionMismatch: Hashable, Sendable, CustomStringConvertible {
    /// The projection table.
    public var table: String
    /// The row's key, printable.
    public var key: String
    /// What the rebuild has (nil: no such row).
    public var expected: [UInt8]?
    /// What is stored (nil: no such row).
    public var actual: [UInt8]?

    /// Which row differs, and how.
    public var description: String {
        let what = expected == nil ? "is stored but a rebuild has no such row" : actual == nil ? "is missing" : "differs from a rebuild"
        return "projection '\(table)' row '\(key)' \(what)"
    }
}

extension Ledger {
    /// Rebuilds every projection in memory — from the newest snapshot plus the events after it
    /// once the log has been trimmed, else from the whole log — and compares it with the stored
    /// tables, in one read transaction. Returns the first difference, or nil.
    ///
    /// ```swift
    /// if let mismatch = try ledger.verifyProjections() { print(mismatch) }
    /// ```
    public func verifyProjections() throws(LedgerError) -> ProjectionMismatch? {
        try read("verify projections") { txn in try verifyProjections(in: txn) }
    }

    func verifyProjections(in txn: Transaction) throws -> ProjectionMismatch? {
        do {
            // Projections built by other rules than this library's cannot be compared with a
            // rebuild by its rules (a newer library's, or an older one's not upgraded yet).
            if let stored = try storedProjectionVersion(in: txn), stored != ProjectionRules.version { return nil }
            let rebuilt = MemoryStore()
            try replayProjections(into: rebuilt, from: .newestSnapshotIfTrimmed, in: txn)
            let stored = schema.store(txn)
            for table in ProjectionTable.allCases {
                var actual: [(key: [UInt8], value: [UInt8])] = []
                try stored.scan(table, from: []) { key, value in
                    actual.append((key, value))
                    return true
                }
                let expected = rebuilt.sorted(table)
                if let mismatch = firstDifference(table, expected: expected, actual: actual) { return mismatch }
            }
            return nil
        }
    }

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

    private func firstDifference(_ table: ProjectionTable, expected: [(key: [UInt8], value: [UInt8])],
                                 actual: [(key: [UInt8], value: [UInt8])]) -> ProjectionMismatch? {
        func printable(_ key: [UInt8]) -> String {
            if let text = String(utf8: key), text.unicodeScalars.allSatisfy({ $0.value >= 0x20 }) { return text }
            return key.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
        }
        var i = 0, j = 0
        while i < expected.count || j < actual.count {
            if i < expected.count, j < actual.count, expected[i].key == actual[j].key {
                if expected[i].value != actual[j].value {
                    return ProjectionMismatch(table: table.rawValue, key: printable(expected[i].key), expected: expected[i].value, actual: actual[j].value)
                }
                i += 1
                j += 1
            } else if j >= actual.count || (i < expected.count && expected[i].key.lexicographicallyPrecedes(actual[j].key)) {
                return ProjectionMismatch(table: table.rawValue, key: printable(expected[i].key), expected: expected[i].value, actual: nil)
            } else {
                return ProjectionMismatch(table: table.rawValue, key: printable(actual[j].key), expected: nil, actual: actual[j].value)
            }
        }
        return nil
    }
}
