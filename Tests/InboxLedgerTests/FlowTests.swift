import Foundation
import Testing
import TestSupport
@testable import InboxLedger

/// The flows of docs/semantics.md ("Pushes and the badge", "Local changes and the server"),
/// each as an app runs it: what the user sees after every step.
@Suite struct FlowTests {
    private func list(_ t: TestLedger) throws -> WidgetList { try t.ledger.read({ try $0.widgetList(limit: 100) }) }

    // MARK: - Pushes then syncs

    @Test func aPushThenTheHostsSyncCountsTheMessageOnce() throws {
        let t = try TestLedger()
        try t.ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [msg("m1"), msg("m2", read: true)])))
        #expect(try list(t).badge == 1)
        // The extension: a push announces m3 (no payload message).
        try t.ledger.append(.pushReceived(PushReceived(messageID: "m3")), key: "push-1")
        var now = try list(t)
        #expect(now.unreadCount == 1)
        #expect(now.announced == 1)
        #expect(now.badge == 2)
        // Redelivered (same key) and re-announced (another push for the same message): once.
        try t.ledger.append(.pushReceived(PushReceived(messageID: "m3")), key: "push-1")
        try t.ledger.append(.pushReceived(PushReceived(messageID: "m3")), key: "push-1-again")
        #expect(try list(t).badge == 2)
        // The host's sync brings m3: it is an unread row now, and the push is absorbed.
        try t.ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [msg("m1"), msg("m2", read: true), msg("m3")])))
        now = try list(t)
        #expect(now.unreadCount == 2)
        #expect(now.announced == 0)
        #expect(now.badge == now.unreadCount)
    }

    @Test func aPushCarryingTheMessageShowsItAtOnceAndCountsOnce() throws {
        let t = try TestLedger()
        for i in 0..<10 {
            // Each push carries its message (what an extension with the payload appends).
            try t.ledger.append(.pushReceived(PushReceived(messageID: "p\(i)", message: msg("p\(i)", "push \(i)"))), key: "push-\(i)")
        }
        var now = try list(t)
        #expect(now.items.count == 10)
        #expect(now.unreadCount == 10)
        #expect(now.badge == 10)
        // The host's sync lists them (and five more): badge equals unread, 15.
        try t.ledger.append(.inboxSynced(InboxSync(mode: .full, messages: (0..<10).map { msg("p\($0)", "push \($0)") } + (0..<5).map { msg("s\($0)") })))
        now = try list(t)
        #expect(now.unreadCount == 15)
        #expect(now.badge == 15)
        // A push for a message the inbox has changes nothing.
        try t.ledger.append(.pushReceived(PushReceived(messageID: "s0")))
        #expect(try list(t).badge == 15)
    }

    @Test func anAnnouncedMessageReadOrRemovedBeforeTheSyncStopsCounting() throws {
        let t = try TestLedger()
        try t.ledger.append(.pushReceived(PushReceived(messageID: "a")))
        try t.ledger.append(.pushReceived(PushReceived(messageID: "b")))
        try t.ledger.append(.pushReceived(PushReceived(messageID: "c")))
        #expect(try list(t).badge == 3)
        // Read from its notification before any sync: no longer counted, and the read stays.
        let receipt = try t.ledger.append(AppendRequest([DomainEvent.messageRead(ReadChange(ids: ["a"], read: true)).newEvent()]))
        #expect(receipt.notes.isEmpty)
        try t.ledger.append(.messageRemoved(MessageRemoval(ids: ["b"])))
        #expect(try list(t).badge == 1)
        // The sync brings all three, unread on the server: a stays read (local change), b stays
        // removed (the server still lists it), c is an unread row.
        try t.ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [msg("a"), msg("b"), msg("c")])))
        let now = try list(t)
        #expect(now.items.map(\.id).sorted() == ["a", "c"])
        #expect(now.items.first { $0.id == "a" }?.read == true)
        #expect(now.unreadCount == 1)
        #expect(now.badge == 1)
    }

    @Test func aFullListingWithoutAnAnnouncedMessageWithdrawsIt() throws {
        let t = try TestLedger()
        try t.ledger.append(.pushReceived(PushReceived(messageID: "gone")))
        try t.ledger.append(.inboxSynced(InboxSync(mode: .delta, messages: [msg("x")])))
        #expect(try list(t).badge == 2, "a delta that does not mention it leaves the announcement")
        try t.ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [msg("x")])))
        #expect(try list(t).badge == 1)
        #expect(try list(t).announced == 0)
    }

    @Test func theServersBadgeHoldsUntilTheNextSyncAndLocalReadsLowerIt() throws {
        let t = try TestLedger()
        try t.ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [msg("a"), msg("b")])))
        // The server counts 5 unread (3 the device has not synced yet, the pushed one among them).
        try t.ledger.append(.pushReceived(PushReceived(messageID: "c", badge: 5)))
        #expect(try list(t).badge == 5)
        // A local read after the push lowers it one for one.
        try t.ledger.append(.messageRead(ReadChange(ids: ["a"], read: true)))
        #expect(try list(t).badge == 4)
        // The sync brings the server's listing: the badge is the inbox's own count again.
        try t.ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [msg("a"), msg("b"), msg("c"), msg("d"), msg("e")])))
        let now = try list(t)
        #expect(now.unreadCount == 4)
        #expect(now.badge == 4)
    }

    @Test func badgeDeltasTiedToNoMessageKeepTheirMeaning() throws {
        let t = try TestLedger()
        try t.ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [msg("a")])))
        try t.ledger.append(.pushReceived(PushReceived(messageID: "b")))
        try t.ledger.append(.badgeAdjusted(.delta(2)))
        #expect(try list(t).badge == 4)
        try t.ledger.append(.badgeAdjusted(.delta(-10)))
        #expect(try list(t).badge == 0)
        try t.ledger.append(.badgeAdjusted(.delta(1)))
        #expect(try list(t).badge == 1)
        try t.ledger.append(.badgeAdjusted(.set(7)))
        #expect(try list(t).badge == 7)
        try t.ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [msg("a"), msg("b")])))
        #expect(try list(t).badge == 7, "the announcement became a row: the same count")
    }

    // MARK: - Local changes against re-syncs

    @Test func anArchivedMessageStaysArchivedUntilTheServersListingDropsIt() throws {
        let t = try TestLedger()
        try t.ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [msg("a"), msg("b"), msg("c")])))
        try t.ledger.append(.messageRemoved(MessageRemoval(ids: ["a", "b"])))
        #expect(try t.ledger.ids() == ["c"] || Set(try t.ledger.ids()) == ["c"])
        #expect(try list(t).badge == 1)
        // Full and delta syncs that have not seen the archive yet still list a and b.
        try t.ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [msg("a"), msg("b"), msg("c")])))
        try t.ledger.append(.inboxSynced(InboxSync(mode: .delta, messages: [msg("a", "edited")])))
        #expect(Set(try t.ledger.ids()) == ["c"])
        #expect(try list(t).unreadCount == 1)
        #expect(try t.ledger.read({ try $0.message(id: "a") }) == nil)
        // The server drops a (full listing) and b (delta removal): settled.
        try t.ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [msg("b"), msg("c")])))
        try t.ledger.append(.inboxSynced(InboxSync(mode: .delta, messages: [], removed: ["b"])))
        #expect(try t.ledger.read({ try $0.localChanges() }).isEmpty)
        // Settled: should the server list a again later (restored elsewhere), it comes back.
        try t.ledger.append(.inboxSynced(InboxSync(mode: .delta, messages: [msg("a")])))
        #expect(Set(try t.ledger.ids()) == ["a", "c"])
    }

    @Test func aLocalReadSurvivesFullAndDeltaSyncsUntilTheServerAgrees() throws {
        let t = try TestLedger()
        try t.ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [msg("a", read: false), msg("b", read: true)])))
        try t.ledger.append(.messageRead(ReadChange(ids: ["a"], read: true)))
        try t.ledger.append(.messageRead(ReadChange(ids: ["b"], read: false)))
        for mode in [InboxSync.Mode.full, .delta] {
            try t.ledger.append(.inboxSynced(InboxSync(mode: mode, messages: [msg("a", read: false), msg("b", read: true)])))
            #expect(try t.ledger.read({ try $0.message(id: "a") })?.read == true)
            #expect(try t.ledger.read({ try $0.message(id: "b") })?.read == false)
        }
        // The server catches up: the overrides are settled, later server changes apply again.
        try t.ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [msg("a", read: true), msg("b", read: false)])))
        #expect(try t.ledger.read({ try $0.message(id: "a") })?.localRead == nil)
        try t.ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [msg("a", read: false), msg("b", read: false)])))
        #expect(try t.ledger.read({ try $0.message(id: "a") })?.read == false)
    }

    @Test func removalsAndPushesSurviveCompactionAndTheProjectionRebuild() throws {
        let t = try TestLedger()
        try t.ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [msg("a"), msg("b")])))
        try t.ledger.append(.messageRemoved(MessageRemoval(ids: ["a"])))
        try t.ledger.append(.pushReceived(PushReceived(messageID: "c", badge: 9)))
        try t.ledger.append(.messageRead(ReadChange(ids: ["c"], read: true)))
        let before = try list(t)
        #expect(try t.ledger.maintenance.verifyProjections() == nil)
        var policy = CompactionPolicy()
        policy.retainedTail = 0
        try Compactor(ledger: t.ledger, policy: policy).runOnce()
        #expect(try t.ledger.read({ try $0.firstSequence() }) > 1, "the log was trimmed: the state comes from the snapshot")
        #expect(try t.ledger.maintenance.verifyProjections() == nil)
        #expect(try list(t) == before)
        try t.ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [msg("a"), msg("b"), msg("c")])))
        #expect(Set(try t.ledger.ids()) == ["b", "c"])
        #expect(try t.ledger.read({ try $0.message(id: "c") })?.read == true)
        #expect(try t.ledger.maintenance.verifyProjections() == nil)
    }

    @Test func pushAndRemovalPayloadsAreValidated() throws {
        let t = try TestLedger()
        #expect(throws: LedgerError.invalidEvent(index: 0, field: "data.message.id", reason: #"must equal messageID "a""#)) {
            try t.ledger.append(.pushReceived(PushReceived(messageID: "a", message: msg("b"))))
        }
        #expect(throws: LedgerError.invalidEvent(index: 0, field: "data.badge", reason: "must be 0…1000000")) {
            try t.ledger.append(.pushReceived(PushReceived(messageID: "a", badge: -1)))
        }
        #expect(throws: LedgerError.invalidEvent(index: 0, field: "data.ids", reason: "must list at least one id")) {
            try t.ledger.append(.messageRemoved(MessageRemoval(ids: [])))
        }
        #expect(try t.ledger.read({ try $0.head() }) == 0)
        let json = NewEvent(type: "push.received", payload: Array(#"{"messageID":"m9","message":{"id":"m9","title":"Hi","sentAt":"2026-11-22T08:00:00Z"},"badge":2}"#.utf8))
        try t.ledger.append(contentsOf: [json])
        #expect(try list(t).badge == 2)
        #expect(try list(t).items.map(\.id) == ["m9"])
    }
}

