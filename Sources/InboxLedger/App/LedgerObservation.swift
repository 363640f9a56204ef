// Observed values: what the widget, the badge, the host app's queue or an app projection show,
// as they change, whichever process changed them — the ledger's counterpart of GRDB's
// ValueObservation.

/// A value read from a ledger's snapshot, followed as it changes: read now, then again after
/// every commit of any process (and when a message it read expires), each time in one
/// snapshot (one read transaction).
///
/// ```swift
/// let badge = LedgerObservation.tracking { snapshot in try snapshot.badge() }
/// for try await value in badge.values(in: ledger) {
///     try await UNUserNotificationCenter.current().setBadgeCount(value)
/// }
/// ```
///
/// Bursts are coalesced: a consumer slower than the commits gets the latest value, never a
/// backlog. An `Equatable` value is yielded only when it differs from the last one yielded
/// (``removingDuplicates(by:)`` says how else to compare). The sequence ends when the task
/// iterating it is cancelled, and throws an error that is not transient (a suspended process
/// waits for ``Ledger/resume()`` instead).
public struct LedgerObservation<Value: Sendable>: Sendable {
    private let value: @Sendable (LedgerSnapshot) throws -> Value
    private let same: (@Sendable (Value, Value) -> Bool)?

    /// Observes what `value` reads from a snapshot, yielding it after every commit (a value
    /// that is not `Equatable` cannot be told unchanged).
    public static func tracking(_ value: @escaping @Sendable (LedgerSnapshot) throws -> Value) -> LedgerObservation {
        LedgerObservation(value: value, same: nil)
    }

    /// Observes what `value` reads from a snapshot, yielding it when it differs from the last
    /// value yielded.
    ///
    /// ```swift
    /// for try await list in LedgerObservation.tracking({ try $0.widgetList(limit: 5) }).values(in: ledger) {
    ///     rows = list.items          // SwiftUI state, a widget reload, …
    /// }
    /// ```
    public static func tracking(_ value: @escaping @Sendable (LedgerSnapshot) throws -> Value) -> LedgerObservation where Value: Equatable {
        LedgerObservation(value: value, same: { $0 == $1 })
    }

    /// The same observation, yielding a value only when `same` says it differs from the last
    /// one yielded.
    ///
    /// ```swift
    /// let tasks = LedgerObservation.tracking { try $0.projection(TaskList.self).contents(limit: 5) }
    ///     .removingDuplicates { $0.sameState(as: $1) }   // whatever the head
    /// ```
    public func removingDuplicates(by same: @escaping @Sendable (Value, Value) -> Bool) -> LedgerObservation {
        LedgerObservation(value: value, same: same)
    }

    /// The observed values in `ledger`: the value now, then every new one. Reads run on the
    /// directory's read thread, never on Swift's cooperative pool.
    public func values(in ledger: Ledger) -> AsyncThrowingStream<Value, any Error> {
        let (value, same, access) = (value, same, ledger.access)
        return AsyncThrowingStream(bufferingPolicy: .bufferingNewest(1)) { continuation in
            let task = Task {
                var last: Value?
                var head: UInt64 = 0
                do throws(LedgerError) {
                    while !Task.isCancelled {
                        var refreshAt: Timestamp?
                        do throws(LedgerError) {
                            // The head is read in the value's snapshot: a commit after it is seen
                            // by the wait below at once, never lost.
                            // A read that fails may still name a moment to look again (a projection being built).
                            let (outcome, refresh) = try await access.offPool { () throws(LedgerError) in
                                let expiry = SnapshotExpiry()
                                let outcome = Result { () throws(LedgerError) in
                                    try access.readSnapshot({ snapshot in (try snapshot.head(), try value(snapshot)) }, expiry: expiry)
                                }
                                return (outcome, expiry.moment)
                            }
                            refreshAt = refresh
                            let (seen, current) = try outcome.get()
                            head = seen
                            if let last, let same, same(last, current) {} else {
                                continuation.yield(current)
                                last = current
                            }
                        } catch where error.isTransient {
                            // Suspended, a writer stopped, a projection being built: nothing to
                            // show yet; the wait below resumes with the next change after it
                            // ends, or at the moment the read named (a build's steps do not
                            // move the head: the head is not waited for then).
                            if let refreshAt {
                                let micros = max(0, refreshAt.micros - access.options.clock.now().micros)
                                do { try await Task.sleep(for: .microseconds(micros)) } catch { throw .cancelled }
                                continue
                            }
                        }
                        try await Self.waitForChange(access, after: head, orUntil: refreshAt)
                    }
                    continuation.finish()
                } catch {
                    if case .cancelled = error { continuation.finish() } else { continuation.finish(throwing: error) }
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// Returns when the head moves past `head` or, if given, at `deadline` by the real clock.
    private static func waitForChange(_ access: LedgerAccess, after head: UInt64, orUntil deadline: Timestamp?) async throws(LedgerError) {
        guard let deadline else {
            _ = try await access.waitForHead(after: head)
            return
        }
        let seconds = Double(deadline.micros - access.options.clock.now().micros) / 1_000_000
        if seconds <= 0 { return }
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { _ = try await access.waitForHead(after: head) }
                group.addTask { try await Task.sleep(for: .milliseconds(Int64(min(seconds, 86_400) * 1000) + 1)) }
                _ = try await group.next()
                group.cancelAll()
            }
        } catch {
            throw LedgerError.from(error, path: access.path, operation: "observe")
        }
    }
}
