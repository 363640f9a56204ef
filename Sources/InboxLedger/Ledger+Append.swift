import LMDB

/// An event validated and ready to be written.
struct PreparedEvent: Sendable {
    var type: String
    var key: String?
    var payload: [UInt8]
    var digest: UInt64
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
        let sequences = try append(contentsOf: [event])
        guard let first = sequences.first else { throw .storage(path: path, operation: "append", code: -1, message: "no sequence assigned") }
        return first
    }

    /// Appends `events` atomically: all of them are committed, in order, or none is.
    /// Returns their sequence numbers in order. Blocks until the commit is on disk as
    /// ``LedgerOptions/durability`` promises; concurrent callers in this process share commits.
    @discardableResult
    public func append(contentsOf events: [NewEvent]) throws(LedgerError) -> [UInt64] {
        if options.readOnly { throw .readOnly(path: path) }
        if events.isEmpty { return [] }
        let prepared = try prepare(events)
        let request = CommitRequest(events: prepared, origin: origin, durability: options.durability)
        let result = commitQueue.submit(request, maxEvents: options.maxGroupCommitEvents) { batch in
            commit(batch)
        }
        return try result.get()
    }

    /// Validates a batch before any transaction starts.
    func prepare(_ events: [NewEvent]) throws(LedgerError) -> [PreparedEvent] {
        let roleBytes = origin.role.utf8.count
        var prepared: [PreparedEvent] = []
        prepared.reserveCapacity(events.count)
        for (index, event) in events.enumerated() {
            let typeBytes = event.type.utf8.count
            guard (1...Limits.maxTypeBytes).contains(typeBytes) else {
                throw .invalidEvent(index: index, field: "type", reason: "must be 1–\(Limits.maxTypeBytes) bytes, got \(typeBytes)")
            }
            guard event.type.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
                throw .invalidEvent(index: index, field: "type", reason: "must be printable ASCII without spaces, got \(String(reflecting: event.type))")
            }
            var keyBytes = 0
            if let key = event.key {
                keyBytes = key.utf8.count
                guard (1...Limits.maxKeyBytes).contains(keyBytes) else {
                    throw .invalidEvent(index: index, field: "key", reason: "must be 1–\(Limits.maxKeyBytes) bytes, got \(keyBytes)")
                }
            }
            let size = EventRecord.headerSize + typeBytes + roleBytes + keyBytes + event.payload.count + EventRecord.trailerSize
            guard size <= options.maxEventBytes, event.payload.count <= Int(UInt32.max) else {
                throw .eventTooLarge(index: index, size: size, limit: options.maxEventBytes)
            }
            prepared.append(PreparedEvent(
                type: event.type, key: event.key, payload: event.payload,
                digest: ContentDigest.of(type: event.type, payload: event.payload)))
        }
        return prepared
    }

    /// The leader's side of group commit: one write transaction for every request of `batch`.
    /// A request that conflicts on an idempotency key fails alone; the others commit.
    func commit(_ batch: [CommitRequest]) {
        let durability = batch.map(\.durability.lmdb).reduce(Durability.none) { $0.strongest($1) }
        do {
            if environment.durability != durability { try environment.setDurability(durability) }
            let outcomes = try environment.write { txn in try write(batch, in: txn) }
            for (request, outcome) in zip(batch, outcomes) { request.result = outcome }
        } catch {
            let mapped = LedgerError.from(error, path: path, operation: "append")
            for request in batch { request.result = .failure(mapped) }
        }
    }

    private func write(_ batch: [CommitRequest], in txn: Transaction) throws -> [Result<[UInt64], LedgerError>] {
        var head = try txn.readUInt64(schema.meta, Schema.MetaKey.head) ?? 0
        let now = currentMicros()
        var counters: [String: UInt64] = [:]
        var outcomes: [Result<[UInt64], LedgerError>] = []
        outcomes.reserveCapacity(batch.count)
        for request in batch {
            // Pass 1: resolve idempotency keys without writing, so a conflict leaves no trace.
            var resolved: [UInt64?] = []
            var batchKeys: [String: (sequence: UInt64?, digest: UInt64, index: Int)] = [:]
            var conflict: LedgerError?
            for (index, event) in request.events.enumerated() {
                guard let key = event.key else { resolved.append(nil); continue }
                if let seen = batchKeys[key] {
                    guard seen.digest == event.digest else {
                        conflict = .invalidEvent(index: index, field: "key", reason: "'\(key)' is used twice in the batch with different content")
                        break
                    }
                    resolved.append(seen.sequence ?? 0)  // 0: same as an earlier event of this batch
                    continue
                }
                if let stored = try txn.get(schema.keys, key: Array(key.utf8)) {
                    var r = ByteReader(stored)
                    guard let sequence = r.u64be(), let digest = r.u64be() else {
                        throw LedgerError.corruptStore(path: path, reason: "idempotency record for key '\(key)' is malformed")
                    }
                    guard digest == event.digest else {
                        conflict = .idempotencyConflict(key: key, existingSequence: sequence)
                        break
                    }
                    batchKeys[key] = (sequence, digest, index)
                    resolved.append(sequence)
                } else {
                    batchKeys[key] = (nil, event.digest, index)
                    resolved.append(nil)
                }
            }
            if let conflict {
                outcomes.append(.failure(conflict))
                continue
            }
            // Pass 2: write the new events; duplicates get the original's sequence.
            var sequences: [UInt64] = []
            sequences.reserveCapacity(request.events.count)
            var firstInBatch: [String: UInt64] = [:]
            for (event, existing) in zip(request.events, resolved) {
                if let existing, existing != 0 {
                    sequences.append(existing)
                    continue
                }
                if existing == 0, let key = event.key, let first = firstInBatch[key] {
                    sequences.append(first)
                    continue
                }
                head += 1
                let record = EventRecord.encode(Event(
                    sequence: head, timestampMicros: now, origin: request.origin,
                    type: event.type, key: event.key, payload: event.payload))
                try txn.put(schema.events, key: SequenceKey.encode(head), value: record, flags: .append)
                if let key = event.key {
                    var w = ByteWriter(capacity: 16)
                    w.u64be(head)
                    w.u64be(event.digest)
                    try txn.put(schema.keys, key: Array(key.utf8), value: w.bytes)
                    firstInBatch[key] = head
                }
                counters["t:" + event.type, default: 0] += 1
                counters["o:" + request.origin.role, default: 0] += 1
                sequences.append(head)
            }
            outcomes.append(.success(sequences))
        }
        try txn.writeUInt64(schema.meta, Schema.MetaKey.head, head)
        for (name, delta) in counters {
            let key = Array(name.utf8)
            let current = try txn.readUInt64(schema.counters, key) ?? 0
            try txn.writeUInt64(schema.counters, key, current + delta)
        }
        return outcomes
    }
}
