import InboxLedger
import Testing
import TestSupport   // TaskAdded, TaskDone and TaskList as docs/apps.md declares them (and TaskRemoved)

// The tests docs/apps.md shows an app team, run here as they are written.

@Test func anExpiredPromotionLeavesTheWidget() throws {
    let clock = ManualClock(Timestamp(iso8601: "2026-11-22T08:00:00Z")!)
    var options = LedgerOptions(role: "test")
    options.clock = clock.ledgerClock
    let ledger = try Ledger.temporary(options: options)   // removed with its last handle

    try ledger.append(.inboxSynced(InboxSync(mode: .delta, messages: [
        InboxMessage(id: "sale", title: "Sale ends at nine", sentAt: clock.now,
                     expiresAt: Timestamp(iso8601: "2026-11-22T09:00:00Z")!),
    ])))
    #expect(try ledger.read({ try $0.widgetList() }).items.map(\.id) == ["sale"])
    #expect(try ledger.read({ try $0.badge() }) == 1)

    clock.advance(seconds: 3600)   // an hour later, without waiting
    #expect(try ledger.read({ try $0.widgetList() }).items.isEmpty)
    #expect(try ledger.read({ try $0.badge() }) == 0)
}

@Test func aWidgetTapIsQueuedForTheHostApp() async throws {
    let ledger = try Ledger.temporary()
    try await ledger.append(.inboxSynced(InboxSync(mode: .delta, messages: [
        InboxMessage(id: "m1", title: "Hello", sentAt: Timestamp(iso8601: "2026-11-22T08:00:00Z")!),
    ])))
    try await ledger.append(.widgetAction(WidgetAction(actionID: "tap-1", kind: .markRead, target: "m1")))

    #expect(try await ledger.read({ try $0.badge() }) == 0)   // read at once, before the host app runs
    #expect(try await ledger.read({ try $0.pendingActions() }).map(\.kind) == [.markRead])
}

@Test func aTaskTickedInTheWidgetIsDoneAtOnce() throws {
    var options = LedgerOptions(role: "test")
    options.projections = [TaskList.self]
    let ledger = try Ledger.temporary(options: options)

    try ledger.append(TaskAdded(id: "t1", title: "Water the plants", day: 20_000))
    try ledger.append(TaskDone(id: "t1"))   // what the widget's intent appends
    let tasks = try ledger.read({ try $0.projection(TaskList.self).contents() })
    #expect(tasks.rows.map(\.row.done) == [true])
    #expect(tasks.document.open == 0 && tasks.document.done == 1)
}

@Test func aTaskDoneAgainAfterReopeningIsASecondCompletion() throws {
    var options = LedgerOptions(role: "test")
    options.projections = [TaskList.self]
    let ledger = try Ledger.temporary(options: options)

    try ledger.append(TaskAdded(id: "t1", title: "Water the plants", day: 20_000))
    let first = try ledger.append(TaskDone(id: "t1"), key: "done-tap-1")   // a tap, as the widget's intent appends it
    #expect(try ledger.append(TaskDone(id: "t1"), key: "done-tap-1") == first)   // that tap retried: recognised
    try ledger.append(TaskAdded(id: "t1", title: "Water the plants", day: 20_001))   // reopened for tomorrow
    try ledger.append(TaskDone(id: "t1"), key: "done-tap-2")   // the next tap: a completion of its own
    let tasks = try ledger.read({ try $0.projection(TaskList.self).contents() })
    #expect(tasks.rows.map(\.row.done) == [true])
    #expect(tasks.document.open == 0 && tasks.document.done == 1)
    let completions = try ledger.read({ try $0.events() }).filter { $0.baseType == TaskDone.eventType }
    #expect(completions.count == 2)
}
