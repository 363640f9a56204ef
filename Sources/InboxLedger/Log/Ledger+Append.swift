import LMDB

/// An event validated and ready to be written.
struct PreparedEvent: Sendable {
    var type: String
    var key: String?
    var payload: [UInt8]
    /// The content digest an idempotency key is checked against (0 without a key: nothing
    /// compares it).
    var digest: UInt64
    /// The decoded payload (built-in types), or `.custom`.
    var domain: DomainEvent

    init(type: String, key: String?, payload: [UInt8], domain: DomainEvent) {
        self.type = type
        self.key = key
        self.payload = payload
        self.digest = key == nil ? 0 : ContentDigest.of(type: type, payload: payload)
        self.domain = domain
    }
}

/// A consumer cursor to move atomically with an append.
struct CursorCommit: Sendable {
    var name: String
    /// The cursor the consumer read from; the commit fails if it moved meanwhile.
    var expected: UInt64
    /// The new cursor (the last sequence the consumer handled).
    var through: UInt64
}

/// What an append did: the sequence of each event (the original one for an idempotent
/// retry), which events were replays, and what the projections noticed.
///
/// ```swift
/// let receipt = try ledger.appendWithReceipt(.badgeAdjusted(.delta(1)), key: "push-" + pushID)
/// if receipt.isReplay { print("push \(pushID) was counted before, as event \(receipt.sequences[0])") }
/// ```
public struct AppendReceipt: Hashable, Sendable, Codable {
    /// One per appended event, in order.
    public var sequences: [UInt64]
    /// Remarks of the projections (an unknown action completed, …). Harmless by design.
    public var notes: [ProjectionNote]
    /// One per event, in order: `true` when its idempotency key had been used before with the
    /// same content — by an earlier commit of any process, or earlier in the same batch — so
    /// nothing was written for it and its sequence is the original's.
    public var replayed: [Bool] = []

    /// Whether every event of the append was a replay (nothing was written): for a one-event
    /// keyed append, whether it was a retry of one already committed.
    public var isReplay: Bool { !replayed.isEmpty && !replayed.contains(false) }

    init(sequences: [UInt64], notes: [ProjectionNote]) {
        self.sequences = sequences
        self.notes = notes
    }

    private enum CodingKeys: String, CodingKey { case sequences, notes, replayed }

    /// Decodes a receipt, also one encoded before `replayed` existed (read as empty).
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        sequences = try c.decode([UInt64].self, forKey: .sequences)
        notes = try c.decode([ProjectionNote].self, forKey: .notes)
        replayed = try c.decodeIfPresent([Bool].self, forKey: .replayed) ?? []
    }
}

extension Ledger {
    /// Limits on what an event may contain.
    public enum Limits {
        /// Longest type name, in bytes.
        public static let maxTypeBytes = 128
        /// Longest idempotency key, in bytes (LMDB keys are at most 511 bytes).
        public static let maxKeyBytes = 256
    }

    /// Appends one event and returns its sequence number (or, for an idempotency key seen
    /// before with the same content, the original event's sequence number).
    ///
    /// ```swift
    /// let seq = try ledger.append(NewEvent(type: "message.read", payload: Array(#"{"ids":["m1"],"read":true}"#.utf8)))
    /// ```
    @discardableResult
    public func append(_ event: NewEvent) throws(LedgerError) -> UInt64 {
        try Ledger.first(of: appendWithReceipt(contentsOf: [event]), path: path)
    }

    /// Appends a domain event (see ``DomainEvent``).
    ///
    /// ```swift
    /// try ledger.append(.badgeAdjusted(.delta(1)), key: "push-4711")
    /// ```
    @discardableResult
    public func append(_ event: DomainEvent, key: String? = nil) throws(LedgerError) -> UInt64 {
        try Ledger.first(of: submit(prepare(domain: [(event, key)]), cursor: nil), path: path)
    }

