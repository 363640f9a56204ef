import Synchronization

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
    /// Set by the sync client only.
    var sync: SyncStamp?

    init(type: String, key: String?, payload: [UInt8], domain: DomainEvent, sync: SyncStamp? = nil) {
        self.type = type
        self.key = key
        self.payload = payload
        self.digest = key == nil ? 0 : ContentDigest.of(type: type, payload: payload)
        self.domain = domain
        self.sync = sync
    }

    /// The event as it is stored at `sequence`, appended at `now` by `origin` in a ledger that
    /// shares `shared` (its custom types): one that came down the feed keeps its origin's time
    /// and role; one of a shared custom type appended here is ``EventSource/shared``.
    func stored(at sequence: UInt64, now: Int64, origin: Origin, shared: SharedEventTypes) -> Event {
        switch sync {
        case .fromFeed(let time, let role, let feed):
            return Event(sequence: sequence, timestampMicros: time, origin: Origin(role: role, pid: 0), type: type, key: key,
                         payload: payload, source: .feed(feed))
        case .settlement, nil:
            let source: EventSource = if case .custom = domain, shared.contains(type) { .shared } else { .local }
            return Event(sequence: sequence, timestampMicros: now, origin: origin, type: type, key: key, payload: payload, source: source)
        }
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
/// let receipt = try ledger.append(AppendRequest(.badgeAdjusted(.delta(1)), key: "push-" + pushID))
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

/// What an event may contain (``Ledger/Limits``).
enum EventLimits {
    /// Longest type name, in bytes.
    static let maxTypeBytes = 128
    /// Longest idempotency key, in bytes (LMDB keys are at most 511 bytes).
    static let maxKeyBytes = 256
    /// Longest origin role, in bytes of UTF-8.
    static let maxRoleBytes = 64
}

/// The append path of one handle: a batch validated before any transaction starts
/// (``prepare(_:)``), handed to the directory's commit queue (``submit(_:cursor:expectedHead:)``),
/// and written by the queue's leader in one write transaction for the whole group (``commit(_:)``).
struct EventLog: Sendable {
    /// The handle's store: every transaction goes through it.
    let store: LedgerStore
    /// The directory's group commit (shared by every handle of the process).
    let commitQueue: CommitQueue
    /// Poked after every commit (waiters of this process).
    let changeMonitor: ChangeMonitor
    /// The origin stamped on the handle's events.
    let origin: Origin
    /// The durability the handle's appends commit with.
    let durability: LedgerDurability
    let options: LedgerOptions
    /// The app projections this handle keeps in its appends' transactions.
    let projections: AppProjectionRegistry

    var path: String { store.path }

    /// Appends `prepared` (and moves `cursor`, if any) once a commit holding them is final,
    /// blocking this thread.
    func submit(_ prepared: [PreparedEvent], cursor: CursorCommit?, expectedHead: UInt64? = nil) throws(LedgerError) -> AppendReceipt {
        try store.checkWritable()
        let request = CommitRequest(events: prepared, origin: origin, durability: durability, cursor: cursor, expectedHead: expectedHead, projections: projections)
        let result = commitQueue.submit(request, maxEvents: options.maxGroupCommitEvents) { batch in
            commit(batch)
        }
        return try result.get()
    }

    /// Hands the request to the commit queue's leader thread and waits for its outcome without
    /// blocking a thread. Cancelled before a commit takes it: ``LedgerError/cancelled``, nothing written.
    func submitAsync(_ prepared: [PreparedEvent], cursor: CursorCommit?, expectedHead: UInt64? = nil) async throws(LedgerError) -> AppendReceipt {
        try store.checkWritable()
        let request = CommitRequest(events: prepared, origin: origin, durability: durability, cursor: cursor, expectedHead: expectedHead, projections: projections)
        /// The ticket once submitted, or whether cancellation came first.
        let submission = Mutex<(ticket: UInt64?, cancelled: Bool)>((nil, false))
        let queue = commitQueue
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<AppendReceipt, LedgerError>, Never>) in
                let ticket = queue.submitAsync(
                    request, maxEvents: options.maxGroupCommitEvents,
                    commit: { [self] batch in commit(batch) },
                    completion: { continuation.resume(returning: $0) })
                let cancelled = submission.withLock { s -> Bool in
                    s.ticket = ticket
                    return s.cancelled
                }
                if cancelled { queue.cancel(ticket) }
            }
        } onCancel: {
            let ticket = submission.withLock { s -> UInt64? in
                s.cancelled = true
                return s.ticket
            }
            if let ticket { queue.cancel(ticket) }
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
            var eventRoleBytes = roleBytes
            if case .fromFeed(_, let role, _) = event.sync {
                eventRoleBytes = role.utf8.count
                guard (1...EventLimits.maxRoleBytes).contains(eventRoleBytes), !role.utf8.contains(0) else {
                    throw .invalidEvent(index: index, field: "origin role", reason: "must be 1–\(EventLimits.maxRoleBytes) bytes of UTF-8 without NUL, got \(String(reflecting: role))")
                }
            }
            try checkEnvelope(type: event.type, key: event.key, payloadCount: event.payload.count, roleBytes: eventRoleBytes, index: index)
            let domain = try DomainEvent.decode(type: event.type, payload: event.payload, index: index)
            try domain.checkIdentifiers(index: index)
            try Self.checkSyncOnly(domain, event.sync, index: index)
            prepared.append(PreparedEvent(type: event.type, key: event.key, payload: event.payload, domain: domain, sync: event.sync))
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
            try domain.checkIdentifiers(index: index)
            try Self.checkSyncOnly(domain, nil, index: index)
            let payload = event.canonicalPayload
            try checkEnvelope(type: type, key: key, payloadCount: payload.count, roleBytes: roleBytes, index: index)
            prepared.append(PreparedEvent(type: type, key: key, payload: payload, domain: domain))
        }
        return prepared
    }

    /// `inbox.shared-settled` is the sync client's alone (an app's would move its own
    /// projections' shared events); an event from the feed is a custom one.
    static func checkSyncOnly(_ domain: DomainEvent, _ sync: SyncStamp?, index: Int) throws(LedgerError) {
        switch sync {
        case nil:
            guard domain.builtInType != .sharedSettled else {
                throw .invalidEvent(index: index, field: "type", reason: "inbox.shared-settled is appended by the sync client only (docs/sync.md)")
            }
        case .settlement?:
            guard domain.builtInType == .sharedSettled else { throw .invalidEvent(index: index, field: "type", reason: "a settlement must be inbox.shared-settled") }
        case .fromFeed?:
            guard case .custom = domain else { throw .invalidEvent(index: index, field: "type", reason: "only a custom event comes down the feed with its origin") }
        }
    }

    /// The envelope's limits: type name (a custom type outside the built-ins' namespace),
    /// idempotency key, encoded size.
    private func checkEnvelope(type: String, key: String?, payloadCount: Int, roleBytes: Int, index: Int) throws(LedgerError) {
        let typeBytes = type.utf8.count
        guard (1...EventLimits.maxTypeBytes).contains(typeBytes) else {
            throw .invalidEvent(index: index, field: "type", reason: "must be 1–\(EventLimits.maxTypeBytes) bytes, got \(typeBytes)")
        }
        guard type.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
            throw .invalidEvent(index: index, field: "type", reason: "must be printable ASCII without spaces, got \(String(reflecting: type))")
        }
        try BuiltInEventType.checkCustomName(type, index: index)
        var keyBytes = 0
        if let key {
            keyBytes = key.utf8.count
            guard (1...EventLimits.maxKeyBytes).contains(keyBytes) else {
                throw .invalidEvent(index: index, field: "key", reason: "must be 1–\(EventLimits.maxKeyBytes) bytes, got \(keyBytes)")
            }
            if let problem = IdentifierRule.problem(key) {
                throw .invalidEvent(index: index, field: "key", reason: "\(String(reflecting: key)) \(problem)")
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
            outcomes = try store.write("append", durability: durability) { tables in try AppendTransaction(tables, now: options.clock.now().micros).run(batch) }
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
