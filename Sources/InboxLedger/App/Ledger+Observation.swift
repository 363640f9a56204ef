// Observed values: what the widget, the badge and the host app's queue show, as they change,
// whichever process changed them — the ledger's counterpart of GRDB's ValueObservation.

extension Ledger {
    /// The widget's list now, then every distinct new list after commits by any process (and
    /// when a shown message expires). Bursts are coalesced: a consumer slower than the commits
    /// gets the latest list, never a backlog, and never the same list twice in a row. The
    /// sequence ends when the task iterating it is cancelled, and throws on an error that is
    /// not transient (a suspended process waits for ``Ledger/resume()`` instead).
    ///
    /// ```swift
    /// for try await list in ledger.widgetListUpdates(limit: 5) {
    ///     rows = list.items          // SwiftUI state, a widget reload, …
    /// }
    /// ```
    public func widgetListUpdates(limit: Int = 10) -> AsyncThrowingStream<WidgetList, any Error> {
        observe { [self] () throws(LedgerError) in
            let list = try widgetList(limit: limit)
            return (list, list.nextExpiry)
        }
    }

    /// The app badge now, then every new value (see ``widgetListUpdates(limit:)``).
    ///
    /// ```swift
    /// for try await badge in ledger.badgeUpdates() { try await UNUserNotificationCenter.current().setBadgeCount(badge) }
    /// ```
    public func badgeUpdates() -> AsyncThrowingStream<Int, any Error> {
        observe { [self] () throws(LedgerError) in
            let list = try widgetList(limit: 0)
            return (list.badge, list.nextExpiry)
        }
    }

    /// The pending widget actions now, then every new list (see ``widgetListUpdates(limit:)``):
    /// what a host app's queue screen shows.
    public func pendingActionUpdates(limit: Int = 100) -> AsyncThrowingStream<[PendingAction], any Error> {
        observe { [self] () throws(LedgerError) in (try pendingActions(limit: limit), nil) }
    }

    /// Reads `value` (off the cooperative pool), yields it when it differs from the last value
    /// yielded (by `same`, `==` unless given), and waits for the head to move (or, by the real
    /// clock, for `refreshAt`).
    func observe<Value: Equatable & Sendable>(
        same: @escaping @Sendable (Value, Value) -> Bool = { $0 == $1 },
        _ value: @escaping @Sendable () throws(LedgerError) -> (Value, refreshAt: Timestamp?)
    ) -> AsyncThrowingStream<Value, any Error> {
        AsyncThrowingStream(bufferingPolicy: .bufferingNewest(1)) { continuation in
            let task = Task { [self] in
                var last: Value?
                var head: UInt64 = 0
                do {
                    while !Task.isCancelled {
                        var refreshAt: Timestamp?
                        do {
                            // The head is read before the value: a commit in between is seen
                            // now or wakes the wait below at once, never lost.
                            let (seen, current, refresh) = try await readWorker.run { [self] () throws(LedgerError) in
                                let seen = try headSequence()
                                let (current, refresh) = try value()
                                return (seen, current, refresh)
                            }
                            head = seen
                            refreshAt = refresh
                            if last.map({ !same($0, current) }) ?? true {
                                continuation.yield(current)
                                last = current
                            }
                        } catch let error as LedgerError where error.isTransient {
                            // Suspended, or a writer stopped: nothing to show yet; the wait
                            // below resumes with the next change after it ends.
                        }
                        try await waitForChange(after: head, orUntil: refreshAt)
                    }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error is CancellationError ? nil : error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// Returns when the head moves past `head` or, if given, at `deadline` by the real clock.
    private func waitForChange(after head: UInt64, orUntil deadline: Timestamp?) async throws {
        guard let deadline else {
            _ = try await waitForChange(after: head)
            return
        }
        let seconds = Double(deadline.micros - options.clock.now().micros) / 1_000_000
        if seconds <= 0 { return }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { _ = try await self.waitForChange(after: head) }
            group.addTask { try await Task.sleep(for: .milliseconds(Int64(min(seconds, 86_400) * 1000) + 1)) }
            _ = try await group.next()
            group.cancelAll()
        }
    }
}
