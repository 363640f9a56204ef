/// The down direction as a pure state machine, like ``UpStateMachine``: fetch the feed after
/// the cursor, append the answer, fetch again — a long poll once caught up — with failures
/// going through the one ``RetryPolicy``. ``phase`` and ``lastError`` are what
/// ``SyncStatus/down`` shows.
///
/// The first request of a run does not wait (`wait=0`), so a fresh client learns the feed's
/// head — its down lag — at once; so does every request while the last answer said more
/// entries follow. Once caught up (the cursor at the head), a continuous run long-polls and
/// shows `idle`.
package struct DownStateMachine: Sendable {
    package typealias Mode = UpStateMachine.Mode
    package typealias Outcome = UpStateMachine.Outcome

    /// What the requests need.
    package struct Settings: Hashable, Sendable {
        package var pageSize: Int
        package var longPollSeconds: Int
        package var policy: RetryPolicy
        package var mode: Mode

        package init(pageSize: Int, longPollSeconds: Int, policy: RetryPolicy, mode: Mode) {
            self.pageSize = pageSize
            self.longPollSeconds = longPollSeconds
            self.policy = policy
            self.mode = mode
        }
    }

    /// What the driver does next, then reports with the matching event.
    package enum Action: Hashable, Sendable {
        /// `GET /v1/down?after=&limit=&wait=` → ``fetched(_:)``.
        case fetch(after: UInt64, limit: Int, wait: Int)
        /// Append the answer's changes and store the cursor → ``applied(cursor:head:)``.
        case apply(SyncWire.DownResponse, after: UInt64)
        /// Pause (± 25 % jitter) → ``slept()``.
        case sleep(Duration)
        /// Ask the token provider for a new token → ``tokenRefreshed()``.
        case refreshToken
        /// Stop; the run of this direction is over.
        case finish(Outcome)
    }

    enum State: Hashable, Sendable {
        case notStarted
        case fetching(after: UInt64, wait: Int)
        /// `quiet`: an empty answer to a long poll (still caught up: `idle`).
        case applying(after: UInt64, quiet: Bool)
        case backingOff(after: UInt64, SyncError)
        case refreshingToken(after: UInt64)
        case finished(Outcome)
    }

    package let settings: Settings
    private(set) var state = State.notStarted
    /// The last failure, until the next success (carried over from the previous run).
    package private(set) var lastError: SyncError?
    private(set) var failures = 0
    private(set) var refreshedToken = false

    package init(settings: Settings, lastError: SyncError? = nil) {
        self.settings = settings
        self.lastError = lastError
    }

    /// What ``SyncStatus/down`` shows for the state: `idle` while long-polling (caught up as of
    /// the last answer), `syncing` while catching up.
    package var phase: SyncStatus.Phase {
        switch state {
        case .notStarted: .stopped
        case .fetching(_, let wait): wait > 0 ? .idle : .syncing
        case .applying(_, let quiet): quiet ? .idle : .syncing
        case .refreshingToken: .syncing
        case .backingOff(_, let error): error.isRetryable ? .offline : .failed
        case .finished(.caughtUp), .finished(.cancelled): .stopped
        case .finished(.stopped(let error)): error.isRetryable ? .offline : .failed
        }
    }

    // MARK: - Events

    /// Starts from the stored down cursor.
    package mutating func start(after cursor: UInt64) -> Action {
        guard case .notStarted = state else { return invalid("start") }
        return fetch(after: cursor, wait: 0)
    }

    /// The server's answer.
    package mutating func fetched(_ page: SyncWire.DownResponse) -> Action {
        guard case .fetching(let after, let wait) = state else { return invalid("fetched") }
        lastError = nil
        failures = 0
        refreshedToken = false
        state = .applying(after: after, quiet: wait > 0 && page.changes.isEmpty)
        return .apply(page, after: after)
    }

    /// The answer was appended; `cursor` is the down cursor now (0 again after a change of
    /// user), `head` the feed's head the answer reported.
    package mutating func applied(cursor: UInt64, head: UInt64) -> Action {
        guard case .applying(let after, _) = state else { return invalid("applied") }
        if cursor == after, cursor < head {
            // Nothing after the cursor, yet the head is beyond it: asking again would spin.
            return decide(.protocolViolation("the feed's head is \(head) but the server returned no entry after \(after)"), after: after)
        }
        guard cursor < head else {
            switch settings.mode {
            case .continuous: return fetch(after: cursor, wait: settings.longPollSeconds)
            case .once:
                state = .finished(.caughtUp)
                return .finish(.caughtUp)
            }
        }
        return fetch(after: cursor, wait: 0)
    }

    /// The fetch, the append or the token refresh failed.
    package mutating func failed(_ error: SyncError) -> Action {
        switch state {
        case .fetching(let after, _), .applying(let after, _), .refreshingToken(let after):
            return decide(error, after: after)
        case .notStarted, .backingOff, .finished:
            return invalid("failed(\(error))")
        }
    }

    /// The pause after a failure ended: fetch again (without waiting: the lag is unknown).
    package mutating func slept() -> Action {
        guard case .backingOff(let after, _) = state else { return invalid("slept") }
        return fetch(after: after, wait: 0)
    }

    /// The token provider gave a new token: fetch again at once.
    package mutating func tokenRefreshed() -> Action {
        guard case .refreshingToken(let after) = state else { return invalid("tokenRefreshed") }
        return fetch(after: after, wait: 0)
    }

    /// The task was cancelled: stop, not a failure (an answer not yet appended is fetched again
    /// next time; the keys make a replay change nothing).
    package mutating func cancelled() -> Action {
        if case .finished(let outcome) = state { return .finish(outcome) }
        state = .finished(.cancelled)
        return .finish(.cancelled)
    }

    // MARK: - Internals

    mutating func fetch(after: UInt64, wait: Int) -> Action {
        state = .fetching(after: after, wait: wait)
        return .fetch(after: after, limit: settings.pageSize, wait: wait)
    }

    mutating func decide(_ error: SyncError, after: UInt64) -> Action {
        switch settings.policy.decision(after: error, failures: failures, refreshedToken: refreshedToken) {
        case .cancel:
            state = .finished(.cancelled)
            return .finish(.cancelled)
        case .refreshToken:
            lastError = error
            refreshedToken = true
            state = .refreshingToken(after: after)
            return .refreshToken
        case .retry(let delay) where settings.mode == .continuous:
            lastError = error
            failures += 1
            state = .backingOff(after: after, error)
            return .sleep(delay)
        case .retry, .stop:
            lastError = error
            state = .finished(.stopped(error))
            return .finish(.stopped(error))
        }
    }

    mutating func invalid(_ event: String) -> Action {
        assertionFailure("DownStateMachine: \(event) in \(state)")
        let error = SyncError.protocolViolation("internal: the down direction got \(event) while \(state)")
        state = .finished(.stopped(error))
        return .finish(.stopped(error))
    }
}
