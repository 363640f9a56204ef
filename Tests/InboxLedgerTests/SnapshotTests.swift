import Foundation
import Testing
import TestSupport
@testable import InboxLedger

/// The read primitive (docs/reference.md, "`LedgerSnapshot`"): one transaction per `read`,
/// however many values it takes; a snapshot kept past its closure refuses instead of touching
/// a closed transaction; errors stay typed; the async form ends with cancellation.
@Suite struct SnapshotTests {
    @Test func everyReadOfOneSnapshotIsOneTransaction() throws {
        let t = try TestLedger()
        try t.ledger.append(.inboxSynced(InboxSync(mode: .delta, messages: [InboxMessage(id: "m1", title: "Hi", sentAt: Timestamp(micros: 1))])))
        try t.ledger.append(event("custom.one"))
        let before = t.ledger.store.readTransactions
        let (head, first, count, events, list, message) = try t.ledger.read { s in
            (try s.head(), try s.firstSequence(), try s.count(), try s.events(after: 0), try s.widgetList(limit: 5), try s.message(id: "m1"))
        }
        #expect(t.ledger.store.readTransactions - before == 1)
        #expect(head == 2 && first == 1 && count == 2 && events.map(\.sequence) == [1, 2])
        #expect(list.items.map(\.id) == ["m1"] && message?.id == "m1")
    }

    @Test func aSnapshotKeptPastItsReadRefuses() throws {
        let t = try TestLedger()
        try t.ledger.append(event())
        let kept = try t.ledger.read { $0 }
        #expect(throws: LedgerError.self) { try kept.head() }
        do {
            _ = try kept.events(after: 0)
            Issue.record("a snapshot read after its transaction ended")
        } catch {
            guard case .invalidArgument(let name, _) = error else { Issue.record("\(error)"); return }
            #expect(name == "snapshot")
        }
        // The handle itself is unharmed.
        #expect(try t.ledger.read { try $0.head() } == 1)
    }

    @Test func anErrorOfTheClosureArrivesTyped() throws {
        struct Mine: Error {}
        let t = try TestLedger()
        do {
            _ = try t.ledger.read { _ in throw Mine() }
            Issue.record("the closure's error was lost")
        } catch {
            guard case .unexpected(_, "read", let reason) = error else { Issue.record("\(error)"); return }
            #expect(reason.contains("Mine"))
        }
        // A ledger error the closure throws arrives as itself.
        #expect(throws: LedgerError.headMoved(expected: 1, actual: 2)) {
            try t.ledger.read { _ in throw LedgerError.headMoved(expected: 1, actual: 2) }
        }
    }

    @Test func theAsyncReadIsTheSameSnapshotAndEndsWithCancellation() async throws {
        let t = try TestLedger()
        try t.ledger.append(event())
        let (head, events) = try await t.ledger.read { s in (try s.head(), try s.events(after: 0)) }
        #expect(head == 1 && events.count == 1)
        let ledger = t.ledger
        let cancelled = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await ledger.read { try $0.head() }
        }
        await #expect(throws: LedgerError.cancelled) { try await cancelled.value }
    }

    @Test func anObservationReadsOneSnapshotPerValue() async throws {
        let t = try TestLedger()
        let ledger = t.ledger
        let observation = LedgerObservation.tracking { s in try s.head() == 0 ? [] : try s.events(after: 0).map(\.sequence) }
        var iterator = observation.values(in: ledger).makeAsyncIterator()
        #expect(try await iterator.next() == [])
        try ledger.append(event())
        #expect(try await iterator.next() == [1])
        try ledger.append(contentsOf: [event(), event()])
        #expect(try await iterator.next() == [1, 2, 3])
    }
}
