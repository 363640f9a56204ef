import LMDB

/// Events counted by type and by origin role over one transaction, then added to (appends) or
/// taken from (trimming) the `counters` table, whose keys are `t:<type>` and `o:<role>`.
struct EventCounts {
    private var byType: [String: UInt64] = [:]
    private var byRole: [String: UInt64] = [:]

    mutating func count(type: String, role: String) {
        byType[type, default: 0] += 1
        byRole[role, default: 0] += 1
    }

    /// Adds the counts to the table, or subtracts them (a count that reaches 0 is removed).
    func apply(to table: Database, in txn: Transaction, subtracting: Bool = false) throws {
        let deltas = byType.map { ("t:" + $0.key, $0.value) } + byRole.map { ("o:" + $0.key, $0.value) }
        for (name, delta) in deltas {
            let key = Array(name.utf8)
            let current = try txn.readUInt64(table, key) ?? 0
            if !subtracting {
                try txn.writeUInt64(table, key, current + delta)
            } else if current > delta {
                try txn.writeUInt64(table, key, current - delta)
            } else {
                try txn.delete(table, key: key)
            }
        }
    }
}
