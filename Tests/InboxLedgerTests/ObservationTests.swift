import Foundation
import Synchronization
import Testing
import TestSupport
@testable import InboxLedger

/// Observed values: the current value at once, then each distinct new value after commits of
/// any process, bursts coalesced for a slow consumer, ending cleanly on cancellation.
@Suite(.serialized) struct ObservationTests {
    let agent = Processes.product("LedgerTestAgent")

    @Test(.timeLimit(.minutes(10))) func anotherProcessesSyncReachesTheObservedWidgetList() async throws {
        let t = try TestLedger(role: "widget")
        var updates = LedgerObservation.tracking({ try $0.widgetList(limit: 5) }).values(in: t.ledger).makeAsyncIterator()
        let initial = try #require(try await updates.next())
        #expect(initial.items.isEmpty)
        let started = Date()
        #expect(try Processes.run(agent, ["sync-message", t.path, "m1", "Hello from the extension"]).status == 0)
        let next = try #require(try await updates.next())
        let latency = Date().timeIntervalSince(started)
        #expect(next.items.map(\.title) == ["Hello from the extension"])
        #expect(next.badge == 1)
        print("observed another process's commit \(Int(latency * 1000)) ms after starting it (process start included)")
        // Another process's change that does not alter the list (a custom event) yields nothing;
        // the next real change does.
        #expect(try Processes.run(agent, ["append-key", t.path, "k1", "{}"]).status == 0)
        #expect(try Processes.run(agent, ["sync-message", t.path, "m2", "Second"]).status == 0)
        let third = try #require(try await updates.next())
        #expect(Set(third.items.map(\.id)) == ["m1", "m2"])
    }

    @Test(.timeLimit(.minutes(10))) func aBurstOfCommitsIsCoalescedAndEndsAtTheFinalValue() async throws {
        let t = try TestLedger(role: "app")
        let burst = 1000
        let seen = Mutex<[Int]>([])
        let observer = Task {
            for try await badge in LedgerObservation.tracking({ try $0.badge() }).values(in: t.ledger) {
                seen.withLock { $0.append(badge) }
                if badge == burst { return }
                try await Task.sleep(for: .milliseconds(20))  // a consumer slower than the commits
            }
        }
        // Wait for the initial value before the burst starts.
        while seen.withLock({ $0.isEmpty }) { try await Task.sleep(for: .milliseconds(5)) }
        let writer = try Processes.start(agent, ["badge-burst", t.path, String(burst)])
        #expect(try writer.wait().status == 0)
        try await observer.value
        let values = seen.withLock { $0 }
        #expect(values.first == 0 && values.last == burst)
        #expect(values.count < burst / 4, "\(values.count) values for \(burst) commits: not coalesced")
        #expect(zip(values, values.dropFirst()).allSatisfy { $0 < $1 }, "a value repeated or went back: \(values)")
        print("\(burst) commits by another process observed as \(values.count) values")
    }

    @Test(.timeLimit(.minutes(10))) func pendingActionsAreObservedAndCancellationEndsTheSequence() async throws {
        let t = try TestLedger(role: "app")
        let stream = LedgerObservation.tracking({ try $0.pendingActions() }).values(in: t.ledger)
        let received = Mutex<[[String]]>([])
        let observer = Task {
            for try await actions in stream { received.withLock { $0.append(actions.map(\.actionID)) } }
            return "ended"
        }
        while received.withLock({ $0.isEmpty }) { try await Task.sleep(for: .milliseconds(5)) }
        try await t.ledger.append(.widgetAction(WidgetAction(actionID: "a1", kind: .custom, name: "refresh")))
        while received.withLock({ $0.count < 2 }) { try await Task.sleep(for: .milliseconds(5)) }
        observer.cancel()
        #expect(try await observer.value == "ended", "cancellation did not end the sequence cleanly")
        #expect(received.withLock { $0 } == [[], ["a1"]])
    }

    /// A shown message's expiry refreshes the list with no event. The message must still be
    /// shown when the first value is read: on a machine too busy to read it within the expiry
    /// window, the test tries again with a window ten times longer (0.3 s, 3 s, 30 s).
    @Test(.timeLimit(.minutes(10))) func anExpiringMessageUpdatesTheListWithoutAnEvent() async throws {
        for (attempt, window) in [300_000, 3_000_000, 30_000_000].enumerated() {
            let t = try TestLedger(role: "app")
            let now = Timestamp.now
            try await t.ledger.append(.inboxSynced(InboxSync(mode: .delta, messages: [
                InboxMessage(id: "flash", title: "Flash sale", sentAt: now, expiresAt: Timestamp(micros: now.micros + Int64(window))),
            ])))
            var updates = LedgerObservation.tracking({ try $0.widgetList() }).values(in: t.ledger).makeAsyncIterator()
            let first = try await updates.next()?.items.map(\.id)
            if first == [], attempt < 2 { continue }  // expired before it could be read: a longer window
            #expect(first == ["flash"])
            #expect(try await updates.next()?.items.isEmpty == true, "the expiry did not refresh the list")
            return
        }
    }
}
