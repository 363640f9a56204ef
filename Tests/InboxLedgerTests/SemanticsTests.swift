import Foundation
import Testing
import TestSupport
@testable import InboxLedger
import LMDB

func msg(_ id: String, _ title: String = "t", sent: String = "2026-11-20T08:00:00Z", read: Bool? = nil, expires: String? = nil) -> InboxMessage {
    InboxMessage(id: id, title: title, sentAt: Timestamp(iso8601: sent)!, expiresAt: expires.flatMap { Timestamp(iso8601: $0) }, read: read)
}

extension Ledger {
    func ids(now: Timestamp = .now) throws -> [String] { try read { try $0.widgetList(limit: 1000, now: now) }.items.map(\.id) }
}

@Suite struct InboxSemanticsTests {
    @Test func fullSyncIsAuthoritativeAndDeltaUpserts() throws {
        let t = try TestLedger()
        try t.ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [msg("a"), msg("b"), msg("c")])))
        #expect(Set(try t.ledger.ids()) == ["a", "b", "c"])
        try t.ledger.append(.inboxSynced(InboxSync(mode: .delta, messages: [msg("d"), msg("a", "new title")], removed: ["b"])))
        #expect(Set(try t.ledger.ids()) == ["a", "c", "d"])
        #expect(try t.ledger.read({ try $0.message(id: "a") })?.title == "new title")
        try t.ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [msg("c")])))
        #expect(try t.ledger.ids() == ["c"])
        #expect(try t.ledger.read({ try $0.message(id: "a") }) == nil)
        try t.ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [])))
        #expect(try t.ledger.ids().isEmpty)
        #expect(try t.ledger.read({ try $0.widgetList() }).unreadCount == 0)
    }

    @Test func newestFirstTiesById() throws {
        let t = try TestLedger()
        try t.ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [
            msg("b", sent: "2026-11-20T08:00:00Z"), msg("a", sent: "2026-11-20T08:00:00Z"),
            msg("old", sent: "1999-01-01T00:00:00Z"), msg("new", sent: "2026-11-21T00:00:00+02:00"),
        ])))
        #expect(try t.ledger.ids() == ["new", "a", "b", "old"])
        let list = try t.ledger.read({ try $0.widgetList(limit: 2) })
        #expect(list.items.map(\.id) == ["new", "a"])
        #expect(list.unreadCount == 4)
        // A changed sentAt moves the row.
        try t.ledger.append(.inboxSynced(InboxSync(mode: .delta, messages: [msg("old", sent: "2027-01-01T00:00:00Z")])))
        #expect(try t.ledger.ids() == ["old", "new", "a", "b"])
    }

    @Test func expiredMessagesAreHiddenAtReadTimeAndDroppedByTheNextEvent() throws {
        let t = try TestLedger()
        let now = Timestamp.now
        let soon = Timestamp(micros: now.micros + 3_600_000_000)
        try t.ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [
            msg("keep"), msg("soon", expires: soon.iso8601), msg("gone", expires: "2001-01-01T00:00:00Z"),
        ])))
        // Already expired when synced: never kept.
        #expect(try t.ledger.read({ try $0.message(id: "gone") }) == nil)
        let list = try t.ledger.read({ try $0.widgetList() })
        #expect(Set(list.items.map(\.id)) == ["keep", "soon"])
        #expect(list.nextExpiry == soon)
        let later = Timestamp(micros: soon.micros + 1)
        let afterExpiry = try t.ledger.read({ try $0.widgetList(now: later) })
        #expect(afterExpiry.items.map(\.id) == ["keep"])
        #expect(afterExpiry.unreadCount == 1)
        #expect(try t.ledger.read({ try $0.badge(now: later) }) == 1)
        #expect(try t.ledger.read({ try $0.badge() }) == 2)
    }

    @Test func localReadSurvivesSyncsThatHaveNotSeenIt() throws {
        let t = try TestLedger()
        try t.ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [msg("m", read: false)])))
        try t.ledger.append(.messageRead(ReadChange(ids: ["m"], read: true)))
        #expect(try t.ledger.read({ try $0.message(id: "m") })?.read == true)
        #expect(try t.ledger.read({ try $0.message(id: "m") })?.localRead == true)
        // A sync that still says unread has not seen the local read: it stays read.
        try t.ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [msg("m", read: false)])))
        #expect(try t.ledger.read({ try $0.message(id: "m") })?.read == true)
        #expect(try t.ledger.read({ try $0.widgetList() }).unreadCount == 0)
        // The server agrees: the local override is no longer needed.
        try t.ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [msg("m", read: true)])))
        let state = try #require(try t.ledger.read({ try $0.message(id: "m") }))
        #expect(state.localRead == nil && state.serverRead && state.read)
        // From then on the server's flag rules again.
        try t.ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [msg("m", read: false)])))
        #expect(try t.ledger.read({ try $0.message(id: "m") })?.read == false)
        // A sync without a read flag keeps the server flag it knew.
        try t.ledger.append(.messageRead(ReadChange(ids: ["m"], read: true)))
        try t.ledger.append(.inboxSynced(InboxSync(mode: .delta, messages: [msg("m")])))
        #expect(try t.ledger.read({ try $0.message(id: "m") })?.read == true)
    }

    @Test func localUnreadIsKeptApartToo() throws {
        let t = try TestLedger()
        try t.ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [msg("m", read: true)])))
        try t.ledger.append(.messageRead(ReadChange(ids: ["m"], read: false)))
        try t.ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [msg("m", read: true)])))
        #expect(try t.ledger.read({ try $0.message(id: "m") })?.read == false)
        #expect(try t.ledger.read({ try $0.widgetList() }).unreadCount == 1)
    }

    @Test func removedMessageTakesItsReadStateAlong() throws {
        let t = try TestLedger()
        try t.ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [msg("m")])))
        try t.ledger.append(.messageRead(ReadChange(ids: ["m"], read: true)))
        try t.ledger.append(.inboxSynced(InboxSync(mode: .delta, messages: [], removed: ["m"])))
        try t.ledger.append(.inboxSynced(InboxSync(mode: .delta, messages: [msg("m")])))
        #expect(try t.ledger.read({ try $0.message(id: "m") })?.read == false)
        #expect(try t.ledger.read({ try $0.message(id: "m") })?.localRead == nil)
    }

    @Test func readOfUnknownMessagesIsHarmlessAndReported() throws {
        let t = try TestLedger()
        try t.ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [msg("m")])))
        let receipt = try t.ledger.append(AppendRequest([DomainEvent.messageRead(ReadChange(ids: ["m", "x"], read: true)).newEvent()]))
        #expect(receipt.notes == [.unknownMessages(ids: ["x"], sequence: 2)])
        #expect(try t.ledger.read({ try $0.message(id: "m") })?.read == true)
    }

    @Test func badgeIsUnreadPlusAdjustmentsNeverBelowZero() throws {
        let t = try TestLedger()
        try t.ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [msg("a"), msg("b")])))
        #expect(try t.ledger.read({ try $0.badge() }) == 2)
        try t.ledger.append(.badgeAdjusted(.delta(3)))
        #expect(try t.ledger.read({ try $0.badge() }) == 5)
        try t.ledger.append(.badgeAdjusted(.delta(-10)))
        #expect(try t.ledger.read({ try $0.badge() }) == 0)
        // The delta moved the shown badge to 0, not below: +1 shows 1.
        try t.ledger.append(.badgeAdjusted(.delta(1)))
        #expect(try t.ledger.read({ try $0.badge() }) == 1)
        // `set` makes the badge n at that point; later read changes move it from there.
        try t.ledger.append(.badgeAdjusted(.set(7)))
        #expect(try t.ledger.read({ try $0.badge() }) == 7)
        try t.ledger.append(.messageRead(ReadChange(ids: ["a"], read: true)))
        #expect(try t.ledger.read({ try $0.badge() }) == 6)
        try t.ledger.append(.inboxSynced(InboxSync(mode: .delta, messages: [msg("c")])))
        #expect(try t.ledger.read({ try $0.badge() }) == 7)
        try t.ledger.append(.badgeAdjusted(.set(0)))
        #expect(try t.ledger.read({ try $0.badge() }) == 0)
        #expect(try t.ledger.read({ try $0.widgetList() }).unreadCount == 2)
    }

    @Test func actionsQueueInOrderUntilCompleted() throws {
        let t = try TestLedger()
        try t.ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [msg("m1"), msg("m2")])))
        try t.ledger.append(.widgetAction(WidgetAction(actionID: "a1", kind: .markRead, target: "m1")))
        try t.ledger.append(.widgetAction(WidgetAction(actionID: "a2", kind: .markTaskDone, target: "task-9")))
        try t.ledger.append(.widgetAction(WidgetAction(actionID: "a3", kind: .custom, name: "snooze", payload: .object(["minutes": .integer(10)]))))
        // markRead took effect at once: widget and badge are right before the host runs.
        #expect(try t.ledger.read({ try $0.message(id: "m1") })?.read == true)
        #expect(try t.ledger.read({ try $0.badge() }) == 1)
        let pending = try t.ledger.read({ try $0.pendingActions() })
        #expect(pending.map(\.actionID) == ["a1", "a2", "a3"])
        #expect(pending[2].payload == Array(#"{"minutes":10}"#.utf8))
        #expect(try t.ledger.read({ try $0.widgetList() }).pendingActions == 3)

        var receipt = try t.ledger.append(AppendRequest([DomainEvent.actionCompleted(ActionCompletion(actionID: "a2", outcome: .done)).newEvent()]))
        #expect(receipt.notes.isEmpty)
        #expect(try t.ledger.read({ try $0.pendingActions() }).map(\.actionID) == ["a1", "a3"])
        receipt = try t.ledger.append(AppendRequest([
            DomainEvent.actionCompleted(ActionCompletion(actionID: "a2", outcome: .failed)).newEvent(),
            DomainEvent.actionCompleted(ActionCompletion(actionID: "zz", outcome: .done)).newEvent(),
            DomainEvent.widgetAction(WidgetAction(actionID: "a1", kind: .openMessage, target: "m2")).newEvent(),
        ]))
        #expect(receipt.notes == [
            .alreadyCompleted(actionID: "a2", sequence: 6), .unknownAction(actionID: "zz", sequence: 7),
            .duplicateAction(actionID: "a1", sequence: 8),
        ])
        #expect(try t.ledger.read({ try $0.pendingActions() }).map(\.actionID) == ["a1", "a3"])
        #expect(try t.ledger.read({ try $0.pendingActions(limit: 1) }).map(\.actionID) == ["a1"])
    }

    @Test func versionTracksWhatTheWidgetShows() throws {
        let t = try TestLedger()
        #expect(try t.ledger.read({ try $0.widgetList() }).version == 0)
        #expect(try t.ledger.read({ try $0.widgetList() }).updatedAt == nil)
        let s1 = try t.ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [msg("m")])))
        let v1 = try t.ledger.read({ try $0.widgetList() }).version
        #expect(v1 == s1)
        #expect(try t.ledger.read({ try $0.widgetVersion() }) == v1)
        // A custom event, a re-sync of identical content and an action that is not markRead
        // change nothing the widget shows.
        try t.ledger.append(NewEvent(type: "app.opened", payload: Array("{}".utf8)))
        try t.ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [msg("m")])))
        try t.ledger.append(.widgetAction(WidgetAction(actionID: "x", kind: .openMessage, target: "m")))
        #expect(try t.ledger.read({ try $0.widgetVersion() }) == v1)
        let s2 = try t.ledger.append(.messageRead(ReadChange(ids: ["m"], read: true)))
        #expect(try t.ledger.read({ try $0.widgetVersion() }) != v1)
        #expect(try t.ledger.read({ try $0.widgetVersion() }) == s2)
        let s3 = try t.ledger.append(.badgeAdjusted(.delta(1)))
        #expect(try t.ledger.read({ try $0.widgetVersion() }) == s3)
    }

    @Test func customEventsAreStoredAndIgnored() throws {
        let t = try TestLedger()
        let seq = try t.ledger.append(NewEvent(type: "com.example.future-thing", payload: [0xFF, 0x00, 0x01]))
        #expect(try t.ledger.read({ try $0.event(at: seq) })?.payload == [0xFF, 0x00, 0x01])
        #expect(try t.ledger.read({ try $0.widgetList() }).version == 0)
        #expect(try t.ledger.maintenance.verifyProjections() == nil)
    }

    @Test func typedAndJSONFormsGiveTheSamePayload() throws {
        let typed = try DomainEvent.messageRead(ReadChange(ids: ["m/1"], read: true)).newEvent(key: "k")
        let parsed = try EventJSON.parse(#"{"type": "message.read", "key": "k", "data": {"read": true, "ids": ["m/1"]}}"#)
        #expect(typed == parsed)
        // So a retry through either path is recognised as the same event.
        let t = try TestLedger()
        #expect(try t.ledger.append(typed) == 1)
        #expect(try t.ledger.append(parsed) == 1)
    }
}

