/// The failure bookkeeping of a direction, as a sub-machine that every state of
/// ``UpStateMachine`` and ``DownStateMachine`` carries (postgres-nio's connection states carry
/// theirs the same way): the consecutive failures since the last success, whether the token
/// was refreshed since, the last error the status shows, and — through the one
/// ``RetryPolicy`` — what a failure leads to. Pure: no I/O, no clock.
///
/// ```
/// trying ── failed ──▶ backingOff ── slept ──▶ trying
///        ── failed ──▶ refreshingToken ── tokenRefreshed ──▶ trying
///                                      ── failed ──▶ (as from trying)
///        ── failed ──▶ finished (the policy gave up, or the failure was a cancellation)
/// succeeded: the failures, the refresh and the error are forgotten
/// ```
///
/// A direction reports each failure of its step with ``failed(_:)`` and performs the
/// ``Action`` returned; on a success it calls ``succeeded()``.
package struct FailureStateMachine: Hashable, Sendable {
    /// What a failure leads to.
    package enum Action: Hashable, Sendable {
        /// Pause (the driver adds ± 25 % jitter) → ``slept()``, then the same step again.
        case sleep(Duration)
        /// Ask the token provider for a new token → ``tokenRefreshed()`` (or ``failed(_:)``),
        /// then the same step again at once.
        case refreshToken
        /// Stop: the direction's run is over.
        case finish(DirectionOutcome)
    }

    /// Where the sub-machine is.
    enum State: Hashable, Sendable {
        /// A step is in progress (no failure pending).
        case trying
        /// Pausing after `error` before the step is tried again.
        case backingOff(SyncError)
        /// Waiting for the token provider after a 401.
        case refreshingToken
        /// The policy ended the run.
        case finished(DirectionOutcome)
    }

    /// What decides after a failure.
    package let policy: RetryPolicy
    /// `once` gives up where `continuous` would retry.
    package let mode: DirectionMode
    /// Where the sub-machine is.
    private(set) var state = State.trying
    /// The last failure, until the next success (carried over from the previous run).
    package private(set) var lastError: SyncError?
    /// Consecutive failures since the last success (a token refresh is not counted).
    package private(set) var failures = 0
    /// Whether the token was refreshed since the last success (once is enough).
    package private(set) var refreshedToken = false

    /// A sub-machine trying its first step; `lastError` is the previous run's, shown until the
    /// first success.
    package init(policy: RetryPolicy, mode: DirectionMode, lastError: SyncError? = nil) {
        self.policy = policy
        self.mode = mode
        self.lastError = lastError
    }

    /// What the status shows while the direction recovers: `offline` or `failed` (by the
    /// error) while backing off, `syncing` while the token is refreshed (or a step is tried),
    /// the outcome's phase once finished.
    package var phase: SyncStatus.Phase {
        switch state {
        case .trying, .refreshingToken: .syncing
        case .backingOff(let error): Self.phase(after: error)
        case .finished(let outcome): outcome.phase
        }
    }

    /// The phase a failure with `error` shows: `offline` if time may clear it, else `failed`.
    package static func phase(after error: SyncError) -> SyncStatus.Phase {
        error.isRetryable ? .offline : .failed
    }

    // MARK: - Events

    /// The step in progress succeeded: the failures, the token refresh and the error are over.
    package mutating func succeeded() {
        lastError = nil
        failures = 0
        refreshedToken = false
    }

    /// The step in progress (or the token refresh) failed with `error`: what the policy
    /// decides, with the backoff grown by the failures since the last success. A retry only
    /// in `continuous` mode; `once` gives up instead. Nil while backing off or finished: no
    /// step is in progress then (a bug of the driver; the direction stops).
    package mutating func failed(_ error: SyncError) -> Action? {
        switch state {
        case .trying, .refreshingToken: break
        case .backingOff, .finished: return nil
        }
        switch policy.decision(after: error, failures: failures, refreshedToken: refreshedToken) {
        case .cancel:
            // Not a failure: the error shown stays the last real one.
            state = .finished(.cancelled)
            return .finish(.cancelled)
        case .refreshToken:
            // Not shown: the provider is asked to fix it, and only a refresh that fails is an
            // error (a status saying "unauthorized" for the milliseconds of a refresh would
            // show "Sign in again" for nothing, issue 40).
            refreshedToken = true
            state = .refreshingToken
            return .refreshToken
        case .retry(let delay) where mode == .continuous:
            lastError = error
            failures += 1
            state = .backingOff(error)
            return .sleep(delay)
        case .retry, .stop:
            lastError = error
            state = .finished(.stopped(error))
            return .finish(.stopped(error))
        }
    }

    /// The pause ended: the step is tried again. False if the sub-machine was not backing off.
    package mutating func slept() -> Bool {
        guard case .backingOff = state else { return false }
        state = .trying
        return true
    }

    /// The token provider gave a new token: the step is tried again. False if no refresh was
    /// asked for.
    package mutating func tokenRefreshed() -> Bool {
        guard case .refreshingToken = state else { return false }
        state = .trying
        return true
    }
}