/// The host app's action queue as docs/apps.md writes it, in a real process that is suspended
/// and resumed 200 times while another process records widget actions.
@Suite(.serialized) struct ConsumerThroughSuspensionTests {
    @Test(.timeLimit(.minutes(10)))
    func aConsumerThrough200SuspendResumeCyclesCompletesEveryActionExactlyOnce() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        let actions = 600
        var options = LedgerOptions(role: "widget")
        options.durability = .none
        options.durabilityFloor = .none
        let ledger = try Ledger(path: path, options: options)
        let child = try Processes.start(Processes.product("LedgerTestAgent"), ["batch-consumer", path, "host-app", "\(actions)", "200"])
        defer { child.kill(); _ = try? child.wait(timeout: 60) }
        var rng = SeededGenerator(seed: 21)
        var recorded = 0
        while recorded < actions {
            let n = min(Int.random(in: 1...9, using: &rng), actions - recorded)
            var events: [NewEvent] = []
            for i in recorded..<(recorded + n) {
                events.append(try DomainEvent.widgetAction(WidgetAction(actionID: "a\(i)", kind: .custom, name: "tap")).newEvent())
                if i % 5 == 0 { events.append(try DomainEvent.badgeAdjusted(.delta(1)).newEvent()) }
            }
            try ledger.append(contentsOf: events)
            recorded += n
        }
        // The hang guard only: the child exits once it has completed every action.
        let exit = try child.wait(timeout: 540)
        #expect(exit.status == 0, "\(child.stdoutSoFar) \(exit.stderr)")
        #expect(child.stdoutSoFar.contains("completed \(actions)"), "\(child.stdoutSoFar)")
        #expect(try ledger.read({ try $0.pendingActions(limit: 10_000) }).isEmpty)
        var completions: [String: Int] = [:]
        for event in try ledger.read({ try $0.events(after: 0, limit: 100_000) }) where event.type == BuiltInEventType.actionCompleted.rawValue {
            guard case .actionCompleted(let c) = try DomainEvent.decode(type: event.type, payload: event.payload) else { continue }
            completions[c.actionID, default: 0] += 1
        }
        #expect(completions.count == actions)
        #expect(completions.values.allSatisfy { $0 == 1 }, "\(completions.filter { $0.value != 1 })")
    }
}

