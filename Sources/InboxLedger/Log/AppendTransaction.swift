/// The body of one group commit's write transaction: every request of the batch checked, then
/// written and applied to the projections, each request failing alone (``Ledger/commit(_:)``).
struct AppendTransaction {
    /// What an event's idempotency key resolved to before anything of its request is written.
    enum KeyResolution: Equatable {
        /// No key, or a key never seen: the event is written.
        case new
        /// A retry of an event already committed (same content): nothing is written, the
        /// event gets the stored sequence.
        case stored(UInt64)
        /// A repeat of the request's event at index `first` (same key and content, and that one
        /// new): it gets that event's sequence, assigned before it since `first` comes earlier.
        case earlierInBatch(first: Int)
    }

    private let tables: StoreTransaction
    /// The tables each event writes, made once per transaction (not per event).
    private let events: EventTable
    private let keys: KeyTable
    /// The commit time stamped on every event of the transaction.
    private let now: Int64
    /// The custom types the ledger shares, read at the first custom event (most transactions
    /// have none).
    private let shared: SharedTypesOnce

    init(_ tables: StoreTransaction, now: Int64) {
        self.tables = tables
        self.events = tables.events
        self.keys = tables.keys
        self.now = now
        self.shared = SharedTypesOnce(tables.meta)
    }

    /// Checks and writes every request of `batch`, returning each one's outcome.
    func run(_ batch: [CommitRequest]) throws -> [Result<AppendReceipt, LedgerError>] {
        let startHead = try tables.head()
        var head = startHead
        let projector = try Projector(store: tables.projections)
        var apps = AppProjectionsInTransaction(tables)
        var counts = EventCounts()
        var outcomes: [Result<AppendReceipt, LedgerError>] = []
        outcomes.reserveCapacity(batch.count)
        for request in batch {
            // Pass 1: checks that write nothing, so a failing request leaves no trace.
            if let expected = request.expectedHead, expected != head {
                outcomes.append(.failure(.headMoved(expected: expected, actual: head)))
                continue
            }
            if let cursor = request.cursor, let failure = try checkCursor(cursor, head: head) {
                outcomes.append(.failure(failure))
                continue
            }
            let resolved: [KeyResolution]
            switch try resolveKeys(request.events) {
            case .failure(let conflict):
                outcomes.append(.failure(conflict))
                continue
            case .success(let r):
                resolved = r
            }
            // The app projections see the request's new events before anything is written: one
            // whose apply throws refuses the request alone.
            let inline = try apps.inline(request.projections, head: head)
            let fresh = try newEvents(request, resolved, after: head)
            let staged: [(AnyAppProjection, AppProjectionChanges)]
            switch Result(catching: { () throws(LedgerError) in
                try apps.stage(fresh, for: inline, registry: request.projections)
            }) {
            case .failure(let refusal):
                outcomes.append(.failure(refusal))
                continue
            case .success(let s):
                staged = s
            }
            // Pass 2: write the new events and apply them; duplicates get the original's sequence.
            var receipt = AppendReceipt(sequences: [], notes: [])
            receipt.sequences.reserveCapacity(request.events.count)
            receipt.replayed.reserveCapacity(request.events.count)
            for (event, resolution) in zip(request.events, resolved) {
                switch resolution {
                case .stored(let sequence):
                    receipt.sequences.append(sequence)
                    receipt.replayed.append(true)
                    continue
                case .earlierInBatch(let first):
                    // `first` < this event's index: its sequence is in the receipt already.
                    receipt.sequences.append(receipt.sequences[first])
                    receipt.replayed.append(true)
                    continue
                case .new:
                    break
                }
                head += 1
                let stored = try event.stored(at: head, now: now, origin: request.origin, shared: shared.types(for: event))
                try events.append(stored)
                if let key = event.key {
                    try keys.put(key, KeyRecord(sequence: head, digest: event.digest, time: now))
                }
                receipt.notes += try projector.apply(stored, event.domain)
                counts.count(type: event.type, role: stored.origin.role)
                receipt.sequences.append(head)
                receipt.replayed.append(false)
            }
            try apps.write(staged, through: head)
            if let cursor = request.cursor {
                try tables.consumers.write(ConsumerRecord(cursor: cursor.through, lastSeen: now, createdAt: now), named: cursor.name)
            }
            outcomes.append(.success(receipt))
        }
        try projector.finish()
        try apps.finish()
        // A commit that appended nothing (a consumer's cursor move, a heartbeat, only retries)
        // leaves `meta` alone: one page fewer to write and sync. The head and the counters
        // share `meta`'s leaf: an append dirties one page for both.
        let meta = tables.meta
        if head != startHead { try meta.put(Meta.head, head) }
        try counts.apply(to: meta)
        return outcomes
    }

