// Every `///` code example of Sources/InboxLedger, compiled (DocumentationTests checks that each
// one is here, verbatim). Each example is the body of a function whose parameters are the
// names it assumes; a value it only shows is used after it, so that nothing warns.

import Foundation
import InboxLedger
#if canImport(SwiftUI)
import SwiftUI
#endif
#if canImport(UserNotifications)
import UserNotifications
#endif

// IdentifierRule.swift
func exampleIdentifierRule() {
    let fine = IdentifierRule.problem("m42")          // nil
    let refused = IdentifierRule.problem("e\u{301}")  // "is not in Unicode Normalization Form C …"
    _ = (fine, refused)
}

// Ledger.swift
func exampleLedger() throws {
    let ledger = try Ledger(path: "/tmp/inbox", options: LedgerOptions(role: "app"))
    try ledger.append(.badgeAdjusted(.delta(1)), key: "push-4711")
    let (head, list) = try ledger.read { snapshot in (try snapshot.head(), try snapshot.widgetList(limit: 5)) }
    print(head, list.badge)
}

func exampleFeatures(_ ledger: Ledger) throws {
    let host = try ledger.consumers.consumer(named: "host-app")
    for info in try ledger.projections.list() { print(info.name, info.version, info.rows) }
    let report = try ledger.maintenance.verify()
    if !report.isHealthy { report.findings.forEach { print($0) } }
    for info in try ledger.consumers.list() { print(info.name, info.cursor, info.lag) }
    let stats = try ledger.maintenance.statistics()
    print(stats.eventCount, stats.fileBytes, stats.warnings)
    for info in try ledger.projections.list() { print(info.name, info.version, info.status, info.rows) }
    try ledger.projections.drop(named: "old-tasks")
    _ = host
}

// LedgerProjections.swift
func exampleBuild(_ ledger: Ledger) throws {
    try ledger.projections.build()   // then every registered projection is ready
}

func exampleBuildAsync(_ ledger: Ledger) {
    Task.detached(priority: .utility) { try await ledger.projections.build() }
}

// LedgerProjection.swift (ProjectionApplyContext)
struct Completions: LedgerProjection {
    struct Row: Codable, Sendable, Equatable { var done: Bool }
    struct UnknownTask: Error { var id: String }
    static let name = "com.example.completions"
    static let version = 1
    static let eventTypes: Set<String> = [TaskDone.eventType]
    static func apply(_ event: Event, to state: inout ProjectionUpdate<Completions>) throws {
        let done = try event.decode(as: TaskDone.self)
        // This process's own completion of an unknown task is refused; another's is skipped.
        if try state.row(done.id) == nil, state.context == .appending { throw UnknownTask(id: done.id) }
        try state.set(Row(done: true), for: done.id)
    }
}

// Ledger.swift (durability of what was read)
func exampleMakeDurable(_ ledger: Ledger, relay: Consumer) throws {
    let batch = try relay.next(limit: 100)
    try ledger.makeDurable()          // before the server learns of these events
    _ = batch
}

// Ledger.swift (suspension)
struct ExampleScenePhaseView: View {
    var scenePhase: ScenePhase
    var body: some View {
        Text("inbox")
            .onChange(of: scenePhase) { _, phase in
                if phase == .background { try? Ledger.suspend() } else if phase == .active { Ledger.resume() }
            }
    }
}

// Domain/LedgerError.swift
func exampleLedgerError(_ ledger: Ledger) throws {
    do {
        try ledger.append(NewEvent(type: "", payload: []))
    } catch {
        print(error)   // a LedgerError: invalid event #0: type: must be 1–128 bytes, got 0
    }
}

// Store/LedgerOptions.swift
func exampleReadOnly(sharedContainer: String) throws {
    var options = LedgerOptions(role: "widget")
    options.readOnly = true
    let ledger = try Ledger(path: sharedContainer + "/inbox", options: options)
    _ = ledger
}

func exampleCreate() {
    var options = LedgerOptions(role: "widget")
    options.create = false   // the host app creates the ledger; the widget only opens it
    _ = options
}

func exampleManualClock() throws {
    let clock = ManualClock(Timestamp(iso8601: "2026-11-22T08:00:00Z")!)
    var options = LedgerOptions(role: "test")
    options.clock = clock.ledgerClock
    let ledger = try Ledger.temporary(options: options)
    clock.advance(seconds: 3600)   // an hour later, without waiting
    _ = ledger
}

// App/Conformances.swift
func exampleTimestampFromDate() {
    let expiry = Timestamp(Date().addingTimeInterval(3600))
    _ = expiry
}

// Ledger+Read.swift and Ledger+Append.swift: the async forms
struct ExampleAsyncAppend {
    let ledger: Ledger