@Suite struct ValidationTests {
    func rejects(_ type: String, _ json: String, field: String, reason: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let t = try TestLedger()
        #expect(throws: LedgerError.invalidEvent(index: 1, field: field, reason: reason), sourceLocation: sourceLocation) {
            try t.ledger.append(contentsOf: [event("custom.ok"), NewEvent(type: type, payload: Array(json.utf8))])
        }
        #expect(try t.ledger.read({ try $0.count() }) == 0, sourceLocation: sourceLocation)
    }

    @Test func eachBadFieldIsNamed() throws {
        try rejects("inbox.synced", #"{"messages":[]}"#, field: "data.mode", reason: "missing")
        try rejects("inbox.synced", #"{"mode":"sometimes","messages":[]}"#, field: "data.mode", reason: "not one of the allowed values")
        try rejects("inbox.synced", #"{"mode":"full","messages":[{"id":"","title":"t","sentAt":"2026-11-20T08:00:00Z"}]}"#,
                    field: "data.messages[0].id", reason: "must be 1–200 bytes")
        try rejects("inbox.synced", #"{"mode":"full","messages":[{"id":"a","sentAt":"2026-11-20T08:00:00Z"}]}"#,
                    field: "data.messages[0].title", reason: "missing")
        try rejects("inbox.synced", #"{"mode":"full","messages":[{"id":"a","title":5,"sentAt":"2026-11-20T08:00:00Z"}]}"#,
                    field: "data.messages[0].title", reason: "must be a string")
        try rejects("inbox.synced", #"{"mode":"full","messages":[{"id":"a","title":"t","sentAt":"2026-13-01T00:00:00Z"}]}"#,
                    field: "data.messages[0].sentAt", reason: #"not an ISO 8601 date: "2026-13-01T00:00:00Z""#)
        try rejects("inbox.synced", #"{"mode":"full","messages":[{"id":"a","title":"t","sentAt":"2026-11-20T08:00:00Z"},{"id":"a","title":"u","sentAt":"2026-11-20T08:00:00Z"}]}"#,
                    field: "data.messages[1].id", reason: #"duplicate id "a" in one message list"#)
        try rejects("inbox.synced", #"{"mode":"delta","messages":[],"removed":[""]}"#, field: "data.removed[0]", reason: "must be 1–200 bytes")
        try rejects("message.read", #"{"ids":[],"read":true}"#, field: "data.ids", reason: "must list at least one id")
        try rejects("message.read", #"{"ids":["a"],"read":"yes"}"#, field: "data.read", reason: "must be true or false")
        try rejects("message.read", #"{"ids":["a"]}"#, field: "data.read", reason: "missing")
        try rejects("widget.action", #"{"actionID":"a","kind":"markRead"}"#, field: "data.target", reason: "required for kind markRead")
        try rejects("widget.action", #"{"actionID":"a","kind":"custom"}"#, field: "data.name", reason: "required for kind custom")
        try rejects("widget.action", #"{"actionID":"a","kind":"teleport"}"#, field: "data.kind", reason: "not one of the allowed values")
        try rejects("action.completed", #"{"actionID":"a","outcome":"maybe"}"#, field: "data.outcome", reason: "not one of the allowed values")
        try rejects("badge.adjusted", #"{}"#, field: "data.delta", reason: #"needs "delta" or "set""#)
        try rejects("badge.adjusted", #"{"delta":1,"set":2}"#, field: "data.set", reason: "give either delta or set, not both")
        try rejects("badge.adjusted", #"{"set":-1}"#, field: "data.set", reason: "must be 0…1000000")
        try rejects("badge.adjusted", #"{"delta":1.5}"#, field: "data.delta", reason: "must be an integer")
        try rejects("badge.adjusted", #"not json"#, field: "data", reason: "malformed JSON at byte 0")
        try rejects("badge.adjusted", #"{"delta":1,}"#, field: "data", reason: "malformed JSON at byte 11")
    }

    @Test func iso8601Dates() {
        #expect(Timestamp(iso8601: "1970-01-01T00:00:00Z")?.micros == 0)
        #expect(Timestamp(iso8601: "2026-11-22T08:00:00Z")?.iso8601 == "2026-11-22T08:00:00Z")
        #expect(Timestamp(iso8601: "2026-11-22T10:00:00+02:00") == Timestamp(iso8601: "2026-11-22T08:00:00Z"))
        #expect(Timestamp(iso8601: "2026-11-22T08:00:00.25Z")?.micros == Timestamp(iso8601: "2026-11-22T08:00:00Z")!.micros + 250_000)
        #expect(Timestamp(iso8601: "2024-02-29T00:00:00Z") != nil)
        #expect(Timestamp(iso8601: "1969-12-31T23:59:59.5Z")?.micros == -500_000)
        #expect(Timestamp(micros: -500_000).iso8601 == "1969-12-31T23:59:59.5Z")
        for bad in ["", "2026-11-22", "2026-11-22T08:00:00", "2023-02-29T00:00:00Z", "2026-11-22T24:00:00Z", "x2026-11-22T08:00:00Z", "2026-11-22T08:00:00Zjunk"] {
            #expect(Timestamp(iso8601: bad) == nil, "\(bad)")
        }
        var rng = SeededGenerator(seed: 5)
        for _ in 0..<2000 {
            let t = Timestamp(micros: Int64.random(in: -2_000_000_000_000_000...4_000_000_000_000_000, using: &rng))
            #expect(Timestamp(iso8601: t.iso8601) == t)
        }
    }

    @Test func deepLinks() {
        let ids = ["simple", "inbox/42 ✓", "a?b#c%d", "ÄÖÜ", "..", "~x_y-z."]
        for id in ids {
            let link = DeepLink.message(id: id, scheme: "myapp")
            #expect(link.hasPrefix("myapp://message/"))
            #expect(!link.dropFirst("myapp://message/".count).contains("/"))
            #expect(DeepLink.messageID(from: link, scheme: "myapp") == id)
        }
        #expect(DeepLink.message(id: "inbox/42 ✓", scheme: "myapp") == "myapp://message/inbox%2F42%20%E2%9C%93")
        #expect(DeepLink.messageID(from: "other://message/x", scheme: "myapp") == nil)
        #expect(DeepLink.messageID(from: "myapp://message/", scheme: "myapp") == nil)
        #expect(DeepLink.messageID(from: "myapp://message/a/b", scheme: "myapp") == nil)
        #expect(DeepLink.messageID(from: "myapp://message/%ZZ", scheme: "myapp") == nil)
        #expect(DeepLink.messageID(from: "myapp://message/%FF", scheme: "myapp") == nil)
    }
}

@Suite struct VerifyProjectionsTests {
    @Test func healthyLedgerVerifiesAndAlteredRowIsFound() throws {
        let t = try TestLedger()
        try t.ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [msg("a"), msg("b")])))
        try t.ledger.append(.widgetAction(WidgetAction(actionID: "x", kind: .markRead, target: "a")))
        try t.ledger.append(.badgeAdjusted(.delta(2)))
        #expect(try t.ledger.maintenance.verifyProjections() == nil)

        let env = try Environment.open(directory: t.path, configuration: EnvironmentConfiguration())
        let messages = try RawProjectionTable(env, .messages)
        var record = try #require(try env.read { try $0.get(messages, key: Array("b".utf8)) }.flatMap(MessageRecord.decode))
        record.title = "tampered"
        try env.write { try $0.put(messages, key: Array("b".utf8), value: record.encode()) }
        let mismatch = try #require(try t.ledger.maintenance.verifyProjections())
        #expect(mismatch.table == "messages" && mismatch.key == "b")

        let state = try RawProjectionTable(env, .state)
        try env.write { try $0.put(messages, key: Array("b".utf8), value: { var r = record; r.title = "t"; return r.encode() }()) }
        #expect(try t.ledger.maintenance.verifyProjections() == nil)
        var tampered = try #require(try env.read { try $0.get(state, key: ProjectionState.key) }.flatMap(ProjectionState.decode))
        tampered.unread = 99
        try env.write { try $0.put(state, key: ProjectionState.key, value: tampered.encode()) }
        #expect(try t.ledger.maintenance.verifyProjections()?.table == "state")
    }
}