@Suite struct FlowProjectionChecks {
    @Test func verifyFindsADamagedOrMissingLocalRecord() throws {
        let t = try TestLedger()
        try t.ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [msg("a"), msg("b")])))
        try t.ledger.append(.messageRemoved(MessageRemoval(ids: ["a"])))
        try t.ledger.append(.pushReceived(PushReceived(messageID: "c")))
        #expect(try t.ledger.maintenance.verifyProjections() == nil)
        // A removal forgotten behind the ledger's back: a re-sync would bring the message back.
        try t.ledger.write("damage") { txn in
            try txn.projections.delete(.local, Array("a".utf8))
        }
        let mismatch = try #require(try t.ledger.maintenance.verifyProjections())
        #expect("\(mismatch)".contains("local"), "\(mismatch)")
    }

    @Test func aWidgetListCachedBeforeAnnouncedExistedStillDecodes() throws {
        let json = #"{"items":[],"unreadCount":2,"badge":3,"version":7,"pendingActions":1}"#
        let list = try JSONDecoder().decode(WidgetList.self, from: Data(json.utf8))
        #expect(list.announced == 0)
        #expect(list.badge == 3)
        let t = try TestLedger()
        try t.ledger.append(.pushReceived(PushReceived(messageID: "c")))
        let current = try t.ledger.read({ try $0.widgetList() })
        #expect(try JSONDecoder().decode(WidgetList.self, from: JSONEncoder().encode(current)) == current)
    }
}

@Suite struct FlowVersionTests {
    /// `version` moves only with what the widget shows: a listing that settles a local read (the
    /// server now agrees) rewrites the row's flags, not what is shown.
    @Test func aListingThatOnlySettlesALocalReadLeavesTheVersion() throws {
        let t = try TestLedger()
        try t.ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [msg("a", read: false)])))
        try t.ledger.append(.messageRead(ReadChange(ids: ["a"], read: true)))
        let version = try t.ledger.read({ try $0.widgetList() }).version
        try t.ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [msg("a", read: true)])))
        #expect(try t.ledger.read({ try $0.message(id: "a") })?.localRead == nil, "settled")
        #expect(try t.ledger.read({ try $0.widgetList() }).version == version)
        try t.ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [msg("a", "renamed", read: true)])))
        #expect(try t.ledger.read({ try $0.widgetList() }).version > version)
    }
}
