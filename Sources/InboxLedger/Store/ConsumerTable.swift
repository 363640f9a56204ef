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

/// The `consumers` table: a consumer's name as UTF-8 → its ``ConsumerRecord``.
typealias ConsumerTable = NamedRecordTable<ConsumerRecord>

extension ConsumerRecord: NamedRecord {
    static func malformed(_ name: String) -> String { "consumer '\(name)' has a malformed record" }
}

extension NamedRecordTable where Record == ConsumerRecord {
    /// Writes the record of consumer `name`, keeping the creation time of an existing one.
    func write(_ record: ConsumerRecord, named name: String) throws {
        var record = record
        if let existing = try self.record(name) { record.createdAt = existing.createdAt }
        try put(name, record)
    }

    /// Every registered consumer, by name, with its lag behind `head`.
    func infos(head: UInt64) throws -> [ConsumerInfo] {
        var infos: [ConsumerInfo] = []
        try forEach(from: []) { key, record in
            let name = String(decoding: key, as: UTF8.self)
            guard let record else { throw LedgerError.corruptStore(path: path, reason: ConsumerRecord.malformed(name)) }
            infos.append(ConsumerInfo(
                name: name, cursor: record.cursor, lag: head > record.cursor ? head - record.cursor : 0,
                lastSeen: Timestamp(micros: record.lastSeen), createdAt: Timestamp(micros: record.createdAt)))
            return .next
        }
        return infos
    }
}
