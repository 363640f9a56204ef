import LMDB

extension Ledger {
    /// Brings a ledger written by an older format up to ``Schema/formatVersion`` in one write
    /// transaction, unless another process did it first. Called by a writable opening before
    /// the handle is returned; a crash or a power cut before the commit leaves the old format
    /// whole, and the next writable opening starts again.
    ///
    /// Format 1 → 2: the `counters` table's rows move into `meta` under `count:` (one leaf for
    /// the head and the counters, one page fewer per append) and the table is emptied. A library
    /// of format 1 then refuses the ledger (``LedgerError/newerFormat(path:found:supported:)``).
    func upgradeFormat() throws(LedgerError) {
        try write("upgrade format", durability: .durable) { txn in try Ledger.upgradeFormat(schema, in: txn) }
    }

    /// Runs the upgrade on the ledger in `path` without a `Ledger` handle (whose opening would
    /// upgrade at once), calling `beforeCommit` inside the transaction just before it commits:
    /// the crash tests kill the process there.
    @_spi(Testing) public static func upgradeFormat(path: String, beforeCommit: () -> Void) throws {
        try LedgerStore.withUnopenedStore(path: path) { schema, txn in
            try upgradeFormat(schema, in: txn)
            beforeCommit()
        }
    }

    static func upgradeFormat(_ schema: Schema, in txn: Transaction) throws {
        let meta = schema.metaRecord(txn)
        guard let stored = try meta.get(Meta.format), stored < Schema.formatVersion else { return }
        var rows: [Entry] = []
        try txn.forEachEntry(schema.counters) { e in
            rows.append(e)
            return .next
        }
        for row in rows { try txn.put(schema.meta, key: Meta.countPrefix + row.key, value: row.value) }
        try txn.removeAll(schema.counters)
        try meta.put(Meta.format, Schema.formatVersion)
    }
}