    /// Appends `events` atomically: all of them are committed, in order, or none is.
    /// Returns their sequence numbers in order. Blocks until the commit is on disk as
    /// ``Ledger/durability`` promises; concurrent callers in this process share commits.
    @discardableResult
    public func append(contentsOf events: [NewEvent]) throws(LedgerError) -> [UInt64] {
        try appendWithReceipt(contentsOf: events).sequences
    }

    /// Appends domain events atomically (all or none, in order), each validated on its typed
    /// fields and encoded once; returns their sequence numbers.
    ///
    /// ```swift
    /// try ledger.append(contentsOf: [.badgeAdjusted(.set(0)), .messageRead(ReadChange(ids: ["m1"], read: true))])
    /// ```
    @discardableResult
    public func append(contentsOf events: some Collection<DomainEvent>) throws(LedgerError) -> [UInt64] {
        if events.isEmpty { return [] }
        return try submit(prepare(domain: events.map { ($0, nil) }), cursor: nil).sequences
    }

    /// ``append(_:key:)-(DomainEvent,_)``, returning the receipt: whether a keyed append was a
    /// replay of one already committed (``AppendReceipt/isReplay``; nothing was written) and
    /// what the projections noticed.
    ///
    /// ```swift
    /// let receipt = try ledger.appendWithReceipt(.badgeAdjusted(.delta(1)), key: "push-4711")
    /// let counted = !receipt.isReplay   // false when the push was delivered before
    /// ```
    public func appendWithReceipt(_ event: DomainEvent, key: String? = nil) throws(LedgerError) -> AppendReceipt {
        try submit(prepare(domain: [(event, key)]), cursor: nil)
    }

    /// As ``append(contentsOf:)``, also returning which events were replays
    /// (``AppendReceipt/replayed``) and what the projections noticed.
    public func appendWithReceipt(contentsOf events: [NewEvent]) throws(LedgerError) -> AppendReceipt {
        if events.isEmpty { return AppendReceipt(sequences: [], notes: []) }
        return try submit(prepare(events), cursor: nil)
    }

    /// Appends `events` only if the log's head is still `expectingHead` when they commit — the
    /// optimistic-concurrency check of event stores (read, decide, write): if any process
    /// appended in between, nothing is written and ``LedgerError/headMoved(expected:actual:)``
    /// says where the head is now. Returns their sequence numbers.
    ///
    /// ```swift
    /// let head = try ledger.headSequence()
    /// let list = try ledger.widgetList(limit: 5)                 // decide on what was read…
    /// try ledger.append(contentsOf: [decision], expectingHead: head) // …and write only if still true
    /// ```
    @discardableResult
    public func append(contentsOf events: [NewEvent], expectingHead: UInt64) throws(LedgerError) -> [UInt64] {
        try submit(prepare(events), cursor: nil, expectedHead: expectingHead).sequences
    }

    /// ``append(contentsOf:expectingHead:)`` for one domain event.
    @discardableResult
    public func append(_ event: DomainEvent, key: String? = nil, expectingHead: UInt64) throws(LedgerError) -> UInt64 {
        try Ledger.first(of: submit(prepare(domain: [(event, key)]), cursor: nil, expectedHead: expectingHead), path: path)
    }

    func submit(_ prepared: [PreparedEvent], cursor: CursorCommit?, expectedHead: UInt64? = nil) throws(LedgerError) -> AppendReceipt {
        try checkWritable()
        let request = CommitRequest(events: prepared, origin: origin, durability: durability, cursor: cursor, expectedHead: expectedHead)
        let result = commitQueue.submit(request, maxEvents: options.maxGroupCommitEvents) { batch in
            commit(batch)
        }
        return try result.get()
    }

    /// Validates a batch before any transaction starts: envelope limits, and the payload of
    /// every built-in event type.
    func prepare(_ events: [NewEvent]) throws(LedgerError) -> [PreparedEvent] {
        let roleBytes = origin.role.utf8.count
        var prepared: [PreparedEvent] = []
        prepared.reserveCapacity(events.count)
        for (index, event) in events.enumerated() {
            try checkEnvelope(type: event.type, key: event.key, payloadCount: event.payload.count, roleBytes: roleBytes, index: index)
            let domain = try DomainEvent.decode(type: event.type, payload: event.payload, index: index)
            prepared.append(PreparedEvent(type: event.type, key: event.key, payload: event.payload, domain: domain))
        }
        return prepared
    }

