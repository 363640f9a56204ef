import InboxLedgerSync
import Testing

/// The failure sub-machine both directions' states carry, alone: failures fed to it, the
/// actions it returns and the status it shows checked one by one (no I/O, no clock).
@Suite struct FailureStateMachineTests {
    /// The policy of ``StateMachineTests``: 0.2 s doubling up to 30 s, no token provider.
    static let policy = StateMachineTests.policy

    /// A sub-machine for `policy` (with a token provider if `canRefreshToken`) in `mode`.
    static func machine(_ mode: DirectionMode = .continuous, canRefreshToken: Bool = false, lastError: SyncError? = nil) -> FailureStateMachine {
        var policy = Self.policy
        policy.canRefreshToken = canRefreshToken
        return FailureStateMachine(policy: policy, mode: mode, lastError: lastError)
    }

    @Test func theBackoffDoublesWithEachConsecutiveFailureUpToTheLongest() {
        var m = Self.machine()
        #expect(m.failures == 0 && m.lastError == nil && m.phase == .syncing)
        let expected: [Duration] = [.milliseconds(200), .milliseconds(400), .milliseconds(800), .milliseconds(1600), .milliseconds(3200),
                                    .milliseconds(6400), .milliseconds(12_800), .milliseconds(25_600), .seconds(30), .seconds(30)]
        for (index, delay) in expected.enumerated() {
            let error = SyncError.server(status: 500 + index, message: "failure \(index)")
            #expect(m.failed(error) == .sleep(delay))
            #expect(m.failures == index + 1 && m.lastError == error)
            #expect(m.phase == .offline, "backing off after a failure time may clear")
            let resumed = m.slept()
            #expect(resumed)
            #expect(m.phase == .syncing && m.lastError == error, "trying again: the error stays until a success")
        }
    }

    @Test func aSuccessForgetsTheFailuresTheRefreshAndTheError() {
        var m = Self.machine(canRefreshToken: true)
        for _ in 0..<3 {
            _ = m.failed(.server(status: 503, message: "db down"))
            _ = m.slept()
        }
        #expect(m.failed(.unauthorized("expired")) == .refreshToken)
        let refreshed = m.tokenRefreshed()
        #expect(refreshed)
        #expect(m.failures == 3 && m.refreshedToken && m.lastError == .server(status: 503, message: "db down"), "a 401 being refreshed is not shown")
        m.succeeded()
        #expect(m.failures == 0 && !m.refreshedToken && m.lastError == nil)
        #expect(m.failed(.server(status: 503, message: "db down")) == .sleep(.milliseconds(200)), "the backoff starts over")
        _ = m.slept()
        #expect(m.failed(.unauthorized("expired again")) == .refreshToken, "the token may be refreshed again")
    }

    @Test func theDelayIsThePolicysForTheErrorAndThePhaseSaysWhetherTimeMayClearIt() {
        // A transient ledger condition and a 429 grow like an outage, shown `offline`.
        var m = Self.machine()
        #expect(m.failed(.ledger(.suspended)) == .sleep(.milliseconds(200)))
        #expect(m.phase == .offline)
        _ = m.slept()
        #expect(m.failed(.rejected(status: 429, code: "slow_down", message: "")) == .sleep(.milliseconds(400)))
        #expect(m.phase == .offline)
        // A broken answer, a failing disk, a lasting ledger failure: the longest delay at once, shown `failed`.
        for error in [SyncError.protocolViolation("html"), .stateFile(path: "/s", reason: "full"), .ledger(.storeFull(path: "/x", reason: "full"))] {
            var n = Self.machine()
            #expect(n.failed(error) == .sleep(.seconds(30)))
            #expect(n.phase == .failed && n.failures == 1 && n.lastError == error)
        }
    }

    @Test func aFailureTheSameRequestWouldMeetAgainFinishesAndKeepsItsError() {
        let permanent: [SyncError] = [.rejected(status: 400, code: "bad_request", message: "NUL"), .rejected(status: 413, code: "too_large", message: ""),
                                      .forbidden("bob's"), .gap(serverAcked: 3, deviceCursor: 9), .unauthorized("no provider")]
        for error in permanent {
            var m = Self.machine()
            _ = m.failed(.offline("refused"))
            _ = m.slept()
            #expect(m.failed(error) == .finish(.stopped(error)))
            #expect(m.phase == .failed && m.lastError == error)
            #expect(m.failures == 1, "a permanent failure is not counted towards a backoff")
            // Finished: nothing more is expected.
            #expect(m.failed(.offline("refused")) == nil)
            let slept = m.slept(), refreshed = m.tokenRefreshed()
            #expect(!slept && !refreshed)
            #expect(m.phase == .failed && m.lastError == error)
        }
    }

