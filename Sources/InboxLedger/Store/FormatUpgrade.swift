import LMDB

extension StoreTransaction {
    /// Brings a ledger written by an older format up to ``Schema/formatVersion`` (nothing if it
    /// is there already). Format 1 → 2: the `counters` table's rows move into `meta` under
    /// `count:` (one leaf for the head and the counters, one page fewer per append) and the
    /// table is emptied. A library of format 1 then refuses the ledger
    /// (``LedgerError/newerFormat(path:found:supported:)``).
    func upgradeFormat() throws {
        guard let stored = try meta.get(Meta.format), stored < Schema.formatVersion else { return }
        var rows: [Entry] = []
        try rawTransaction.forEachEntry(schema.counters) { e in
            rows.append(e)
            return .next
        }
        for row in rows { try rawTransaction.put(schema.meta, key: Meta.countPrefix + row.key, value: row.value) }
        try rawTransaction.removeAll(schema.counters)
        try meta.put(Meta.format, Schema.formatVersion)
    }
}