    @MainActor func markAllRead(_ ids: [String]) async throws {
        try await ledger.append(.messageRead(ReadChange(ids: ids, read: true)))
    }
}

@MainActor final class ExampleAsyncRead {
    let ledger: Ledger
    var rows: [WidgetItem] = []
    init(ledger: Ledger) { self.ledger = ledger }

    @MainActor func refresh() async throws {
        rows = try await ledger.read { try $0.widgetList(limit: 5) }.items
    }
}

func exampleAsyncRequest(_ ledger: Ledger) async throws {
    let receipt = try await ledger.append(AppendRequest(.badgeAdjusted(.delta(1)), key: "push-4711"))
    _ = receipt
}

func exampleAsyncConsumer(_ host: Consumer, completions: [NewEvent]) async throws {
    let batch = try await host.next(limit: 50)
    try await host.commit(batch, appending: completions)
}

// App/LedgerObservation.swift
final class ExampleObserver {
    var rows: [WidgetItem] = []

    func observe(_ ledger: Ledger) async throws {
        for try await list in LedgerObservation.tracking({ try $0.widgetList(limit: 5) }).values(in: ledger) {
            rows = list.items          // SwiftUI state, a widget reload, …
        }
    }

    func badges(_ ledger: Ledger) async throws {
        let badge = LedgerObservation.tracking { snapshot in try snapshot.badge() }
        for try await value in badge.values(in: ledger) {
            try await UNUserNotificationCenter.current().setBadgeCount(value)
        }
    }

    func tasks() -> LedgerObservation<ProjectionContents<TaskList>> {
        let tasks = LedgerObservation.tracking { try $0.projection(TaskList.self).contents(limit: 5) }
            .removingDuplicates { $0.sameState(as: $1) }   // whatever the head
        return tasks
    }
}

// App/LedgerEvent.swift
func exampleLedgerEvent(_ ledger: Ledger) throws {
    struct NoteAdded: LedgerEvent {
        static let eventType = "com.example.note-added"
        var noteID: String
        var text: String
    }
    try ledger.append(NoteAdded(noteID: "n1", text: "Buy milk"), key: "note-n1")
    let note = try ledger.read { try $0.events(after: 0) }.first { $0.type == NoteAdded.eventType }?.decode(as: NoteAdded.self)
    _ = note
}

func exampleCanonicalJSON() throws {
    let bytes = try CanonicalJSON.encode(["b": 1, "a": 2])   // {"a":2,"b":1}
    _ = bytes
}

func exampleTypedEvents(_ ledger: Ledger) throws {
    try ledger.append(contentsOf: [try NewEvent(NoteAdded(noteID: "n1", text: "Hi")), try NewEvent(NoteAdded(noteID: "n2", text: "Yo"))])
    try ledger.append(NoteAdded(noteID: "n1", text: "Buy milk"), key: "note-n1")
    for event in try ledger.read({ try $0.events(after: 0) }) where event.baseType == NoteAdded.eventType {
        let note = try event.decode(as: NoteAdded.self)
        print(note.text)
    }
}

enum ExampleUpcasting {
    struct NoteAddedV1: LedgerEvent {
        static let eventType = "com.example.note-added"
        var noteID: String
        var text: String
    }

    struct NoteAdded: LedgerEvent {
        static let eventType = "com.example.note-added"
        static let eventVersion = 2
        var noteID: String
        var body: String
        var pinned: Bool
    }

    static func options() -> LedgerOptions {
        // Version 1 stored {"text": …}; version 2 has {"body": …, "pinned": false}.
        var options = LedgerOptions(role: "app")
        options.upcasters = [
            EventUpcaster(NoteAddedV1.self, to: NoteAdded.self) { old in NoteAdded(noteID: old.noteID, body: old.text, pinned: false) },
        ]
        return options
    }
}

// Ledger+Read.swift (changes)
func exampleWaitForChange(_ ledger: Ledger, refreshWidget: () -> Void) async throws {
    var seen = try await ledger.read { try $0.head() }
    while true {
        seen = try await ledger.waitForChange(after: seen)
        refreshWidget()
    }
}

// Compaction/CompactionPolicy.swift
func exampleCompactionPolicy(_ ledger: Ledger) throws {
    var policy = CompactionPolicy()
    policy.retainedTail = 500
    policy.consumerLeaseSeconds = 3600
    let report = try Compactor(ledger: ledger, policy: policy).runOnce()
    _ = report
}

// Compaction/Compactor.swift
func exampleCompactor(_ ledger: Ledger) throws {
    let compactor = Compactor(ledger: ledger)
    let report = try compactor.runOnce()            // or: try await compactor.run()
    print(report.eventsTrimmed, report.blockers)
}

