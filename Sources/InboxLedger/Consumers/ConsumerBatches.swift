/// The batches of a consumer as an async sequence: the host app's action-queue loop.
///
/// Each batch is read when the loop asks for the next one — after the previous body, and so
/// after its commit — and holds at least one event: with nothing new, the iterator waits for
/// the head to move, whichever process appends. It waits through transient conditions (the
/// process suspended by ``Ledger/suspend(waitingUpTo:)``, a writer stopped inside its
/// transaction, every reader slot taken) instead of ending, and ends when its task is
/// cancelled. Commit each batch in the loop's body with ``Consumer/commit(_:appending:)``: a
/// batch that was not committed is read again by the next iteration (and by the next run of
/// the app), so nothing is skipped; once committed, it is never read again.
///
/// ```swift
/// let host = try await ledger.consumers.consumer(named: "host-app")
/// for try await batch in host.batches(limit: 50) {
///     var completions: [NewEvent] = []
///     for event in batch.events where event.type == BuiltInEventType.widgetAction.rawValue {
///         // … carry out the action, then:
///         completions.append(try DomainEvent.actionCompleted(ActionCompletion(actionID: "…", outcome: .done)).newEvent())
///     }
///     try await host.commit(batch, appending: completions)   // waits through a suspension
/// }
/// ```
public struct ConsumerBatches: AsyncSequence, Sendable {
    public typealias Element = ConsumerBatch
    public typealias Failure = LedgerError

    let consumer: Consumer
    let limit: Int

    /// Reads the next batch when asked; see ``ConsumerBatches``.
    public struct AsyncIterator: AsyncIteratorProtocol {
        public typealias Element = ConsumerBatch
        public typealias Failure = LedgerError

        let consumer: Consumer
        let limit: Int

        /// The next batch of at least one event, or nil once the task is cancelled. Throws what
        /// is not transient (``LedgerError/consumerGap(name:cursor:firstAvailable:)``, a damaged
        /// store, …).
        public mutating func next() async throws(LedgerError) -> ConsumerBatch? {
            do throws(LedgerError) {
                while !Task.isCancelled {
                    let batch = try await consumer.retryingTransient { [consumer, limit] () async throws(LedgerError) in try await consumer.next(limit: limit) }
                    if !batch.events.isEmpty { return batch }
                    _ = try await consumer.waitForHead(after: batch.after)
                }
            } catch {
                guard case .cancelled = error else { throw error }
            }
            return nil
        }
    }

    /// An iterator that reads the next batch when asked.
    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(consumer: consumer, limit: limit) }
}

extension LedgerConsumers {
    /// ``consumer(named:startingAt:)`` without blocking, waiting through transient conditions
    /// (the process suspended, a busy writer, every reader slot taken) like ``Consumer/batches(limit:)``
    /// and the async commit: the first call of an action-queue task that may start while the
    /// app is suspended.
    ///
    /// ```swift
    /// let host = try await ledger.consumers.consumer(named: "host-app")
    /// ```
    public func consumer(named name: String, startingAt start: ConsumerStart = .beginning) async throws(LedgerError) -> Consumer {
        try await retryingTransient { [self] () async throws(LedgerError) in
            try await offPool { [self] () throws(LedgerError) in try consumer(named: name, startingAt: start) }
        }
    }
}

extension Consumer {
    /// The batches after the cursor, each of up to `limit` events, as the loop asks for them;
    /// see ``ConsumerBatches``.
    public func batches(limit: Int = 100) -> ConsumerBatches { ConsumerBatches(consumer: self, limit: limit) }
}

extension Consumer {
    /// ``next(limit:)`` off the cooperative pool.
    public func next(limit: Int = 100) async throws(LedgerError) -> ConsumerBatch {
        try await offPool { [self] () throws(LedgerError) in try next(limit: limit) }
    }

    /// ``commit(_:appending:)`` without blocking: the cursor moves with `events`, atomically.
    ///
    /// It waits through transient conditions — the process suspended
    /// (``Ledger/suspend(waitingUpTo:)``), another process holding the write lock too long,
    /// every reader slot taken — and commits once they pass: each of them writes nothing, so
    /// the retry commits the batch exactly once. Cancelled before its commit starts, it throws
    /// ``LedgerError/cancelled`` and writes nothing (the batch is read again next time).
    ///
    /// ```swift
    /// let batch = try await host.next(limit: 50)
    /// try await host.commit(batch, appending: completions)
    /// ```
    @discardableResult
    public func commit(_ batch: ConsumerBatch, appending events: [NewEvent] = []) async throws(LedgerError) -> AppendReceipt {
        let prepared = try log.prepare(events)
        let cursor = CursorCommit(name: name, expected: batch.after, through: batch.through)
        return try await retryingTransient { [log] () async throws(LedgerError) in try await log.submitAsync(prepared, cursor: cursor) }
    }
}
