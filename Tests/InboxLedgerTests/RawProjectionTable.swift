@testable import InboxLedger
import LMDB

/// A projection table as the store keeps it (format 3: its rows in `meta` under the table's
/// prefix, docs/format.md), for the tests that read or damage it behind the ledger's back with
/// raw LMDB calls: `txn.get(table, key:)` and the like take the table's own keys.
struct RawProjectionTable {
    let meta: Database
    let table: ProjectionTable

    /// `table` of the environment (which must have `meta` open).
    init(_ environment: Environment, _ table: ProjectionTable) throws {
        meta = try environment.database(Schema.metaName)
        self.table = table
    }

    func storedKey(_ key: [UInt8]) -> [UInt8] { table.metaPrefix + key }
}

extension Transaction {
    func get(_ raw: RawProjectionTable, key: [UInt8]) throws -> [UInt8]? { try get(raw.meta, key: raw.storedKey(key)) }
    func put(_ raw: RawProjectionTable, key: [UInt8], value: [UInt8]) throws { try put(raw.meta, key: raw.storedKey(key), value: value) }
    @discardableResult
    func delete(_ raw: RawProjectionTable, key: [UInt8]) throws -> Bool { try delete(raw.meta, key: raw.storedKey(key)) }
}
