import Testing
import TestSupport
@testable import InboxLedger

/// Power cuts: the stored durability floor, which keeps one process's `none` from exposing the
/// others' durable events (docs/reliability.md). The crash-state explorer itself, which shows
/// the loss without the floor, is tested with it in Benchmarks (`CrashStateExplorerTests`).
@Suite struct CrashStateTests {
    @Test func theFloorIsStoredAndRaisesWeakerModes() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        var weak = LedgerOptions(role: "ext")
        weak.durability = .none
        let ledger = try Ledger(path: path, options: weak)
        #expect(ledger.metadata.durabilityFloor == .singleSync)
        #expect(ledger.durability == .singleSync)
        try ledger.append(event())
        #expect(ledger.environment.durability == .singleSync, "a `none` request committed without a sync")
        // Another process's options cannot lower a stored floor.
        var other = LedgerOptions(role: "widget")
        other.durability = .none
        other.durabilityFloor = .none
        let reopened = try Ledger(path: path, options: other)
        #expect(reopened.durability == .singleSync)
        // A ledger created with floor `none` allows it (tests, caches).
        var unsafe = LedgerOptions(role: "cache")
        unsafe.durability = .none
        unsafe.durabilityFloor = .none
        let cache = try Ledger(path: dir.child("cache"), options: unsafe)
        #expect(cache.durability == .none && cache.metadata.durabilityFloor == .none)
        // Stronger requests are kept as they are.
        var strong = LedgerOptions(role: "app")
        strong.durability = .durable
        #expect(try Ledger(path: path, options: strong).durability == .durable)
    }
}
