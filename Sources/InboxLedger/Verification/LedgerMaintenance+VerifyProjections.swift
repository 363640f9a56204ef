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

extension LedgerMaintenance {
    /// Rebuilds every projection in memory — from the newest snapshot plus the events after it
    /// once the log has been trimmed, else from the whole log — and compares it with the stored
    /// tables, in one read transaction. Returns the first difference, or nil.
    ///
    /// ```swift
    /// if let mismatch = try ledger.maintenance.verifyProjections() { print(mismatch) }
    /// ```
    public func verifyProjections() throws(LedgerError) -> ProjectionMismatch? {
        try read("verify projections") { tables in try verifyProjections(in: tables) }
    }

    func verifyProjections(in tables: StoreTransaction) throws -> ProjectionMismatch? {
        do {
            // Projections built by other rules than this library's cannot be compared with a
            // rebuild by its rules (a newer library's, or an older one's not upgraded yet).
            if let stored = try tables.meta.projectionVersion(path: path), stored != ProjectionRules.version { return nil }
            let rebuilt = MemoryStore()
            try projectionRebuild.replay(into: rebuilt, from: .newestSnapshotIfTrimmed, in: tables)
            let stored = tables.projections
            for table in ProjectionTable.allCases where table != .apps {  // app projections: verifyAppProjections()
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
