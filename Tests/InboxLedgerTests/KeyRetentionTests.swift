import Foundation
import Testing
import TestSupport
@_spi(Testing) @testable import InboxLedger

/// Issue 22 item 11: an idempotency key's retention must not depend on one writer's clock.
@Suite struct KeyRetentionTests {
    static let day = 86_400.0
    static let start = Timestamp(iso8601: "2026-11-22T08:00:00Z")!

    /// Two handles on one ledger, each with its own injected clock (as two processes would stamp).
    struct SkewedWriters {
        let directory = TemporaryDirectory()
        let trueClock = ManualClock(KeyRetentionTests.start)
        let laggingClock: ManualClock
        let onTime: Ledger
        let lagging: Ledger

        init(lagBy seconds: Double) throws {
            laggingClock = ManualClock(Timestamp(micros: KeyRetentionTests.start.micros - Int64(seconds * 1_000_000)))
            func options(_ role: String, _ clock: ManualClock) -> LedgerOptions {
                var o = LedgerOptions(role: role)
                o.durability = .none
                o.durabilityFloor = .none
                o.clock = clock.ledgerClock
                return o
            }
            onTime = try Ledger(path: directory.child("ledger"), options: options("app", trueClock))
            lagging = try Ledger(path: directory.child("ledger"), options: options("notification", laggingClock))
        }

        func advance(seconds: Double) {
            trueClock.advance(seconds: seconds)
            laggingClock.advance(seconds: seconds)
        }
    }

    @Test func aKeyStampedByAWriterADayBehindSurvivesTheNextCompactionAndItsRetryIsAReplay() throws {
        let w = try SkewedWriters(lagBy: Self.day)
        let original = try w.lagging.append(.badgeAdjusted(.delta(1)), key: "push-4711")
        try appendMixed(w.onTime, count: 20, seed: 11)
        // The compactor runs on the true clock, an hour's key window: the key's stamp says it is a
        // day old, but its event was trimmed just now.
        let report = try Compactor(ledger: w.onTime, policy: policy(keys: 3600)).runOnce()
        #expect(report.trimmed?.contains(original) == true)
        #expect(try w.onTime.read({ try $0.event(at: original) }) == nil)
        #expect(report.keysForgotten == 0)
        // The notification extension retries a minute later: recognised, nothing appended.
        w.advance(seconds: 60)
        let head = try w.onTime.read({ try $0.head() })
        #expect(try w.lagging.append(.badgeAdjusted(.delta(1)), key: "push-4711") == original)
        #expect(try w.onTime.read({ try $0.head() }) == head)
        #expect(throws: LedgerError.idempotencyConflict(key: "push-4711", existingSequence: original)) {
            try w.lagging.append(.badgeAdjusted(.delta(2)), key: "push-4711")
        }
        // A compaction within the window (by the compactor's clock) keeps it and forgets nothing.
        w.advance(seconds: 1800)
        #expect(try Compactor(ledger: w.onTime, policy: policy(keys: 3600)).runOnce().keysForgotten == 0)
        #expect(try w.lagging.append(.badgeAdjusted(.delta(1)), key: "push-4711") == original)
    }

    @Test func theReportCountsEveryKeyItForgets() throws {
        let w = try SkewedWriters(lagBy: Self.day)
        let lagged = try w.lagging.append(.badgeAdjusted(.delta(1)), key: "lagged")
        let onTime = try w.onTime.append(.badgeAdjusted(.delta(1)), key: "on-time")
        try appendMixed(w.onTime, count: 14, seed: 12)  // keys k12-0 and k12-7 as well
        // Two hours later by both clocks, the events are trimmed: every key is kept an hour more.
        w.advance(seconds: 7200)
        let first = try Compactor(ledger: w.onTime, policy: policy(keys: 3600)).runOnce()
        #expect(first.trimmed == 1...16)
        #expect(first.keysForgotten == 0)
        #expect(try w.onTime.append(.badgeAdjusted(.delta(1)), key: "lagged") == lagged)
        #expect(try w.lagging.append(.badgeAdjusted(.delta(1)), key: "on-time") == onTime)
        // Past the window after the trim: all four are forgotten, and the report says so.
        w.advance(seconds: 3601)
        let second = try Compactor(ledger: w.onTime, policy: policy(keys: 3600)).runOnce()
        #expect(second.keysForgotten == 4)
        #expect(try w.lagging.append(.badgeAdjusted(.delta(1)), key: "lagged") > onTime)
    }

    @Test func aCompactorWhoseLedgerClockIsBehindDoesNotForgetEarlierEither() throws {
        // The compactor runs in the lagging process: the window is judged by its own clock from
        // the trim it made, so the lag cancels out.
        let w = try SkewedWriters(lagBy: Self.day)
        let original = try w.onTime.append(.badgeAdjusted(.delta(1)), key: "push-1")
        try appendMixed(w.onTime, count: 10, seed: 13)
        try Compactor(ledger: w.lagging, policy: policy(keys: 3600)).runOnce()
        w.advance(seconds: 60)
        #expect(try Compactor(ledger: w.lagging, policy: policy(keys: 3600)).runOnce().keysForgotten == 0)
        #expect(try w.onTime.append(.badgeAdjusted(.delta(1)), key: "push-1") == original)
    }
}
