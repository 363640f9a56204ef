/// How a direction's machine runs: `continuous` (``SyncClient/run()``): wait for appends or
/// long-poll, retry with backoff; `once` (``SyncClient/syncOnce()``): stop when caught up or
/// at the first failure the policy would retry.
package enum DirectionMode: Hashable, Sendable {
    /// Until cancelled: wait for more, retry with backoff.
    case continuous
    /// Until caught up, or until the first failure.
    case once
}

/// How a direction's machine ended.
package enum DirectionOutcome: Hashable, Sendable {
    /// Everything there was went through (`once` only).
    case caughtUp
    /// The task was cancelled.
    case cancelled
    /// The policy gave up on this error.
    case stopped(SyncError)

    /// What the status shows for a direction that ended so: `stopped`, or — after a failure —
    /// `offline` or `failed` as ``FailureStateMachine/phase(after:)`` says.
    package var phase: SyncStatus.Phase {
        switch self {
        case .caughtUp, .cancelled: .stopped
        case .stopped(let error): FailureStateMachine.phase(after: error)
        }
    }
}

/// An action of a direction's machine as ``SyncClient``'s one driver loop dispatches it: the
/// pause, the token refresh and the end are performed alike for both directions; the rest is
/// the direction's own work.
package enum DirectionStep<Work: Sendable>: Sendable {
    /// The direction's own work (read, send, commit, fetch, apply…), then the matching event.
    case perform(Work)
    /// Pause (± 25 % jitter) → ``DirectionStateMachine/slept()``.
    case sleep(Duration)
    /// Ask the token provider for a new token → ``DirectionStateMachine/tokenRefreshed()``.
    case refreshToken
    /// Stop; the run of this direction is over.
    case finish(DirectionOutcome)
}

/// What ``UpStateMachine`` and ``DownStateMachine`` share, so that one driver loop
/// (``SyncClient``'s `drive`) performs either: the status they show, the events that end a
/// pause, a token refresh or a failed step, cancellation, and how their actions split into
/// the shared ones and the direction's own ``Work``. Both hold their failure bookkeeping in
/// one ``FailureStateMachine`` that their states carry.
package protocol DirectionStateMachine: Sendable {
    /// The actions the machine returns.
    associatedtype Action: Hashable, Sendable
    /// The actions only this direction has, which its part of the driver performs.
    associatedtype Work: Sendable

    /// What the direction's ``SyncStatus/Direction/phase`` shows now.
    var phase: SyncStatus.Phase { get }
    /// The last failure, until the next success (carried over from the previous run).
    var lastError: SyncError? { get }

    /// The step in progress failed.
    mutating func failed(_ error: SyncError) -> Action
    /// The pause after a failure ended.
    mutating func slept() -> Action
    /// The token provider gave a new token.
    mutating func tokenRefreshed() -> Action
    /// The task was cancelled: stop, not a failure.
    mutating func cancelled() -> Action

    /// How the driver performs `action`.
    static func step(_ action: Action) -> DirectionStep<Work>
}
