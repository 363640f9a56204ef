import LMDB

extension StoreTransaction {
    /// Brings a ledger written by an older format up to ``Schema/formatVersion`` (nothing if it
    /// is there already), in this one transaction:
    /// - format 1 → 2: the `counters` table's rows move into `meta` under `count:` (one leaf for
    ///   the head and the counters) and the table is emptied;
    /// - format 2 → 3: every projection table's rows move under the table's prefix
    ///   (``ProjectionTable/storedPrefix``) into two trees — the state into `meta` beside `head`,
    ///   the others into the row tree (`counters`, emptied by the step before) — and the tables
    ///   are emptied;
    /// - format 3 → 4: nothing moves (format 4 only adds event flags a library of format 3 does
    ///   not read).
    /// A library of an older format then refuses the ledger
    /// (``LedgerError/newerFormat(path:found:supported:)``).
    func upgradeFormat() throws {
        guard let stored = try meta.get(Meta.format), stored < Schema.formatVersion else { return }
        if stored < 2 {
            try move(from: schema.counters, to: schema.meta) { Meta.countPrefix + $0 }
        }
        if stored < Schema.projectionsInTwoTreesSince {
            // After the counters: from here on `counters` is the row tree.
            for table in ProjectionTable.allCases {
                guard let database = schema.projections[table] else { continue }
                try move(from: database, to: table == .state ? schema.meta : schema.counters) { table.storedPrefix + $0 }
            }
        }
        try meta.put(Meta.format, Schema.formatVersion)
    }

    /// Moves every row of `database` into `target` under `storedKey(key)` and empties `database`.
    private func move(from database: Database, to target: Database, storedKey: ([UInt8]) -> [UInt8]) throws {
        // Written as the cursor walks: its database is not the one written.
        try rawTransaction.forEachEntry(database) { e in
            try rawTransaction.put(target, key: storedKey(e.key), value: e.value)
            return .next
        }
        try rawTransaction.removeAll(database)
    }
}
