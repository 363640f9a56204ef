import LMDB

/// The record of an idempotency key in the `keys` table (docs/format.md): the sequence of the
/// event that used it, the digest of that event's content, and when it was appended.
struct KeyRecord: Hashable, Sendable {
    /// The sequence of the event the key was first used for.
    var sequence: UInt64
    /// ``ContentDigest`` of that event's type and payload: a retry must match it.
    var digest: UInt64
    /// Commit time of that event, µs since the epoch (the key's retention window starts here).
    var time: Int64

    func encode() -> [UInt8] { U64Fields.encode(sequence, digest, UInt64(bitPattern: time)) }

    /// Nil when `bytes` are not a key record. Records written before the time was kept (16
    /// bytes) read with time 0: their window has passed.
    static func decode(_ bytes: [UInt8]) -> KeyRecord? {
        guard let f = U64Fields.decode(bytes, count: 3) ?? U64Fields.decode(bytes, count: 2).map({ $0 + [0] }) else { return nil }
        return KeyRecord(sequence: f[0], digest: f[1], time: Int64(bitPattern: f[2]))
    }
}

/// The `keys` table: an idempotency key's UTF-8 bytes → its ``KeyRecord``.
typealias KeyTable = NamedRecordTable<KeyRecord>

extension KeyRecord: NamedRecord {
    static func malformed(_ key: String) -> String { "idempotency record for key '\(key)' is malformed" }
}

extension NamedRecordTable where Record == KeyRecord {
    /// Re-stamps the record of `key` with `now` if it still names `sequence` and is stamped
    /// earlier (a compactor trimming its event; a malformed record is left alone).
    func restamp(_ key: String, sequence: UInt64, now: Int64) throws {
        if let bytes = try txn.get(table, key: Array(key.utf8)), var stored = KeyRecord.decode(bytes),
           stored.sequence == sequence, stored.time < now {
            stored.time = now
            try txn.put(table, key: Array(key.utf8), value: stored.encode())
        }
    }
}
