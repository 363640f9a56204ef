/// The one retry policy of both directions (docs/sync.md, "Failure modes"): what a direction
/// does after a failure, decided from the error alone and the failures since the last success
/// (which ``FailureStateMachine``, the sub-machine both directions' states carry, counts).
///
/// | error | decision |
/// |---|---|
/// | `.offline`, `.server` (5xx), a 408 or 429, a transient ledger condition | retry after `initialBackoff × 2^failures`, at most `maxBackoff` |
/// | `.unauthorized` (401) | refresh the token once (with a token provider), then stop |
/// | `.forbidden`, `.rejected` (4xx), `.gap` | stop: the same request would be refused again |
/// | `.eventRefused` the up direction could not skip (not an event of the part sent) | stop |
/// | `.protocolViolation`, `.ledger`, `.stateFile` | retry after `maxBackoff` (a proxy's page, a full disk: may pass) |
/// | `.cancelled` | cancel: not a failure |
package struct RetryPolicy: Hashable, Sendable {
    /// The first retry's delay.
    package var initialBackoff: Duration
    /// The longest delay.
    package var maxBackoff: Duration
    /// Whether a token provider can be asked for a new token after a 401.
    package var canRefreshToken: Bool

    package init(initialBackoff: Duration, maxBackoff: Duration, canRefreshToken: Bool) {
        self.initialBackoff = initialBackoff
        self.maxBackoff = maxBackoff
        self.canRefreshToken = canRefreshToken
    }

    /// What to do after a failure.
    package enum Decision: Hashable, Sendable {
        /// Try the same step again after this delay (the driver adds ±25 % jitter).
        case retry(after: Duration)
        /// Ask the token provider for a new token, then try the same step again at once.
        case refreshToken
        /// Give up: the direction stops, `failed` (or `offline`), until the next run.
        case stop
        /// The task was cancelled: the direction stops, and it is not a failure.
        case cancel
    }

    /// The decision after `error`, the `failures`-th consecutive failure (0: the first since a
    /// success); `refreshedToken`: whether the token was refreshed since the last success.
    package func decision(after error: SyncError, failures: Int, refreshedToken: Bool) -> Decision {
        switch error {
        case .cancelled:
            return .cancel
        case .unauthorized:
            return canRefreshToken && !refreshedToken ? .refreshToken : .stop
        case .forbidden, .gap, .eventRefused:
            return .stop
        case .rejected:
            return error.isRetryable ? .retry(after: backoff(failures: failures)) : .stop
        case .offline, .server:
            return .retry(after: backoff(failures: failures))
        case .ledger:
            return .retry(after: error.isRetryable ? backoff(failures: failures) : maxBackoff)
        case .protocolViolation, .stateFile:
            return .retry(after: maxBackoff)
        }
    }

    /// `initialBackoff × 2^failures`, at most `maxBackoff`.
    package func backoff(failures: Int) -> Duration {
        var delay = initialBackoff
        for _ in 0..<min(failures, 62) {
            delay *= 2
            if delay >= maxBackoff { return maxBackoff }
        }
        return min(delay, maxBackoff)
    }
}
