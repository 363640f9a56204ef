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
/// let host = try await ledger.consumer(named: "host-app")
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
    public typealias Failure = any Error

    let consumer: Consumer
    let limit: Int

    /// Reads the next batch when asked; see ``ConsumerBatches``.
    public struct AsyncIterator: AsyncIteratorProtocol {
        public typealias Element = ConsumerBatch
        public typealias Failure = any Error

        let consumer: Consumer
        let limit: Int

        /// The next batch of at least one event, or nil once the task is cancelled. Throws what
        /// is not transient (``LedgerError/consumerGap(name:cursor:firstAvailable:)``, a damaged
        /// store, …).
        public mutating func next() async throws -> ConsumerBatch? {
            do {
                while !Task.isCancelled {
                    let batch = try await consumer.ledger.retryingTransient { [consumer, limit] in try await consumer.next(limit: limit) }
                    if !batch.events.isEmpty { return batch }
                    _ = try await consumer.ledger.waitForChange(after: batch.after)
                }
            } catch is CancellationError {}
            return nil
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(consumer: consumer, limit: limit) }
}

extension Ledger {
    /// ``consumer(named:startingAt:)`` without blocking, waiting through transient conditions
    /// (the process suspended, a busy writer, every reader slot taken) like ``Consumer/batches(limit:)``
    /// and the async commit: the first call of an action-queue task that may start while the
    /// app is suspended.
    ///
    /// ```swift
    /// let host = try await ledger.consumer(named: "host-app")
    /// ```
    public func consumer(named name: String, startingAt start: ConsumerStart = .beginning) async throws -> Consumer {
        try await retryingTransient { [self] in try await readWorker.run { [self] () throws(LedgerError) in try consumer(named: name, startingAt: start) } }
    }
}

extension Consumer {
    /// The batches after the cursor, each of up to `limit` events, as the loop asks for them;
    /// see ``ConsumerBatches``.
    public func batches(limit: Int = 100) -> ConsumerBatches { ConsumerBatches(consumer: self, limit: limit) }
}

extension Ledger {
    /// Runs `body` until it succeeds or throws what is not transient, waiting between tries
    /// (5 ms, doubling to 200 ms): a suspended process is polled, so a resume is noticed within
    /// 200 ms. Cancellation ends the wait with `CancellationError`. (`package`: the sync client
    /// and the test agent wait the same way.)
    package func retryingTransient<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        var delay = 5
        while true {
            do {
                return try await body()
            } catch let error as LedgerError where error.isTransient {
                try await Task.sleep(for: .milliseconds(delay))
                delay = min(delay * 2, 200)
            }
        }
    }
}