    /// The typed path: each event is checked by its payload's rules on its own fields (never
    /// parsed from bytes) and written once, by its payload's encoder, into the canonical bytes
    /// that are stored — the same bytes, and so the same idempotency digest, as the JSON path.
    func prepare(domain events: [(event: DomainEvent, key: String?)]) throws(LedgerError) -> [PreparedEvent] {
        let roleBytes = origin.role.utf8.count
        var prepared: [PreparedEvent] = []
        prepared.reserveCapacity(events.count)
        for (index, (event, key)) in events.enumerated() {
            let type = event.type
            var domain = event
            if case .custom(_, let bytes) = event {
                // A custom event named like a built-in one is validated as that type.
                domain = try DomainEvent.decode(type: type, payload: bytes, index: index)
            } else {
                try event.validate(index: index)
            }
            let payload = event.canonicalPayload
            try checkEnvelope(type: type, key: key, payloadCount: payload.count, roleBytes: roleBytes, index: index)
            prepared.append(PreparedEvent(type: type, key: key, payload: payload, domain: domain))
        }
        return prepared
    }

    /// The sequence of a one-event append.
    static func first(of receipt: AppendReceipt, path: String) throws(LedgerError) -> UInt64 {
        guard let first = receipt.sequences.first else {
            throw .unexpected(path: path, operation: "append", reason: "the commit assigned no sequence")
        }
        return first
    }

    /// The envelope's limits: type name (a custom type outside the built-ins' namespace),
    /// idempotency key, encoded size.
    private func checkEnvelope(type: String, key: String?, payloadCount: Int, roleBytes: Int, index: Int) throws(LedgerError) {
        let typeBytes = type.utf8.count
        guard (1...Limits.maxTypeBytes).contains(typeBytes) else {
            throw .invalidEvent(index: index, field: "type", reason: "must be 1–\(Limits.maxTypeBytes) bytes, got \(typeBytes)")
        }
        guard type.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
            throw .invalidEvent(index: index, field: "type", reason: "must be printable ASCII without spaces, got \(String(reflecting: type))")
        }
        try BuiltInEventType.checkCustomName(type, index: index)
        var keyBytes = 0
        if let key {
            keyBytes = key.utf8.count
            guard (1...Limits.maxKeyBytes).contains(keyBytes) else {
                throw .invalidEvent(index: index, field: "key", reason: "must be 1–\(Limits.maxKeyBytes) bytes, got \(keyBytes)")
            }
        }
        let size = EventRecord.headerSize + typeBytes + roleBytes + keyBytes + payloadCount + EventRecord.trailerSize
        guard size <= options.maxEventBytes, payloadCount <= Int(UInt32.max) else {
            throw .eventTooLarge(index: index, size: size, limit: options.maxEventBytes)
        }
    }

    /// The leader's side of group commit: one write transaction for every request of `batch`,
    /// returning each request's outcome. A request that fails its checks (idempotency conflict,
    /// consumer conflict) fails alone.
    func commit(_ batch: [CommitRequest]) -> [Result<AppendReceipt, LedgerError>] {
        // The strongest durability any request of the group asked for.
        let durability = batch.map(\.durability).reduce(LedgerDurability.none) { $0.atLeast($1) }
        let outcomes: [Result<AppendReceipt, LedgerError>]
        do {
            // The leader's own write timeout applies to the whole group.
            outcomes = try store.write("append", durability: durability) { txn in try AppendTransaction(self, txn).run(batch) }
        } catch {
            outcomes = Array(repeating: .failure(error), count: batch.count)
        }
        changeMonitor.poke()
        // Slots left by killed readers would pin pages and fill the table: clear them now and then.
        // Best effort: the commit is done; a failed check is retried at the next interval.
        if commitQueue.readerCheckDue() { _ = try? store.clearStaleReaders() }
        return outcomes
    }
}
