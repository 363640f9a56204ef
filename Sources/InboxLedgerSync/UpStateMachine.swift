import InboxLedger

/// The up direction as a pure state machine (postgres-nio's connection state machine is the
/// pattern): each event the driver reports — a batch read, an answer, a commit, a failure, a
/// pause that ended — returns the one ``Action`` to perform next. The machine does no I/O and
/// reads no clock; ``SyncClient`` performs the actions, and ``phase`` and ``lastError`` are
/// what ``SyncStatus/up`` shows.
///
/// A batch the relay read is sent in parts below ``SyncConfiguration/maxBatchBytes`` (at least
/// one event each); each part is committed only after the server acknowledged it; a `413`
/// halves the part and sends it again at once. Failures go through the one ``RetryPolicy``,
/// in the ``FailureStateMachine`` every state carries.
package struct UpStateMachine: DirectionStateMachine {
    /// `continuous` (``SyncClient/run()``): wait for appends, retry with backoff.
    /// `once` (``SyncClient/syncOnce()``): stop when caught up or at the first failure.
    package typealias Mode = DirectionMode

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
        /// The request: the shared events among `batch.events`, but those the server refused
        /// (declared in its `refused`).
        package var request: SyncWire.UpRequest
    }

    /// How the machine ended (`caughtUp`: everything read was acknowledged and committed).
    package typealias Outcome = DirectionOutcome

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

    /// The actions the driver performs for the up direction alone (``Action`` without the
    /// pause, the token refresh and the end, which ``DirectionStep`` shares with the down one).
    package enum Work: Sendable {
        /// Read the relay's next batch → ``read(_:lostThrough:)``.
        case read
        /// Wait until the ledger's head passes `after` → ``appended()``.
        case waitForAppend(after: UInt64)
        /// Send the part → ``answered(_:)``.
        case send(Part)
        /// Commit the relay's cursor through the part → ``committed()``.
        case commit(Part, SyncWire.UpResponse)
    }

    /// What is left of the batch read: `events` after `after`, the first `count` in the next part.
    struct Remaining: Hashable, Sendable {
        var after: UInt64
        var events: ArraySlice<Event>
        var count: Int
        var lostThrough: UInt64?
        /// Sequences among the next part's events that the server refused: left out of the
        /// request and declared in it (``SyncWire/UpRequest/refused``), in order.
        var refused: [UInt64] = []
    }

    /// Where the machine is. Every state carries the failure sub-machine: a transition passes
    /// it on, tells it of a success, or hands it a failure.
    enum State: Hashable, Sendable {
        /// Before ``start()``: the sub-machine holds the previous run's error.
        case notStarted(FailureStateMachine)
        /// Reading the relay's next batch.
        case reading(FailureStateMachine)
        /// Caught up: waiting for an append after `after`.
        case waiting(after: UInt64, FailureStateMachine)
        /// Sending the next part of what is left.
        case sending(Remaining, FailureStateMachine)
        /// Committing the part the server acknowledged.
        case committing(Remaining, SyncWire.UpResponse, FailureStateMachine)
        /// After a failure, backing off or refreshing the token (the sub-machine says which);
        /// then the read again (nil) or the same part.
        case recovering(Remaining?, FailureStateMachine)
        /// The run of this direction is over.
        case finished(Outcome, FailureStateMachine)

        /// The failure sub-machine the state carries.
        var failure: FailureStateMachine {
            switch self {
            case .notStarted(let failure), .reading(let failure), .waiting(_, let failure), .sending(_, let failure),
                 .committing(_, _, let failure), .recovering(_, let failure), .finished(_, let failure):
                failure
            }
        }
    }

    package let settings: Settings
    private(set) var state: State

    /// A machine not started yet; `lastError` is the previous run's, shown until a success.
    package init(settings: Settings, lastError: SyncError? = nil) {
        self.settings = settings
        state = .notStarted(FailureStateMachine(policy: settings.policy, mode: settings.mode, lastError: lastError))
    }

    /// The last failure, until the next success (carried over from the previous run).
    package var lastError: SyncError? { state.failure.lastError }

    /// What ``SyncStatus/up`` shows for the state.
    package var phase: SyncStatus.Phase {
        switch state {
        case .notStarted: .stopped
        case .reading, .sending, .committing: .syncing
        case .waiting: .idle
        case .recovering(_, let failure): failure.phase
        case .finished(let outcome, _): outcome.phase
        }
    }

    /// How the driver performs `action`.
    package static func step(_ action: Action) -> DirectionStep<Work> {
        switch action {
        case .read: .perform(.read)
        case .waitForAppend(let after): .perform(.waitForAppend(after: after))
        case .send(let part): .perform(.send(part))
        case .commit(let part, let answer): .perform(.commit(part, answer))
        case .sleep(let delay): .sleep(delay)
        case .refreshToken: .refreshToken
        case .finish(let outcome): .finish(outcome)
        }
    }

    // MARK: - Events

    /// Starts the run: read the relay's first batch.
    package mutating func start() -> Action {
        guard case .notStarted(let failure) = state else { return invalid("start") }
        state = .reading(failure)
        return .read
    }

    /// The relay's next batch; `lostThrough` set after a consumer gap (the sequences after
    /// `batch.after` up to it were trimmed before they were sent).
    package mutating func read(_ batch: ConsumerBatch, lostThrough: UInt64?) -> Action {
        guard case .reading(let failure) = state else { return invalid("read") }
        if batch.events.isEmpty, lostThrough == nil { return caughtUp(after: batch.after, failure) }
        let events = batch.events[...]
        return send(Remaining(after: batch.after, events: events, count: plannedCount(events), lostThrough: lostThrough), failure)
    }

    /// The server's answer to the part in flight.
    package mutating func answered(_ answer: SyncWire.UpResponse) -> Action {
        guard case .sending(let remaining, var failure) = state else { return invalid("answered") }
        let part = self.part(remaining)
        guard answer.acked >= part.request.through, answer.ledger == part.request.ledger else {
            return failed(.protocolViolation("the server acknowledged \(answer.acked) of ledger \(answer.ledger) for a batch through \(part.request.through) of \(part.request.ledger)"))
        }
        failure.succeeded()
        state = .committing(remaining, answer, failure)
        return .commit(part, answer)
    }

    /// The relay's cursor was committed through the part (or another instance of the relay
    /// had committed it first).
    package mutating func committed() -> Action {
        guard case .committing(let remaining, _, let failure) = state else { return invalid("committed") }
        if remaining.events.isEmpty {
            // Everything after the cursor was trimmed: declared, nothing to commit; caught up
            // until the next append (the next read declares again, then sends what follows).
            return caughtUp(after: max(remaining.after, remaining.lostThrough ?? 0), failure)
        }
        let sent = remaining.events.prefix(remaining.count)
        let rest = remaining.events.dropFirst(remaining.count)
        guard let last = sent.last, !rest.isEmpty else {
            state = .reading(failure)
            return .read
        }
        return send(Remaining(after: max(last.sequence, remaining.lostThrough ?? 0), events: rest, count: plannedCount(rest), lostThrough: nil), failure)
    }

    /// The step in progress failed (read, wait, send, commit, token refresh).
    package mutating func failed(_ error: SyncError) -> Action {
        switch state {
        case .sending(var remaining, let failure):
            if case .rejected(413, _, _) = error, remaining.count > 1 {
                // The server's limit is below ours: halve the part, and send it again at once.
                remaining.count = (remaining.count + 1) / 2
                remaining.refused.removeAll { seq in !remaining.events.prefix(remaining.count).contains { $0.sequence == seq } }
                return send(remaining, failure)
            }
            if case .eventRefused(let seq, _) = error, part(remaining).request.events.contains(where: { $0.seq == seq }) {
                // One event's content the server will never accept: skipped and declared, so the
                // events after it are sent — at once, not a failure (issue 40).
                remaining.refused = (remaining.refused + [seq]).sorted()
                return send(remaining, failure)
            }
            return decide(error, resume: remaining, failure)
        case .committing(let remaining, _, let failure):
            return decide(error, resume: remaining, failure)
        case .recovering(let resume, let failure):
            return decide(error, resume: resume, failure)  // a failed token refresh; refused while backing off
        case .reading(let failure), .waiting(_, let failure):
            return decide(error, resume: nil, failure)
        case .notStarted, .finished:
            return invalid("failed(\(error))")
        }
    }

    /// The pause after a failure ended: try the same step again.
    package mutating func slept() -> Action {
        guard case .recovering(let resume, var failure) = state, failure.slept() else { return invalid("slept") }
        return self.resume(resume, failure)
    }

    /// The token provider gave a new token: try the same step again at once.
    package mutating func tokenRefreshed() -> Action {
        guard case .recovering(let resume, var failure) = state, failure.tokenRefreshed() else { return invalid("tokenRefreshed") }
        return self.resume(resume, failure)
    }

    /// The ledger's head passed the sequence waited for.
    package mutating func appended() -> Action {
        guard case .waiting(_, let failure) = state else { return invalid("appended") }
        state = .reading(failure)
        return .read
    }

    /// The task was cancelled: stop, not a failure (a part sent and not committed is sent
    /// again by the next run: duplicates, applied once).
    package mutating func cancelled() -> Action {
        if case .finished(let outcome, _) = state { return .finish(outcome) }
        state = .finished(.cancelled, state.failure)
        return .finish(.cancelled)
    }

    // MARK: - Internals

    /// Nothing left to send after `after`: wait for an append (`continuous`) or finish (`once`).
    mutating func caughtUp(after: UInt64, _ failure: FailureStateMachine) -> Action {
        switch settings.mode {
        case .continuous:
            state = .waiting(after: after, failure)
            return .waitForAppend(after: after)
        case .once:
            state = .finished(.caughtUp, failure)
            return .finish(.caughtUp)
        }
    }

    /// Sends the next part of `remaining`.
    mutating func send(_ remaining: Remaining, _ failure: FailureStateMachine) -> Action {
        state = .sending(remaining, failure)
        return .send(part(remaining))
    }

    /// Tries the step a failure interrupted again: the same part, or the read if nil.
    mutating func resume(_ remaining: Remaining?, _ failure: FailureStateMachine) -> Action {
        if let remaining { return send(remaining, failure) }
        state = .reading(failure)
        return .read
    }

    /// Hands `error` to the failure sub-machine and performs what it decides: recover, then
    /// `resume` (the read again if nil), or finish.
    mutating func decide(_ error: SyncError, resume: Remaining?, _ failure: FailureStateMachine) -> Action {
        var failure = failure
        switch failure.failed(error) {
        case .sleep(let delay)?:
            state = .recovering(resume, failure)
            return .sleep(delay)
        case .refreshToken?:
            state = .recovering(resume, failure)
            return .refreshToken
        case .finish(let outcome)?:
            state = .finished(outcome, failure)
            return .finish(outcome)
        case nil:
            return invalid("failed(\(error))")
        }
    }

    /// An event the state does not expect: a bug of the driver. Stops rather than guessing.
    mutating func invalid(_ event: String) -> Action {
        assertionFailure("UpStateMachine: \(event) in \(state)")
        let error = SyncError.protocolViolation("internal: the up direction got \(event) while \(state)")
        state = .finished(.stopped(error), state.failure)
        return .finish(.stopped(error))
    }

    /// Whether the relay sends `event`: one marked shared when it was appended (whatever the
    /// configuration says now: the feed must settle it, docs/sync.md "Custom events on every
    /// device"), or of a type the configuration shares; never one that came down the feed.
    func isShared(_ event: Event) -> Bool {
        switch event.source {
        case .feed: return false  // came down: never echoed
        case .shared: return true
        case .local:
            if let key = event.key, key.hasPrefix(SyncWire.downKeyPrefix) { return false }  // came down before format 4
            return settings.sharedTypes.contains(event.type)
        }
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
        let refused = Set(remaining.refused)
        let request = SyncWire.UpRequest(ledger: settings.ledgerID, after: batch.after, through: through,
                                         events: batch.events.filter { isShared($0) && !refused.contains($0.sequence) }.map(SyncWire.UpEvent.init),
                                         lostThrough: remaining.lostThrough, refused: remaining.refused.isEmpty ? nil : remaining.refused)
        return Part(batch: batch, lostThrough: remaining.lostThrough, request: request)
    }
}
