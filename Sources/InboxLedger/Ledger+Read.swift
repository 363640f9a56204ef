extension Ledger {
    /// The event at `sequence`, or `nil` if there is none (never appended, or trimmed).
    /// Throws ``LedgerError/corruptRecord(sequence:reason:)`` if the record fails its checksum.
    public func event(at sequence: UInt64) throws(LedgerError) -> Event? {
        guard let event = try read("read event", { tables in try tables.events.event(at: sequence) }) else { return nil }
        return try upcast(event)
    }

    /// Up to `limit` events with sequence numbers greater than `sequence`, in order, read in
    /// one short transaction.
    public func events(after sequence: UInt64 = 0, limit: Int = 1000) throws(LedgerError) -> [Event] {
        try upcast(try read("read events") { tables in try tables.events.events(after: sequence, limit: limit) })
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
        try read("read head") { tables in try tables.head() }
    }

    /// The lowest sequence still in the log (`headSequence() + 1` when the log is empty).
    public func firstSequence() throws(LedgerError) -> UInt64 {
        try read("read first") { tables in try tables.firstSequence() }
    }

    /// The number of events in the log.
    public func count() throws(LedgerError) -> Int {
        try read("count events") { tables in try tables.events.count() }
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

extension Ledger {
    /// `events` with every registered upcaster applied (no work without upcasters).
    func upcast(_ events: [Event]) throws(LedgerError) -> [Event] {
        guard !options.upcasters.isEmpty else { return events }
        var out = events
        for i in out.indices { out[i] = try upcast(out[i]) }
        return out
    }

    func upcast(_ event: Event) throws(LedgerError) -> Event {
        try EventUpcaster.apply(options.upcasters, to: event)
    }
}

extension EventUpcaster {
    /// `event` upgraded by every upcaster of `upcasters` that applies, in turn.
    static func apply(_ upcasters: [EventUpcaster], to event: Event) throws(LedgerError) -> Event {
        guard !upcasters.isEmpty, BuiltInEventType(rawValue: event.type) == nil else { return event }
        let (name, stored) = EventTypeName.parse(event.type)
        var version = stored
        var result = event
        while let upcaster = upcasters.first(where: { $0.eventType == name && $0.fromVersion == version }) {
            do { result.payload = try upcaster.transform(result.payload) } catch {
                throw .eventDecoding(sequence: event.sequence, type: event.type, field: "data",
                                     reason: "the upcaster from version \(version) failed: \(error)")
            }
            version += 1
            result.type = EventTypeName.stored(name, version: version)
        }
        return result
    }
}
