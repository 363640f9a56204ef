import LMDB

/// The `events` table: an event's sequence as a ``SequenceKey`` (8 bytes, big-endian) → its
/// ``EventRecord``. Appended in key order, trimmed from the front.
struct EventTable {
    let txn: Transaction
    let table: Database
    let path: String

    /// A stored record as the table holds it: `sequence` is nil when the key is not one.
    struct Row {
        var key: [UInt8]
        var record: [UInt8]
        var sequence: UInt64? { SequenceKey.decode(key) }
    }

    /// The event at `sequence`, or nil.
    func event(at sequence: UInt64) throws -> Event? {
        guard let bytes = try txn.get(table, key: SequenceKey.encode(sequence)) else { return nil }
        return try Self.decode(bytes, sequence: sequence)
    }

    /// Writes `event` after the last one (`MDB_APPEND`: its sequence is the new head).
    func append(_ event: Event) throws {
        try txn.put(table, key: SequenceKey.encode(event.sequence), value: EventRecord.encode(event), flags: .append)
    }

    /// Up to `limit` events with sequence numbers greater than `sequence`, in order; each record
    /// is decoded where LMDB keeps it and only the event's own fields are copied.
    func events(after sequence: UInt64, limit: Int) throws -> [Event] {
        guard limit > 0, sequence < UInt64.max else { return [] }
        return try txn.withCursor(table) { cursor in
            var events: [Event] = []
            events.reserveCapacity(min(limit, 4096))
            try cursor.scan(from: SequenceKey.encode(sequence + 1)) { key, value in
                guard key.byteCount == 8 else {
                    throw LedgerError.corruptStore(path: path, reason: "malformed event key of \(key.byteCount) bytes")
                }
                let seq = UInt64(bigEndian: key.unsafeLoadUnaligned(as: UInt64.self))
                switch EventRecord.decode(borrowing: value, sequence: seq) {
                case .success(let event): events.append(event)
                case .failure(let error): throw LedgerError.corruptRecord(sequence: seq, reason: error.description)
                }
                return events.count < limit
            }
            return events
        }
    }

    /// The first sequence in the table, or nil when it is empty.
    func firstSequence() throws -> UInt64? {
        let first = try txn.withCursor(table) { try $0.first() }
        return first.flatMap { SequenceKey.decode($0.key) }
    }

    /// Visits the stored records in order from the first after `sequence` (copies; `body` may stop).
    func forEachRow(after sequence: UInt64 = 0, _ body: (Row) throws -> Visit) throws {
        try txn.forEachEntry(table, from: sequence == 0 ? [] : SequenceKey.encode(sequence + 1)) { e in
            try body(Row(key: e.key, record: e.value))
        }
    }

    /// Visits the events after `sequence` in order, each decoded and checked.
    func forEachEvent(after sequence: UInt64, _ body: (Event) throws -> Void) throws {
        try forEachRow(after: sequence) { row in
            guard let seq = row.sequence else { throw LedgerError.corruptStore(path: path, reason: "malformed event key") }
            try body(try Self.decode(row.record, sequence: seq))
            return .next
        }
    }

    /// What trimming a record leaves to account for: its type, role and key (nil when the
    /// record's header is damaged: it is trimmed all the same, only its counters are lost).
    struct Trimmed {
        var sequence: UInt64
        var header: (type: String, role: String, key: String?)?
    }

    /// Deletes up to `limit` (at least one) records from the front with sequence ≤ `through`,
    /// in one pass of a cursor: each is deleted where the cursor stands (no second search).
    func trimFront(through: UInt64, limit: Int) throws -> [Trimmed] {
        try txn.withCursor(table) { cursor in
            var trimmed: [Trimmed] = []
            var entry = try cursor.first()
            while let e = entry, trimmed.count < max(1, limit) {
                guard let seq = SequenceKey.decode(e.key), seq <= through else { break }
                trimmed.append(Trimmed(sequence: seq, header: EventRecord.peek(e.value)))
                try cursor.deleteCurrent()
                entry = try cursor.first()
            }
            return trimmed
        }
    }

    /// Records in the table.
    func count() throws -> Int { try txn.statistics(table).entries }

    /// Pages the table uses (branch, leaf, overflow).
    func pages() throws -> Int { try txn.statistics(table).totalPages }

    /// `bytes` stored under `sequence`, decoded and checked.
    static func decode(_ bytes: [UInt8], sequence: UInt64) throws(LedgerError) -> Event {
        switch EventRecord.decode(bytes, sequence: sequence) {
        case .success(let event): return event
        case .failure(let error): throw .corruptRecord(sequence: sequence, reason: error.description)
        }
    }
}
