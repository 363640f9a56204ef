import InboxLedger

/// The up direction as a pure state machine (postgres-nio's connection state machine is the
/// pattern): each event the driver reports — a batch read, an answer, a commit, a failure, a
/// pause that ended — returns the one ``Action`` to perform next. The machine does no I/O and
/// reads no clock; ``SyncClient`` performs the actions, and ``phase`` and ``lastError`` are
/// what ``SyncStatus/up`` shows.
///
/// A batch the relay read is sent in parts below ``SyncConfiguration/maxBatchBytes`` (at least
/// one event each); each part is committed only after the server acknowledged it; a `413`
/// halves the part and sends it again at once. Failures go through the one ``RetryPolicy``.
package struct UpStateMachine: Sendable {
    /// `continuous` (``SyncClient/run()``): wait for appends, retry with backoff.
    /// `once` (``SyncClient/syncOnce()``): stop when caught up or at the first failure.
    package enum Mode: Hashable, Sendable { case continuous, once }

    /// What the plan of a part needs to know.
    package struct Settings: Hashable, Sendable {
        package var ledgerID: String
        package var sharedTypes: Set<String>
        package var maxBatchBytes: Int
        package var policy: RetryPolicy
        package var mode: Mode

        package init(ledgerID: String, sharedTypes: Set<String>, maxBatchBytes: Int, policy: RetryPolicy, mode: Mode) {
            self.ledgerID = ledgerID
            self.sharedTypes = sharedTypes
            self.maxBatchBytes = maxBatchBytes
            self.policy = policy
            self.mode = mode
        }
    }

    /// One request and what its acknowledgement commits.
    package struct Part: Hashable, Sendable {
        /// The relay's events the part covers (shared or not): committed once acknowledged.
        package var batch: ConsumerBatch
        /// Sequences `batch.after+1 … lostThrough` were trimmed before they were sent.
        package var lostThrough: UInt64?
        /// The request: the shared events among `batch.events`.
        package var request: SyncWire.UpRequest
    }

    /// How the machine ended.
    package enum Outcome: Hashable, Sendable {
        /// Everything read was acknowledged and committed (`once` only).
        case caughtUp
        /// The task was cancelled.
        case cancelled
        /// The policy gave up on this error.
        case stopped(SyncError)
    }

    /// What the driver does next, then reports with the matching event.
    package enum Action: Hashable, Sendable {
        /// Read the relay's next batch → ``read(_:lostThrough:)``.
        case read
        /// Caught up: wait until the ledger's head passes `after` → ``appended()``.
        case waitForAppend(after: UInt64)
        /// Send the part → ``answered(_:)``.
        case send(Part)
        /// Commit the relay's cursor through the part → ``committed()``.
        case commit(Part, SyncWire.UpResponse)
        /// Pause (± 25 % jitter) → ``slept()``.
        case sleep(Duration)
        /// Ask the token provider for a new token → ``tokenRefreshed()``.
        case refreshToken
        /// Stop; the run of this direction is over.
        case finish(Outcome)
    }

    /// What is left of the batch read: `events` after `after`, the first `count` in the next part.
    struct Remaining: Hashable, Sendable {
        var after: UInt64
        var events: ArraySlice<Event>
        var count: Int
        var lostThrough: UInt64?
    }

    enum State: Hashable, Sendable {
        case notStarted
        case reading
        case waiting(after: UInt64)
        case sending(Remaining)
        case committing(Remaining, SyncWire.UpResponse)
        /// Pausing after `error`; then the read again (nil) or the same part.
        case backingOff(Remaining?, SyncError)
        case refreshingToken(Remaining?)
        case finished(Outcome)
    }

    package let settings: Settings
    private(set) var state = State.notStarted
    /// The last failure, until the next success (carried over from the previous run).
    package private(set) var lastError: SyncError?
    /// Consecutive failures since the last success.
    private(set) var failures = 0
    private(set) var refreshedToken = false

    package init(settings: Settings, lastError: SyncError? = nil) {
        self.settings = settings
        self.lastError = lastError
    }

    /// What ``SyncStatus/up`` shows for the state.
    package var phase: SyncStatus.Phase {
        switch state {
        case .notStarted: .stopped
        case .reading, .sending, .committing, .refreshingToken: .syncing
        case .waiting: .idle
        case .backingOff(_, let error): error.isRetryable ? .offline : .failed
        case .finished(.caughtUp), .finished(.cancelled): .stopped
        case .finished(.stopped(let error)): error.isRetryable ? .offline : .failed
        }
    }

    // MARK: - Events

    package mutating func start() -> Action {
        guard case .notStarted = state else { return invalid("start") }
        state = .reading
        return .read
    }

    /// The relay's next batch; `lostThrough` set after a consumer gap (the sequences after
    /// `batch.after` up to it were trimmed before they were sent).
    package mutating func read(_ batch: ConsumerBatch, lostThrough: UInt64?) -> Action {
        guard case .reading = state else { return invalid("read") }
        if batch.events.isEmpty, lostThrough == nil { return caughtUp(after: batch.after) }
        let events = batch.events[...]
        return send(Remaining(after: batch.after, events: events, count: plannedCount(events), lostThrough: lostThrough))
    }

    /// The server's answer to the part in flight.
    package mutating func answered(_ answer: SyncWire.UpResponse) -> Action {
        guard case .sending(let remaining) = state else { return invalid("answered") }
        let part = self.part(remaining)
        guard answer.acked >= part.request.through, answer.ledger == part.request.ledger else {
            return failed(.protocolViolation("the server acknowledged \(answer.acked) of ledger \(answer.ledger) for a batch through \(part.request.through) of \(part.request.ledger)"))
        }
        lastError = nil
        failures = 0
        refreshedToken = false
        state = .committing(remaining, answer)
        return .commit(part, answer)
    }

    /// The relay's cursor was committed through the part (or another instance of the relay
    /// had committed it first).
    package mutating func committed() -> Action {
        guard case .committing(let remaining, _) = state else { return invalid("committed") }
        if remaining.events.isEmpty {
            // Everything after the cursor was trimmed: declared, nothing to commit; caught up
            // until the next append (the next read declares again, then sends what follows).
            return caughtUp(after: max(remaining.after, remaining.lostThrough ?? 0))
        }
        let sent = remaining.events.prefix(remaining.count)
        let rest = remaining.events.dropFirst(remaining.count)
        guard let last = sent.last, !rest.isEmpty else {
            state = .reading
            return .read
        }
        return send(Remaining(after: max(last.sequence, remaining.lostThrough ?? 0), events: rest, count: plannedCount(rest), lostThrough: nil))
    }

    /// The step in progress failed (read, wait, send, commit, token refresh).
    package mutating func failed(_ error: SyncError) -> Action {
        switch state {
        case .sending(var remaining):
            if case .rejected(413, _, _) = error, remaining.count > 1 {
                // The server's limit is below ours: halve the part, and send it again at once.
                remaining.count = (remaining.count + 1) / 2
                state = .sending(remaining)
                return .send(part(remaining))
            }
            return decide(error, resume: remaining)
        case .committing(let remaining, _), .refreshingToken(.some(let remaining)):
            return decide(error, resume: remaining)
        case .reading, .waiting, .refreshingToken(.none):
            return decide(error, resume: nil)
        case .notStarted, .backingOff, .finished:
            return invalid("failed(\(error))")
        }
    }

    /// The pause after a failure ended: try the same step again.
    package mutating func slept() -> Action {
        guard case .backingOff(let resume, _) = state else { return invalid("slept") }
        return self.resume(resume)
    }

    /// The token provider gave a new token: try the same step again at once.
    package mutating func tokenRefreshed() -> Action {
        guard case .refreshingToken(let resume) = state else { return invalid("tokenRefreshed") }
        return self.resume(resume)
    }

    /// The ledger's head passed the sequence waited for.
    package mutating func appended() -> Action {
        guard case .waiting = state else { return invalid("appended") }
        state = .reading
        return .read
    }

    /// The task was cancelled: stop, not a failure (a part sent and not committed is sent
    /// again by the next run: duplicates, applied once).
    package mutating func cancelled() -> Action {
        if case .finished(let outcome) = state { return .finish(outcome) }
        state = .finished(.cancelled)
        return .finish(.cancelled)
    }

    // MARK: - Internals

    mutating func caughtUp(after: UInt64) -> Action {
        switch settings.mode {
        case .continuous:
            state = .waiting(after: after)
            return .waitForAppend(after: after)
        case .once:
            state = .finished(.caughtUp)
            return .finish(.caughtUp)
        }
    }

    mutating func send(_ remaining: Remaining) -> Action {
        state = .sending(remaining)
        return .send(part(remaining))
    }

    mutating func resume(_ remaining: Remaining?) -> Action {
        if let remaining { return send(remaining) }
        state = .reading
        return .read
    }

    mutating func decide(_ error: SyncError, resume: Remaining?) -> Action {
        switch settings.policy.decision(after: error, failures: failures, refreshedToken: refreshedToken) {
        case .cancel:
            state = .finished(.cancelled)
            return .finish(.cancelled)
        case .refreshToken:
            lastError = error
            refreshedToken = true
            state = .refreshingToken(resume)
            return .refreshToken
        case .retry(let delay) where settings.mode == .continuous:
            lastError = error
            failures += 1
            state = .backingOff(resume, error)
            return .sleep(delay)
        case .retry, .stop:
            lastError = error
            state = .finished(.stopped(error))
            return .finish(.stopped(error))
        }
    }

    /// An event the state does not expect: a bug of the driver. Stops rather than guessing.
    mutating func invalid(_ event: String) -> Action {
        assertionFailure("UpStateMachine: \(event) in \(state)")
        let error = SyncError.protocolViolation("internal: the up direction got \(event) while \(state)")
        state = .finished(.stopped(error))
        return .finish(.stopped(error))
    }

    func isShared(_ event: Event) -> Bool {
        if let key = event.key, key.hasPrefix(SyncWire.downKeyPrefix) { return false }  // came down: never echoed
        return settings.sharedTypes.contains(event.type)
    }

    /// How many of `events` fit in one body below `maxBatchBytes` (at least one).
    func plannedCount(_ events: ArraySlice<Event>) -> Int {
        var size = SyncWire.UpRequest.envelopeSizeBound(ledger: settings.ledgerID), count = 0
        for event in events {
            let bound = isShared(event) ? SyncWire.UpEvent(event).encodedSizeBound + 1 : 0
            if count > 0, size + bound > settings.maxBatchBytes { break }
            size += bound
            count += 1
        }
        return count
    }

    func part(_ remaining: Remaining) -> Part {
        let batch = ConsumerBatch(after: remaining.after, events: Array(remaining.events.prefix(remaining.count)))
        let through = max(batch.through, remaining.lostThrough ?? 0)
        let request = SyncWire.UpRequest(ledger: settings.ledgerID, after: batch.after, through: through,
                                         events: batch.events.filter(isShared).map(SyncWire.UpEvent.init), lostThrough: remaining.lostThrough)
        return Part(batch: batch, lostThrough: remaining.lostThrough, request: request)
    }
}
