@testable import InboxLedger
import LMDB

/// A projection table as the store keeps it (format 3: the state in `meta`, every other table's
/// rows in the row tree `counters`, each under the table's prefix; docs/format.md), for the tests
/// that read or damage it behind the ledger's back with raw LMDB calls: `txn.get(table, key:)`
/// and the like take the table's own keys.
struct RawProjectionTable {
    let database: Database
    let table: ProjectionTable

    /// `table` of the environment (which must have `meta` and `counters` open).
    init(_ environment: Environment, _ table: ProjectionTable) throws {
        database = try environment.database(table == .state ? Schema.metaName : Schema.countersName)
        self.table = table
    }

    func storedKey(_ key: [UInt8]) -> [UInt8] { table.storedPrefix + key }
}

extension Transaction {
    func get(_ raw: RawProjectionTable, key: [UInt8]) throws -> [UInt8]? { try get(raw.database, key: raw.storedKey(key)) }
    func put(_ raw: RawProjectionTable, key: [UInt8], value: [UInt8]) throws { try put(raw.database, key: raw.storedKey(key), value: value) }
    @discardableResult
    func delete(_ raw: RawProjectionTable, key: [UInt8]) throws -> Bool { try delete(raw.database, key: raw.storedKey(key)) }
}
