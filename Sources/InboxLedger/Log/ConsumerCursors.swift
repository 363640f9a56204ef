import LMDB

/// A consumer's row in the `consumers` table.
struct ConsumerRecord: Hashable, Sendable {
    /// The last sequence the consumer handled (0: none).
    var cursor: UInt64
    /// Last commit or heartbeat, µs since the epoch: the consumer's lease.
    var lastSeen: Int64
    var createdAt: Int64

    func encode() -> [UInt8] { U64Fields.encode(cursor, UInt64(bitPattern: lastSeen), UInt64(bitPattern: createdAt)) }

    static func decode(_ bytes: [UInt8]) -> ConsumerRecord? {
        guard let f = U64Fields.decode(bytes, count: 3) else { return nil }
        return ConsumerRecord(cursor: f[0], lastSeen: Int64(bitPattern: f[1]), createdAt: Int64(bitPattern: f[2]))
    }
}

/// The consumers' cursors as the append moves them (a consumer commits its cursor with the
/// events it appends, in one transaction: ``AppendTransaction``).
extension Ledger {
    func consumerRecord(_ name: String, in txn: Transaction) throws -> ConsumerRecord? {
        guard let bytes = try txn.get(schema.consumers, key: Array(name.utf8)) else { return nil }
        guard let record = ConsumerRecord.decode(bytes) else {
            throw LedgerError.corruptStore(path: path, reason: "consumer '\(name)' has a malformed record")
        }
        return record
    }

    func writeConsumer(_ record: ConsumerRecord, named name: String, in txn: Transaction) throws {
        var record = record
        if let existing = try consumerRecord(name, in: txn) { record.createdAt = existing.createdAt }
        try txn.put(schema.consumers, key: Array(name.utf8), value: record.encode())
    }

    /// Pass-1 check of a cursor commit: nil when it may proceed.
    func checkCursor(_ commit: CursorCommit, head: UInt64, in txn: Transaction) throws -> LedgerError? {
        guard let record = try consumerRecord(commit.name, in: txn) else { return .unknownConsumer(name: commit.name) }
        if record.cursor != commit.expected {
            return .consumerConflict(name: commit.name, expected: commit.expected, actual: record.cursor)
        }
        if commit.through < commit.expected || commit.through > head {
            return .invalidArgument(name: "cursor move", reason: "cannot move from \(commit.expected) to \(commit.through) (head \(head))")
        }
        return nil
    }
}