    @Test func onceGivesUpWhereContinuousRetries() {
        var m = Self.machine(.once)
        #expect(m.failed(.offline("timed out")) == .finish(.stopped(.offline("timed out"))))
        #expect(m.phase == .offline && m.lastError == .offline("timed out") && m.failures == 0)
        var refresh = Self.machine(.once, canRefreshToken: true)
        #expect(refresh.failed(.unauthorized("expired")) == .refreshToken, "a 401 is refreshed once in `once` mode too")
    }

    @Test func aTokenIsRefreshedOnceAndAFailedRefreshIsDecidedLikeAnyFailure() {
        var m = Self.machine(canRefreshToken: true)
        #expect(m.failed(.unauthorized("expired")) == .refreshToken)
        #expect(m.phase == .syncing && m.failures == 0 && m.refreshedToken && m.lastError == nil, "a 401 being refreshed is not shown")
        // The provider failed: refused again, so the direction stops.
        #expect(m.failed(.unauthorized("the token provider failed: offline")) == .finish(.stopped(.unauthorized("the token provider failed: offline"))))
        #expect(m.phase == .failed)
        // The new token is refused too: the same.
        var n = Self.machine(canRefreshToken: true)
        _ = n.failed(.unauthorized("expired"))
        let refreshed = n.tokenRefreshed()
        #expect(refreshed)
        #expect(n.failed(.unauthorized("still expired")) == .finish(.stopped(.unauthorized("still expired"))))
        // Without a token provider: stop at once.
        var o = Self.machine()
        #expect(o.failed(.unauthorized("expired")) == .finish(.stopped(.unauthorized("expired"))))
    }

    @Test func aCancellationIsNotAFailure() {
        var m = Self.machine()
        #expect(m.failed(.cancelled) == .finish(.cancelled))
        #expect(m.phase == .stopped && m.lastError == nil && m.failures == 0)
        // After a failure, the error shown stays the real one.
        var n = Self.machine()
        _ = n.failed(.offline("refused"))
        _ = n.slept()
        #expect(n.failed(.cancelled) == .finish(.cancelled))
        #expect(n.phase == .stopped && n.lastError == .offline("refused") && n.failures == 1)
        // A refresh cancelled with its task: the same.
        var o = Self.machine(canRefreshToken: true)
        _ = o.failed(.unauthorized("expired"))
        #expect(o.failed(.cancelled) == .finish(.cancelled))
        #expect(o.lastError == nil, "the 401 was being refreshed: never shown")
    }

    @Test func thePreviousRunsErrorStaysUntilASuccessAndDoesNotGrowTheBackoff() {
        var m = Self.machine(lastError: .unauthorized("expired"))
        #expect(m.lastError == .unauthorized("expired") && m.failures == 0 && m.phase == .syncing)
        #expect(m.failed(.offline("refused")) == .sleep(.milliseconds(200)))
        var n = Self.machine(lastError: .unauthorized("expired"))
        n.succeeded()
        #expect(n.lastError == nil)
    }

    @Test func eventsOutOfTurnAreRefused() {
        var m = Self.machine(canRefreshToken: true)
        var slept = m.slept(), refreshed = m.tokenRefreshed()
        #expect(!slept && !refreshed, "nothing to resume while trying")
        _ = m.failed(.offline("refused"))
        refreshed = m.tokenRefreshed()
        #expect(!refreshed, "no refresh was asked for")
        #expect(m.failed(.offline("again")) == nil, "no step is in progress while backing off")
        #expect(m.failures == 1 && m.lastError == .offline("refused") && m.phase == .offline)
        slept = m.slept()
        #expect(slept)
        slept = m.slept()
        #expect(!slept, "already resumed")
        _ = m.failed(.unauthorized("expired"))
        slept = m.slept()
        #expect(!slept, "refreshing, not backing off")
    }
}