    /// The events pass 2 will write for `request` (those resolved as new, the first of each
    /// key), as they will be stored, for the app projections to stage (only when one is kept).
    private func newEvents(_ request: CommitRequest, _ resolved: [KeyResolution], after head: UInt64) throws -> [Event] {
        guard !request.projections.projections.isEmpty else { return [] }
        var sequence = head
        var out: [Event] = []
        for (event, resolution) in zip(request.events, resolved) {
            switch resolution {
            case .stored, .earlierInBatch: continue
            case .new: break
            }
            sequence += 1
            out.append(try event.stored(at: sequence, now: now, origin: request.origin, shared: shared.types(for: event)))
        }
        return out
    }

    /// Looks up each event's idempotency key (``KeyResolution``), or returns the conflict.
    private func resolveKeys(_ events: [PreparedEvent]) throws -> Result<[KeyResolution], LedgerError> {
        var resolved: [KeyResolution] = []
        resolved.reserveCapacity(events.count)
        /// Each key of the batch: what its first event resolved to, its content, its index.
        var batchKeys: [String: (resolution: KeyResolution, digest: UInt64, index: Int)] = [:]
        for (index, event) in events.enumerated() {
            guard let key = event.key else { resolved.append(.new); continue }
            if let seen = batchKeys[key] {
                guard seen.digest == event.digest else {
                    return .failure(.invalidEvent(index: index, field: "key", reason: "'\(key)' is used twice in the batch with different content"))
                }
                // A repeat of a stored key is a retry of the stored event; of a new one, of the
                // batch's first event with the key.
                resolved.append(seen.resolution == .new ? .earlierInBatch(first: seen.index) : seen.resolution)
                continue
            }
            if let record = try keys.record(key) {
                guard record.digest == event.digest else {
                    return .failure(.idempotencyConflict(key: key, existingSequence: record.sequence))
                }
                batchKeys[key] = (.stored(record.sequence), record.digest, index)
                resolved.append(.stored(record.sequence))
            } else {
                batchKeys[key] = (.new, event.digest, index)
                resolved.append(.new)
            }
        }
        return .success(resolved)
    }

    /// Pass-1 check of a cursor commit: nil when it may proceed.
    private func checkCursor(_ commit: CursorCommit, head: UInt64) throws -> LedgerError? {
        guard let record = try tables.consumers.record(commit.name) else { return .unknownConsumer(name: commit.name) }
        if record.cursor != commit.expected {
            return .consumerConflict(name: commit.name, expected: commit.expected, actual: record.cursor)
        }
        if commit.through < commit.expected || commit.through > head {
            return .invalidArgument(name: "cursor move", reason: "cannot move from \(commit.expected) to \(commit.through) (head \(head))")
        }
        return nil
    }
}

/// The ledger's shared types (``SharedEventTypes``), read from `meta` once per transaction and
/// only when an event could be one (a custom event appended here).
private final class SharedTypesOnce {
    private let meta: MetaRecord
    private var loaded: SharedEventTypes?

    init(_ meta: MetaRecord) { self.meta = meta }

    func types(for event: PreparedEvent) throws -> SharedEventTypes {
        guard event.sync == nil, case .custom = event.domain else { return .none }
        if let loaded { return loaded }
        let types = try meta.sharedTypes()
        loaded = types
        return types
    }
}
