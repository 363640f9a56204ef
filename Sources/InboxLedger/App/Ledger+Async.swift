import Synchronization

// Async forms of the calls an app makes from the main actor or a view model. Their blocking
// part never runs on Swift's cooperative pool: appends are committed by the commit queue's
// leader thread (grouped with every other append of the process, async or not), reads run on
// one dedicated thread per ledger directory. A task cancelled before its work starts gets
// `CancellationError` and nothing happens; once an append's commit has started, the call
// returns its committed result.

extension Ledger {
    /// ``append(_:)-(AppendRequest)`` without blocking the caller's thread: every other async
    /// `append` is this one.
    ///
    /// ```swift
    /// let receipt = try await ledger.append(AppendRequest(.badgeAdjusted(.delta(1)), key: "push-4711"))
    /// ```
    @discardableResult
    public func append(_ request: AppendRequest) async throws -> AppendReceipt {
        if request.isEmpty, request.expectedHead == nil { return AppendReceipt(sequences: [], notes: []) }
        return try await log.submitAsync(prepare(request), cursor: nil, expectedHead: request.expectedHead)
    }

    /// Appends one event without blocking the caller's thread; see ``append(_:)-(NewEvent)``.
    ///
    /// ```swift
    /// @MainActor func markAllRead(_ ids: [String]) async throws {
    ///     try await ledger.append(.messageRead(ReadChange(ids: ids, read: true)))
    /// }
    /// ```
    @discardableResult
    public func append(_ event: NewEvent) async throws -> UInt64 {
        try Ledger.first(of: try await append(AppendRequest([event])), path: path)
    }

    /// Appends a domain event without blocking; see ``append(_:key:)-(DomainEvent,_)``.
    @discardableResult
    public func append(_ event: DomainEvent, key: String? = nil) async throws -> UInt64 {
        try Ledger.first(of: await append(AppendRequest(event, key: key)), path: path)
    }

    /// Appends an app-defined event without blocking; see ``LedgerEvent``.
    @discardableResult
    public func append<E: LedgerEvent>(_ event: E, key: String? = nil) async throws -> UInt64 {
        try await append(try NewEvent(event, key: key))
    }

    /// Appends `events` atomically without blocking; see ``append(contentsOf:)``.
    @discardableResult
    public func append(contentsOf events: [NewEvent]) async throws -> [UInt64] {
        try await appendWithReceipt(contentsOf: events).sequences
    }

    /// ``append(contentsOf:)``, also returning what the projections noticed, without blocking.
    public func appendWithReceipt(contentsOf events: [NewEvent]) async throws -> AppendReceipt {
        try await append(AppendRequest(events))
    }

    /// ``appendWithReceipt(_:key:)-(DomainEvent,_)`` without blocking: the receipt says whether a
    /// keyed append was a replay (``AppendReceipt/isReplay``).
    ///
    /// ```swift
    /// let receipt = try await ledger.appendWithReceipt(.badgeAdjusted(.delta(1)), key: "push-4711")
    /// ```
    public func appendWithReceipt(_ event: DomainEvent, key: String? = nil) async throws -> AppendReceipt {
        try await append(AppendRequest(event, key: key))
    }

    /// ``append(contentsOf:expectingHead:)`` without blocking.
    @discardableResult
    public func append(contentsOf events: [NewEvent], expectingHead: UInt64) async throws -> [UInt64] {
        try await append(AppendRequest(events, expectingHead: expectingHead)).sequences
    }

    /// The widget's list, read off the cooperative pool; see ``widgetList(limit:now:)``.
    ///
    /// ```swift
    /// let list = try await ledger.widgetList(limit: 5)
    /// ```
    public func widgetList(limit: Int = 10, now: Timestamp? = nil) async throws -> WidgetList {
        try await readWorker.run { [self] () throws(LedgerError) in try widgetList(limit: limit, now: now) }
    }

    /// The app badge, read off the cooperative pool.
    public func badge(now: Timestamp? = nil) async throws -> Int {
        try await widgetList(limit: 0, now: now).badge
    }

    /// Pending actions, read off the cooperative pool.
    public func pendingActions(limit: Int = 100) async throws -> [PendingAction] {
        try await readWorker.run { [self] () throws(LedgerError) in try pendingActions(limit: limit) }
    }

    /// The last sequence ever assigned (0 for an empty ledger), read off the cooperative pool;
    /// see ``headSequence()``. The head to pass to ``append(contentsOf:expectingHead:)``.
    ///
    /// ```swift
    /// let head = try await ledger.headSequence()
    /// ```
    public func headSequence() async throws -> UInt64 {
        try await readWorker.run { [self] () throws(LedgerError) in try headSequence() }
    }

    /// Events after `sequence`, read off the cooperative pool.
    public func events(after sequence: UInt64 = 0, limit: Int = 1000) async throws -> [Event] {
        try await readWorker.run { [self] () throws(LedgerError) in try events(after: sequence, limit: limit) }
    }
}

extension Consumer {
    /// ``next(limit:)`` off the cooperative pool.
    public func next(limit: Int = 100) async throws -> ConsumerBatch {
        try await ledger.readWorker.run { [self] () throws(LedgerError) in try next(limit: limit) }
    }

    /// ``commit(_:appending:)`` without blocking: the cursor moves with `events`, atomically.
    ///
    /// It waits through transient conditions — the process suspended
    /// (``Ledger/suspend(waitingUpTo:)``), another process holding the write lock too long,
    /// every reader slot taken — and commits once they pass: each of them writes nothing, so
    /// the retry commits the batch exactly once. Cancelled before its commit starts, it throws
    /// `CancellationError` and writes nothing (the batch is read again next time).
    ///
    /// ```swift
    /// let batch = try await host.next(limit: 50)
    /// try await host.commit(batch, appending: completions)
    /// ```
    @discardableResult
    public func commit(_ batch: ConsumerBatch, appending events: [NewEvent] = []) async throws -> AppendReceipt {
        let prepared = try ledger.log.prepare(events)
        let cursor = CursorCommit(name: name, expected: batch.after, through: batch.through)
        return try await ledger.retryingTransient { [ledger] in try await ledger.log.submitAsync(prepared, cursor: cursor) }
    }
}
