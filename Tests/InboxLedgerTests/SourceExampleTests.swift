import Testing
import InboxLedger

@Test func badgeCountsUnreadMessages() throws {
    let ledger = try Ledger.temporary()
    try ledger.append(.badgeAdjusted(.delta(2)))
    #expect(try ledger.read { try $0.badge() } == 2)
}

// The `///` examples of Sources that are tests (TemporaryLedger.swift's above, its imports
// included, and LedgerOptions.swift's below), run here as written.

@Test func aManualClockMovesOnlyWhenAdvanced() {
    let clock = ManualClock(Timestamp(micros: 0))
    clock.advance(seconds: 90)
    #expect(clock.now == Timestamp(micros: 90_000_000))
}
