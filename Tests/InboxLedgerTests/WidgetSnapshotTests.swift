import Foundation
import Synchronization
import Testing
import TestSupport
@testable import InboxLedger

/// `ledger widget` shows the list, its counts and the pending actions: from one snapshot, so
/// that they agree while other processes append.
@Suite struct WidgetSnapshotTests {
    @Test func theListAndItsActionsAreReadInOneTransaction() throws {
        let t = try TestLedger(role: "widget")
        try t.ledger.append(.inboxSynced(InboxSync(mode: .delta, messages: [InboxMessage(id: "m1", title: "Hello", sentAt: Timestamp(micros: 1_000_000))])))
        try t.ledger.append(.widgetAction(WidgetAction(actionID: "a1", kind: .markRead, target: "m1")))
        let before = t.ledger.store.readTransactions
        let (list, actions) = try t.ledger.read { s in (try s.widgetList(limit: 5), try s.pendingActions(limit: 1000)) }
        #expect(t.ledger.store.readTransactions - before == 1, "the widget's list and its actions came from more than one snapshot")
        #expect(list.pendingActions == actions.count && actions.map(\.actionID) == ["a1"])
        #expect(list.items.map(\.id) == ["m1"])
    }

    /// While another handle records actions, every snapshot's pending count is the number of
    /// actions it lists (two snapshots would disagree whenever an append fell between them).
    @Test func theCountsAgreeWithTheActionsWhileAnotherHandleAppends() throws {
        let t = try TestLedger(role: "widget")
        try t.ledger.append(.inboxSynced(InboxSync(mode: .delta, messages: [InboxMessage(id: "m1", title: "Hello", sentAt: Timestamp(micros: 1_000_000))])))
        let writer = try Ledger(path: t.path, options: { var o = LedgerOptions(role: "app"); o.durability = .none; return o }())
        let done = Atomic<Bool>(false)
        let thread = Thread {
            for i in 0..<400 { _ = try? writer.append(.widgetAction(WidgetAction(actionID: "a\(i)", kind: .markRead, target: "m1"))) }
            done.store(true, ordering: .releasing)
        }
        thread.start()
        var reads = 0
        while !done.load(ordering: .acquiring) || reads == 0 {
            let (list, actions) = try t.ledger.read { s in (try s.widgetList(limit: 1), try s.pendingActions(limit: 1000)) }
            #expect(list.pendingActions == actions.count, "read \(reads): the list counts \(list.pendingActions) actions, the snapshot lists \(actions.count)")
            reads += 1
        }
        #expect(try t.ledger.read({ try $0.pendingActions(limit: 1000) }).count == 400)
    }
}
