import LMDB

/// A record stored whole under a UTF-8 name, with its one encoder and decoder.
protocol NamedRecord {
    func encode() -> [UInt8]
    /// The record, or nil if `bytes` are not one (damage).
    static func decode(_ bytes: [UInt8]) -> Self?
    /// What a malformed record under `name` is reported as.
    static func malformed(_ name: String) -> String
}

/// A table of records stored whole under a UTF-8 name: the idempotency keys (``KeyTable``),
/// the consumers (``ConsumerTable``).
struct NamedRecordTable<Record: NamedRecord> {
    let txn: Transaction
    let table: Database
    let path: String

    /// The record under `name`, or nil; a malformed one is damage.
    func record(_ name: String) throws -> Record? {
        guard let bytes = try txn.get(table, key: Array(name.utf8)) else { return nil }
        guard let record = Record.decode(bytes) else { throw LedgerError.corruptStore(path: path, reason: Record.malformed(name)) }
        return record
    }

    func put(_ name: String, _ record: Record) throws {
        try txn.put(table, key: Array(name.utf8), value: record.encode())
    }

    /// Removes the record under `name`; whether there was one.
    func delete(_ name: String) throws -> Bool { try txn.delete(table, key: Array(name.utf8)) }

    /// Visits the records in key order from the first key at least `start` (raw key bytes; the
    /// record nil when malformed).
    func forEach(from start: [UInt8], _ body: (_ key: [UInt8], _ record: Record?) throws -> Visit) throws {
        try txn.forEachEntry(table, from: start) { e in try body(e.key, Record.decode(e.value)) }
    }

    /// Removes the record stored under `key` (raw bytes, as ``forEach(from:_:)`` gives them).
    func delete(raw key: [UInt8]) throws { _ = try txn.delete(table, key: key) }

    /// Records stored.
    func count() throws -> Int { try txn.statistics(table).entries }
}
