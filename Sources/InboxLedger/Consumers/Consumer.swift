/// Events a consumer read, to handle and then commit with ``Consumer/commit(_:appending:)``.
public struct ConsumerBatch: Hashable, Sendable, Codable {
    /// The cursor the events were read after.
    public var after: UInt64
    /// The events, in order (may be empty).
    public var events: [Event]
    /// The sequence to commit: the last event's, or `after` when empty.
    public var through: UInt64 { events.last?.sequence ?? after }

    /// A batch of `events` read after `after` (a part of a batch ``Consumer/next(limit:)``
    /// returned, or the events that follow a trim after a consumer gap): committing it moves
    /// the cursor from `after` to its last event.
    public init(after: UInt64, events: [Event]) {
        self.after = after
        self.events = events
    }
}

/// A named reader of the log with a durable cursor (an action queue with exactly-once completion).
///
/// Its cursor moves **in the same transaction** as the events it appends in response, so an
/// effect recorded in the ledger happens exactly once even if the process dies at any instant:
///
/// ```swift
/// let host = try ledger.consumers.consumer(named: "host-app")
/// let batch = try host.next(limit: 100)
/// var completions: [NewEvent] = []
/// for event in batch.events where event.type == "widget.action" { /* do the work */ completions.append(try completion(event)) }
/// try host.commit(batch, appending: completions)
/// ```
public final class Consumer: Sendable, LedgerAccessing {
    /// The consumer's name (1–128 bytes).
    public let name: String
    /// The internals of the handle it was made by.
    let access: LedgerAccess

    init(name: String, access: LedgerAccess) {
        self.name = name
        self.access = access
    }

    /// The last sequence this consumer committed.
    public func cursor() throws(LedgerError) -> UInt64 {
        try read("read consumer") { tables in try tables.consumers.record(name)?.cursor ?? 0 }
    }

    /// Up to `limit` events after the cursor, in one short read transaction. Throws
    /// ``LedgerError/consumerGap(name:cursor:firstAvailable:)`` if events it has not read were trimmed.
    public func next(limit: Int = 100) throws(LedgerError) -> ConsumerBatch {
        try read("read consumer") { tables in
            guard let record = try tables.consumers.record(name) else { throw LedgerError.unknownConsumer(name: name) }
            let first = try tables.firstSequence()
            if record.cursor + 1 < first { throw LedgerError.consumerGap(name: name, cursor: record.cursor, firstAvailable: first) }
            return ConsumerBatch(after: record.cursor, events: try upcast(try tables.events.events(after: record.cursor, limit: limit)))
        }
    }

    /// Moves the cursor to `batch.through` and appends `events`, atomically. Fails with
    /// ``LedgerError/consumerConflict(name:expected:actual:)`` (writing nothing) if another
    /// instance of this consumer committed since `batch` was read.
    @discardableResult
    public func commit(_ batch: ConsumerBatch, appending events: [NewEvent] = []) throws(LedgerError) -> AppendReceipt {
        let prepared = try log.prepare(events)
        return try log.submit(prepared, cursor: CursorCommit(name: name, expected: batch.after, through: batch.through))
    }

    /// After a ``LedgerError/consumerGap(name:cursor:firstAvailable:)``: moves the cursor to the
    /// head and returns it. Nothing that still matters is lost: the projections carry the state
    /// up to the head, and pending actions stay queued (``LedgerSnapshot/pendingActions(limit:)``) until
    /// completed, however much of the log was trimmed.
    @discardableResult
    public func rebase() throws(LedgerError) -> UInt64 {
        let cursor = try cursor()
        let current = try head()
        _ = try log.submit([], cursor: CursorCommit(name: name, expected: cursor, through: current))
        return current
    }

    /// Renews the lease without moving the cursor.
    public func heartbeat() throws(LedgerError) {
        let cursor = try cursor()
        _ = try log.submit([], cursor: CursorCommit(name: name, expected: cursor, through: cursor))
    }
}

/// Where a new consumer starts (``LedgerConsumers/consumer(named:startingAt:)``).
public enum ConsumerStart: Sendable {
    /// Before the first event still in the log: it will read every retained event.
    case beginning
    /// After the current head: it will read only what comes next.
    case end
    /// At sequence 0, before every event ever appended: on a trimmed log its first read is
    /// a ``LedgerError/consumerGap(name:cursor:firstAvailable:)`` that says what was trimmed
    /// (the sync relay, which must tell its server).
    case origin
}

/// The consumers of a ledger (``Ledger/consumers``): registering, listing and dropping them.
///
/// ```swift
/// let host = try ledger.consumers.consumer(named: "host-app")
/// for info in try ledger.consumers.list() { print(info.name, info.cursor, info.lag) }
/// ```
public struct LedgerConsumers: Sendable, LedgerAccessing {
    /// The internals of the handle it was reached from.
    let access: LedgerAccess

    /// The consumer `name`, registered (durably, with a lease) if it does not exist yet.
    public func consumer(named name: String, startingAt start: ConsumerStart = .beginning) throws(LedgerError) -> Consumer {
        guard (1...128).contains(name.utf8.count) else {
            throw .invalidArgument(name: "consumer name", reason: "must be 1–128 bytes, got \(name.utf8.count)")
        }
        let exists = try read("read consumer") { tables in try tables.consumers.record(name) != nil }
        if !exists {
            try checkWritable()
            try write("register consumer") { tables in
                guard try tables.consumers.record(name) == nil else { return }
                let now = options.clock.now().micros
                // `.beginning` is the first event still in the log: on a trimmed log, a cursor of 0
                // would be behind the trim (a consumer gap) from its very first call.
                let cursor = switch start {
                case .end: try tables.head()
                case .beginning: try tables.firstSequence() - 1
                case .origin: UInt64(0)
                }
                try tables.consumers.write(ConsumerRecord(cursor: cursor, lastSeen: now, createdAt: now), named: name)
            }
        } else {
            // Registered by another process, perhaps in a weaker mode: "durably" holds for it too.
            try makeDurable()
        }
        return Consumer(name: name, access: access)
    }

    /// Every registered consumer with its cursor, lag and lease.
    public func list() throws(LedgerError) -> [ConsumerInfo] {
        try read("read consumers") { tables in try tables.consumers.infos(head: tables.head()) }
    }

    /// Removes a consumer; returns whether it existed.
    @discardableResult
    public func drop(named name: String) throws(LedgerError) -> Bool {
        try checkWritable()
        return try write("drop consumer") { tables in try tables.consumers.delete(name) }
    }
}
