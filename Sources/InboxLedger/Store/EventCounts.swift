import LMDB

/// Events counted by type and by origin role over one transaction, then added to (appends) or
/// taken from (trimming) the counters kept in `meta` under `count:t:<type>` and `count:o:<role>`
/// (format 2: beside `head`, so an append dirties one leaf for both; docs/format.md).
struct EventCounts {
    private var byType: [String: UInt64] = [:]
    private var byRole: [String: UInt64] = [:]

    mutating func count(type: String, role: String) {
        byType[type, default: 0] += 1
        byRole[role, default: 0] += 1
    }

    /// Adds the counts to `meta`, or subtracts them (a count that reaches 0 is removed).
    func apply(to meta: MetaRecord, subtracting: Bool = false) throws {
        let deltas = byType.map { ("t:" + $0.key, $0.value) } + byRole.map { ("o:" + $0.key, $0.value) }
        for (name, delta) in deltas {
            let field = Meta.count(name)
            let current = try meta.get(field) ?? 0
            if !subtracting {
                try meta.put(field, current + delta)
            } else if current > delta {
                try meta.put(field, current - delta)
            } else {
                try meta.delete(field)
            }
        }
    }

    /// The stored counts by type and by origin role: `meta`'s `count:` rows, plus the rows of
    /// the `counters` table a format-1 ledger keeps them in (empty from format 2 on; a
    /// read-only handle on a format-1 ledger reads them there, a writable opening moves them:
    /// ``Ledger/upgradeFormat()``).
    static func read(meta: Database, legacy: Database, in txn: Transaction) throws -> (byType: [String: UInt64], byRole: [String: UInt64]) {
        var byType: [String: UInt64] = [:]
        var byRole: [String: UInt64] = [:]
        func add(_ name: ArraySlice<UInt8>, _ value: [UInt8]) {
            guard let count = MetaEncodings.U64BE.decode(value), count > 0 else { return }
            let text = String(decoding: name.dropFirst(2), as: UTF8.self)
            if name.starts(with: "t:".utf8) { byType[text, default: 0] += count }
            if name.starts(with: "o:".utf8) { byRole[text, default: 0] += count }
        }
        try txn.forEachEntry(meta, from: Meta.countPrefix, prefix: Meta.countPrefix) { e in
            add(e.key[Meta.countPrefix.count...], e.value)
            return .next
        }
        // Only the counters' own keys: from format 3 the table also holds the projection rows,
        // whose keys start with 0x00.
        for prefix in [Array("t:".utf8), Array("o:".utf8)] {
            try txn.forEachEntry(legacy, from: prefix, prefix: prefix) { e in
                add(e.key[...], e.value)
                return .next
            }
        }
        return (byType, byRole)
    }
}
