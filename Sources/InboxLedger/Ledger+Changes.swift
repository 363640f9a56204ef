extension Ledger {
    /// Waits until another append (from any process) moves the head past `sequence`, and
    /// returns the new head. Idle waiting costs no CPU to speak of (an inotify watch).
    ///
    /// ```swift
    /// var seen = try await ledger.headSequence()
    /// while true {
    ///     seen = try await ledger.waitForChange(after: seen)
    ///     refreshWidget()
    /// }
    /// ```
    public func waitForChange(after sequence: UInt64) async throws -> UInt64 {
        try await changeMonitor.wait(after: sequence) { [self] in Result { () throws(LedgerError) in try headSequence() } }
    }

    /// The heads the ledger moves to after `sequence`, as they happen (changes that come in
    /// quick succession may be reported once, with the latest head).
    public func changes(after sequence: UInt64) -> AsyncThrowingStream<UInt64, any Error> {
        AsyncThrowingStream { continuation in
            let task = Task {
                var seen = sequence
                do {
                    while !Task.isCancelled {
                        seen = try await waitForChange(after: seen)
                        continuation.yield(seen)
                    }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error is CancellationError ? nil : error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}