// Consumers/Consumer.swift
func exampleConsumer(_ ledger: Ledger, completion: (Event) throws -> NewEvent) throws {
    let host = try ledger.consumers.consumer(named: "host-app")
    let batch = try host.next(limit: 100)
    var completions: [NewEvent] = []
    for event in batch.events where event.type == "widget.action" { /* do the work */ completions.append(try completion(event)) }
    try host.commit(batch, appending: completions)
}

// Consumers/ConsumerBatches.swift
func exampleConsumerBatches(_ ledger: Ledger) async throws {
    let host = try await ledger.consumers.consumer(named: "host-app")
    for try await batch in host.batches(limit: 50) {
        var completions: [NewEvent] = []
        for event in batch.events where event.type == BuiltInEventType.widgetAction.rawValue {
            // … carry out the action, then:
            completions.append(try DomainEvent.actionCompleted(ActionCompletion(actionID: "…", outcome: .done)).newEvent())
        }
        try await host.commit(batch, appending: completions)   // waits through a suspension
    }
}

func exampleAsyncConsumerOpening(_ ledger: Ledger) async throws {
    let host = try await ledger.consumers.consumer(named: "host-app")
    _ = host
}

// Domain/DeepLink.swift and Domain/EventNamespace.swift: expressions shown with their values.
@resultBuilder enum ShownValues {
    static func buildExpression<T>(_ value: T) -> [Any] { [value] }
    static func buildBlock(_ parts: [Any]...) -> [Any] { parts.flatMap { $0 } }
}

@ShownValues func exampleDeepLink() -> [Any] {
    let url = DeepLink.message(id: "inbox/42 ✓", scheme: "myapp")  // myapp://message/inbox%2F42%20%E2%9C%93
    DeepLink.messageID(from: url, scheme: "myapp")                 // "inbox/42 ✓"
}

@ShownValues func exampleReservedNames() -> [Any] {
    BuiltInEventType.isReserved("message.archived")        // true: refused as a custom type
    BuiltInEventType.isReserved("Message.Read")            // true
    BuiltInEventType.isReserved("com.example.note-saved")  // false: yours
}

// Domain/DomainEvent.swift
func exampleRemoval(_ ledger: Ledger) throws {
    try ledger.append(.messageRemoved(MessageRemoval(ids: ["m7"])))
}

func examplePush(_ ledger: Ledger, id: String) throws {
    // In the notification service extension; the push's identifier as key.
    try ledger.append(.pushReceived(PushReceived(messageID: "m42", badge: 3)), key: "push-" + id)
}

func exampleBadge(_ ledger: Ledger, list: WidgetList) throws {
    try ledger.append(.badgeAdjusted(.delta(1)), key: "push-4711")
    try ledger.append(.badgeAdjusted(.set(list.unreadCount)))
}

func exampleSync(_ ledger: Ledger) throws {
    let sync = DomainEvent.inboxSynced(InboxSync(mode: .delta, messages: [
        InboxMessage(id: "m1", title: "Welcome", sentAt: Timestamp(iso8601: "2026-11-22T08:00:00Z")!)
    ]))
    try ledger.append(sync, key: "sync-1")
}

