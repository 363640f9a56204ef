/// The down direction as a pure state machine, like ``UpStateMachine``: fetch the feed after
/// the cursor, append the answer, fetch again — a long poll once caught up — with failures
/// going through the one ``RetryPolicy``, in the ``FailureStateMachine`` every state carries.
/// ``phase`` and ``lastError`` are what ``SyncStatus/down`` shows.
///
/// The first request of a run does not wait (`wait=0`), so a fresh client learns the feed's
/// head — its down lag — at once; so does every request while the last answer said more
/// entries follow. Once caught up (the cursor at the head), a continuous run long-polls and
/// shows `idle`.
package struct DownStateMachine: DirectionStateMachine {
    /// `continuous` (``SyncClient/run()``): long-poll, retry with backoff.
    /// `once` (``SyncClient/syncOnce()``): stop at the head or at the first failure.
    package typealias Mode = DirectionMode
    /// How the machine ended (`caughtUp`: the cursor reached the feed's head).
    package typealias Outcome = DirectionOutcome

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

    /// The actions the driver performs for the down direction alone (``Action`` without the
    /// pause, the token refresh and the end, which ``DirectionStep`` shares with the up one).
    package enum Work: Sendable {
        /// `GET /v1/down?after=&limit=&wait=` → ``fetched(_:)``.
        case fetch(after: UInt64, limit: Int, wait: Int)
        /// Append the answer's changes and store the cursor → ``applied(cursor:head:)``.
        case apply(SyncWire.DownResponse, after: UInt64)
    }

    /// Where the machine is. Every state carries the failure sub-machine: a transition passes
    /// it on, tells it of a success, or hands it a failure.
    enum State: Hashable, Sendable {
        /// Before ``start(after:)``: the sub-machine holds the previous run's error.
        case notStarted(FailureStateMachine)
        /// Fetching the feed after `after`, waiting up to `wait` seconds on the server.
        case fetching(after: UInt64, wait: Int, FailureStateMachine)
        /// Appending an answer to a fetch after `after`. `quiet`: an empty answer to a long
        /// poll (still caught up: `idle`).
        case applying(after: UInt64, quiet: Bool, FailureStateMachine)
        /// After a failure, backing off or refreshing the token (the sub-machine says which);
        /// then the fetch after `after` again.
        case recovering(after: UInt64, FailureStateMachine)
        /// An answer said the feed's head is beyond `after` but held no entry after it (a
        /// server that read its head and its entries apart, while a batch committed between):
        /// a short pause, then the fetch again. Not a failure.
        case feedBehindHead(after: UInt64, FailureStateMachine)
        /// The run of this direction is over.
        case finished(Outcome, FailureStateMachine)

        /// The failure sub-machine the state carries.
        var failure: FailureStateMachine {
            switch self {
            case .notStarted(let failure), .fetching(_, _, let failure), .applying(_, _, let failure),
                 .recovering(_, let failure), .feedBehindHead(_, let failure), .finished(_, let failure):
                failure
            }
        }
    }

    package let settings: Settings
    private(set) var state: State
    /// Answers in a row that were empty below the head they reported (``State/feedBehindHead(after:_:)``);
    /// 0 again after an answer that moved the cursor.
    private var emptyBelowHead = 0

    /// How many answers in a row may be empty below their head before that is a protocol
    /// violation: the pauses between them (50, 100, … ms) add up to 0.75 s — a commit between two
    /// reads of a server is over by then; a server that keeps answering so is broken, and asking
    /// it again at once would spin.
    package static let emptyBelowHeadAllowed = 5

    /// A machine not started yet; `lastError` is the previous run's, shown until a success.
    package init(settings: Settings, lastError: SyncError? = nil) {
        self.settings = settings
        state = .notStarted(FailureStateMachine(policy: settings.policy, mode: settings.mode, lastError: lastError))
    }

    /// The last failure, until the next success (carried over from the previous run).
    package var lastError: SyncError? { state.failure.lastError }

    /// What ``SyncStatus/down`` shows for the state: `idle` while long-polling (caught up as of
    /// the last answer), `syncing` while catching up.
    package var phase: SyncStatus.Phase {
        switch state {
        case .notStarted: .stopped
        case .fetching(_, let wait, _): wait > 0 ? .idle : .syncing
        case .applying(_, let quiet, _): quiet ? .idle : .syncing
        case .recovering(_, let failure): failure.phase
        case .feedBehindHead: .syncing
        case .finished(let outcome, _): outcome.phase
        }
    }

    /// How the driver performs `action`.
    package static func step(_ action: Action) -> DirectionStep<Work> {
        switch action {
        case .fetch(let after, let limit, let wait): .perform(.fetch(after: after, limit: limit, wait: wait))
        case .apply(let page, let after): .perform(.apply(page, after: after))
        case .sleep(let delay): .sleep(delay)
        case .refreshToken: .refreshToken
        case .finish(let outcome): .finish(outcome)
        }
    }

    // MARK: - Events

    /// Starts from the stored down cursor.
    package mutating func start(after cursor: UInt64) -> Action {
        guard case .notStarted(let failure) = state else { return invalid("start") }
        return fetch(after: cursor, wait: 0, failure)
    }

    /// The server's answer.
    package mutating func fetched(_ page: SyncWire.DownResponse) -> Action {
        guard case .fetching(let after, let wait, var failure) = state else { return invalid("fetched") }
        failure.succeeded()
        state = .applying(after: after, quiet: wait > 0 && page.changes.isEmpty, failure)
        return .apply(page, after: after)
    }

    /// The answer was appended; `cursor` is the down cursor now (0 again after a change of
    /// user), `head` the feed's head the answer reported.
    package mutating func applied(cursor: UInt64, head: UInt64) -> Action {
        guard case .applying(let after, _, let failure) = state else { return invalid("applied") }
        if cursor == after, cursor < head {
            // Nothing after the cursor, yet the head is beyond it: a server whose head and entries
            // came from two reads (a commit between them) — ask again soon; a server that keeps
            // answering so is broken, and asking it again at once would spin.
            emptyBelowHead += 1
            guard emptyBelowHead <= Self.emptyBelowHeadAllowed else {
                emptyBelowHead = 0
                return decide(.protocolViolation("the feed's head is \(head) but the server returned no entry after \(after), \(Self.emptyBelowHeadAllowed + 1) times in a row"), after: after, failure)
            }
            state = .feedBehindHead(after: after, failure)
            return .sleep(.milliseconds(50 * emptyBelowHead))
        }
        emptyBelowHead = 0
        guard cursor < head else {
            switch settings.mode {
            case .continuous: return fetch(after: cursor, wait: settings.longPollSeconds, failure)
            case .once:
                state = .finished(.caughtUp, failure)
                return .finish(.caughtUp)
            }
        }
        return fetch(after: cursor, wait: 0, failure)
    }

    /// The fetch, the append or the token refresh failed.
    package mutating func failed(_ error: SyncError) -> Action {
        switch state {
        case .fetching(let after, _, let failure), .applying(let after, _, let failure):
            return decide(error, after: after, failure)
        case .recovering(let after, let failure), .feedBehindHead(let after, let failure):
            return decide(error, after: after, failure)  // a failed token refresh; refused while backing off
        case .notStarted, .finished:
            return invalid("failed(\(error))")
        }
    }

    /// The pause after a failure, or after an answer empty below its head, ended: fetch again
    /// (without waiting: the lag is unknown).
    package mutating func slept() -> Action {
        switch state {
        case .recovering(let after, var failure) where failure.slept():
            return fetch(after: after, wait: 0, failure)
        case .feedBehindHead(let after, let failure):
            return fetch(after: after, wait: 0, failure)
        default:
            return invalid("slept")
        }
    }

    /// The token provider gave a new token: fetch again at once.
    package mutating func tokenRefreshed() -> Action {
        guard case .recovering(let after, var failure) = state, failure.tokenRefreshed() else { return invalid("tokenRefreshed") }
        return fetch(after: after, wait: 0, failure)
    }

    /// The task was cancelled: stop, not a failure (an answer not yet appended is fetched again
    /// next time; the keys make a replay change nothing).
    package mutating func cancelled() -> Action {
        if case .finished(let outcome, _) = state { return .finish(outcome) }
        state = .finished(.cancelled, state.failure)
        return .finish(.cancelled)
    }

    // MARK: - Internals

    /// Fetches the feed after `after`, waiting up to `wait` seconds on the server.
    mutating func fetch(after: UInt64, wait: Int, _ failure: FailureStateMachine) -> Action {
        state = .fetching(after: after, wait: wait, failure)
        return .fetch(after: after, limit: settings.pageSize, wait: wait)
    }

    /// Hands `error` to the failure sub-machine and performs what it decides: recover, then
    /// fetch after `after` again, or finish.
    mutating func decide(_ error: SyncError, after: UInt64, _ failure: FailureStateMachine) -> Action {
        var failure = failure
        switch failure.failed(error) {
        case .sleep(let delay)?:
            state = .recovering(after: after, failure)
            return .sleep(delay)
        case .refreshToken?:
            state = .recovering(after: after, failure)
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
        assertionFailure("DownStateMachine: \(event) in \(state)")
        let error = SyncError.protocolViolation("internal: the down direction got \(event) while \(state)")
        state = .finished(.stopped(error), state.failure)
        return .finish(.stopped(error))
    }
}
