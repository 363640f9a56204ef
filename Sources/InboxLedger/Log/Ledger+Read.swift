import LMDB

extension Ledger {
    /// The event at `sequence`, or `nil` if there is none (never appended, or trimmed).
    /// Throws ``LedgerError/corruptRecord(sequence:reason:)`` if the record fails its checksum.
    public func event(at sequence: UInt64) throws(LedgerError) -> Event? {
        try read("read event") { txn in
            guard let bytes = try txn.get(schema.events, key: SequenceKey.encode(sequence)) else { return nil }
            return try upcast(try decode(bytes, sequence: sequence))
        }
    }

    /// Up to `limit` events with sequence numbers greater than `sequence`, in order, read in
    /// one short transaction.
    public func events(after sequence: UInt64 = 0, limit: Int = 1000) throws(LedgerError) -> [Event] {
        try upcast(try read("read events") { txn in try events(after: sequence, limit: limit, in: txn) })
    }

    func events(after sequence: UInt64, limit: Int, in txn: Transaction) throws -> [Event] {
        guard limit > 0, sequence < UInt64.max else { return [] }
        return try txn.withCursor(schema.events) { cursor in
            var events: [Event] = []
            events.reserveCapacity(min(limit, 4096))
            // Each record is decoded where LMDB keeps it; only the event's own fields are copied.
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

    /// Iterates every event after `sequence`, fetching `pageSize` at a time, each page in its
    /// own short read transaction (no transaction stays open between calls).
    ///
    /// ```swift
    /// var iterator = ledger.iterator(after: cursor)
    /// while let event = try iterator.next() { handle(event) }
    /// ```
    public func iterator(after sequence: UInt64 = 0, pageSize: Int = 512) -> EventIterator {
        EventIterator(ledger: self, after: sequence, pageSize: max(1, pageSize))
    }

    /// The sequence number of the last event ever appended (0 for an empty ledger).
    public func headSequence() throws(LedgerError) -> UInt64 {
        try read("read head") { txn in try headSequence(in: txn) }
    }

    /// The lowest sequence still in the log (`headSequence() + 1` when the log is empty).
    public func firstSequence() throws(LedgerError) -> UInt64 {
        try read("read first") { txn in try firstSequence(in: txn) }
    }

    /// The number of events in the log.
    public func count() throws(LedgerError) -> Int {
        try read("count events") { txn in try txn.statistics(schema.events).entries }
    }

    /// The last sequence ever assigned, as `txn` sees it.
    func headSequence(in txn: Transaction) throws -> UInt64 {
        try schema.metaRecord(txn).get(Meta.head) ?? 0
    }

    /// The lowest sequence in the log as `txn` sees it (`head + 1` when the log is empty).
    func firstSequence(in txn: Transaction) throws -> UInt64 {
        let first = try txn.withCursor(schema.events) { try $0.first() }
        if let first, let seq = SequenceKey.decode(first.key) { return seq }
        return (try headSequence(in: txn)) + 1
    }

    func decode(_ bytes: [UInt8], sequence: UInt64) throws(LedgerError) -> Event {
        switch EventRecord.decode(bytes, sequence: sequence) {
        case .success(let event): return event
        case .failure(let error): throw .corruptRecord(sequence: sequence, reason: error.description)
        }
    }
}

/// Pages through a ledger's events; see ``Ledger/iterator(after:pageSize:)``.
public struct EventIterator {
    let ledger: Ledger
    let pageSize: Int
    /// The sequence of the last event returned (or the starting point).
    public private(set) var position: UInt64
    private var buffer: [Event] = []
    private var index = 0

    init(ledger: Ledger, after: UInt64, pageSize: Int) {
        self.ledger = ledger
        self.position = after
        self.pageSize = pageSize
    }

    /// The next event, or `nil` when the log has no more (call again later to see new ones).
    public mutating func next() throws(LedgerError) -> Event? {
        if index == buffer.count {
            buffer = try ledger.events(after: position, limit: pageSize)
            index = 0
            if buffer.isEmpty { return nil }
        }
        let event = buffer[index]
        index += 1
        position = event.sequence
        return event
    }
}