// Domain/PayloadReader.swift
func exampleDecode() throws {
    let event = try DomainEvent.decode(type: "badge.adjusted", payload: Array(#"{"delta":1}"#.utf8))
    _ = event
}

// Domain/Event.swift
func exampleNewEvent(_ ledger: Ledger) throws {
    let event = NewEvent(type: "badge.adjusted", payload: Array(#"{"delta":1}"#.utf8), key: "push-42")
    let sequence = try ledger.append(event)
    _ = sequence
}

// Domain/EventJSON.swift
func exampleEventJSON() throws {
    let event = try EventJSON.parse(#"{"type":"badge.adjusted","data":{"delta":1},"key":"push-7"}"#)
    _ = event
}

// Ledger+Append.swift
func exampleAppendRequest(_ ledger: Ledger) throws {
    let head = try ledger.read { try $0.head() }
    let request = AppendRequest(.badgeAdjusted(.delta(1)), key: "push-4711", expectingHead: head)
    let receipt = try ledger.append(request)
    print(receipt.sequences, receipt.isReplay)
}

func exampleAppendRequestReplay(_ ledger: Ledger) throws {
    let receipt = try ledger.append(AppendRequest(.badgeAdjusted(.delta(1)), key: "push-4711"))
    let counted = !receipt.isReplay   // false when the push was delivered before
    _ = counted
}

func exampleReceipt(_ ledger: Ledger, pushID: String) throws {
    let receipt = try ledger.append(AppendRequest(.badgeAdjusted(.delta(1)), key: "push-" + pushID))
    if receipt.isReplay { print("push \(pushID) was counted before, as event \(receipt.sequences[0])") }
}

func exampleRawAppend(_ ledger: Ledger) throws {
    try ledger.append(NewEvent(type: "message.read", payload: Array(#"{"ids":["m1"],"read":true}"#.utf8)))
}

func exampleKeyedAppend(_ ledger: Ledger) throws {
    try ledger.append(.badgeAdjusted(.delta(1)), key: "push-4711")
}

// Ledger+Read.swift and Access/LedgerSnapshot.swift
func exampleRead(_ ledger: Ledger, cursor: UInt64) throws {
    let (head, list) = try ledger.read { snapshot in
        (try snapshot.head(), try snapshot.widgetList(limit: 5))
    }
    let (first, shown, actions) = try ledger.read { snapshot in
        (try snapshot.head(), try snapshot.widgetList(limit: 5), try snapshot.pendingActions())
    }
    let recent = try ledger.read { try $0.events(after: cursor, limit: 100) }
    _ = (head, list, first, shown, actions, recent)
}

func exampleIterator(_ ledger: Ledger, cursor: UInt64, handle: (Event) -> Void) throws {
    var iterator = EventIterator(ledger, after: cursor)
    while let event = try iterator.next() { handle(event) }
}

func exampleWidgetList(_ ledger: Ledger) throws {
    let list = try ledger.read { try $0.widgetList(limit: 5) }
    for row in list.items { print(row.read ? " " : "•", row.title) }
}

func exampleLocalChanges(_ ledger: Ledger) throws {
    for change in try ledger.read({ try $0.localChanges() }) where change.kind == .removed {
        print("archived here, the server still lists", change.id)
    }
}

// Verification/LedgerMaintenance+Verify.swift and LedgerMaintenance+VerifyProjections.swift
func exampleVerify(_ ledger: Ledger) throws {
    let report = try ledger.maintenance.verify()
    if !report.isHealthy { report.findings.forEach { print($0) } }
    for problem in LedgerMaintenance.damagedPages(at: "/tmp/inbox") { print(problem) }
    if let mismatch = try ledger.maintenance.verifyProjections() { print(mismatch) }
}

// AppProjections/LedgerProjection.swift (TaskList itself is in AppProjections.swift)
func exampleLedgerProjection(path: String) throws {
    var options = LedgerOptions(role: "widget")
    options.projections = [TaskList.self]
    let ledger = try Ledger(path: path, options: options)
    try ledger.append(TaskDone(id: "t1"))                    // the row changes in the same transaction
    let today = try ledger.read { try $0.projection(TaskList.self).rows(limit: 10) }   // one short read transaction
    _ = today
}

func exampleProjectionOrder(row: (done: Bool, priority: Int64, title: String)) -> ProjectionOrder {
    ProjectionOrder(.bool(row.done), .descending(.int(row.priority)), .string(row.title))
}

// Access/ProjectionSnapshot.swift and LedgerSnapshot.swift
func exampleProjectionReads(_ ledger: Ledger) throws {
    let (task, firstTen) = try ledger.read { snapshot in
        let tasks = try snapshot.projection(TaskList.self)
        return (try tasks.row("t1"), try tasks.rows(limit: 10))
    }
    let state = try ledger.read { try $0.projection(TaskList.self).contents(limit: 5) }
    print(state.document.open, state.rows.map(\.row.title))
    let open = try ledger.read { try $0.projection(TaskList.self).rows(limit: 10) }
    _ = (task, firstTen, open)
}

// AppProjections/ProjectionModel.swift
@MainActor func followTasks(_ ledger: Ledger) async {
    let tasks = ProjectionModel(TaskList.self, in: ledger, limit: 20)
    await tasks.run()                       // until the calling task is cancelled
    print(tasks.rows.map(\.row.title), tasks.document.open, tasks.error as Any)
}

// Access/LedgerSnapshot.swift (the type's example) and Consumers/Consumer.swift (LedgerConsumers)
func exampleSnapshot(_ ledger: Ledger) throws {
    let (head, list, actions) = try ledger.read { snapshot in
        (try snapshot.head(), try snapshot.widgetList(limit: 5), try snapshot.pendingActions())
    }
    _ = (head, list, actions)
}

func exampleConsumers(_ ledger: Ledger) throws {
    let host = try ledger.consumers.consumer(named: "host-app")
    for info in try ledger.consumers.list() { print(info.name, info.cursor, info.lag) }
    _ = host
}

// Event.swift
func exampleEventSource(_ event: Event) {
    switch event.source {
    case .local: print("this device's own, not shared")
    case .shared: print("this device's own, shared: the feed places it")
    case .feed(let origin): print("from \(origin.ledger ?? "the backend"), feed position \(origin.position)")
    }
}

// DomainEvent.swift
func exampleSharedSettlement() {
    // {"seq":47,"position":6}: this ledger's event 47 is the feed's entry 6.
    let settled = SharedSettlement(sequence: 47, position: 6)
    _ = settled
}
