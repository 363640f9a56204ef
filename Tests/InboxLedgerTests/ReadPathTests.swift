import Foundation
import Testing
import TestSupport
@testable import InboxLedger

/// The read path's shortcuts: the kept widget list and the UTF-8 check that replaced the
/// standard library's generic one.
@Suite struct ReadPathTests {
    @Test func keptWidgetListFollowsAppendsFromAnotherHandleAndAnotherProcess() throws {
        let t = try TestLedger()
        try t.ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [msg("a", sent: "2026-11-20T08:00:00Z")])))
        #expect(try t.ledger.ids() == ["a"])
        #expect(try t.ledger.ids() == ["a"])  // served from the kept list

        let other = try Ledger(path: t.path, options: LedgerOptions(role: "widget"))
        try other.append(.inboxSynced(InboxSync(mode: .delta, messages: [msg("b", sent: "2026-11-20T09:00:00Z")])))
        #expect(try t.ledger.ids() == ["b", "a"])

        let line = #"{"type":"message.read","data":{"ids":["a"],"read":true}}"# + "\n"
        let result = try Processes.run(Processes.product("ledger"), ["append", t.path, "--origin", "notification-service"],
                                       input: Data(line.utf8))
        #expect(result.status == 0, "\(result.stderr)")
        let list = try t.ledger.read({ try $0.widgetList() })
        #expect(list.items.map(\.read) == [false, true])
        #expect(list.unreadCount == 1)

        // An event that changes nothing visible still changes the state: the list is re-read
        // and equal.
        try t.ledger.append(NewEvent(type: "app.opened", payload: Array("{}".utf8)))
        #expect(try t.ledger.read({ try $0.widgetList() }).items == list.items)
    }

    @Test func keptWidgetListIsNeverServedForAnEarlierTimeOrAcrossAnExpiry() throws {
        let t = try TestLedger()
        let now = Timestamp.now
        let expiry = Timestamp(micros: now.micros + 60_000_000)
        try t.ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [msg("stay"), msg("brief", expires: expiry.iso8601)])))
        let late = Timestamp(micros: expiry.micros + 1)
        #expect(try t.ledger.ids(now: late) == ["stay"])
        // Read at `late` first: a read at an earlier time must not reuse it.
        #expect(Set(try t.ledger.ids(now: now)) == ["stay", "brief"])
        #expect(try t.ledger.read({ try $0.widgetList(limit: 1000, now: now) }).unreadCount == 2)
        // Kept at `now`; a read past the expiry must not reuse it.
        #expect(try t.ledger.read({ try $0.widgetList(limit: 1000, now: late) }).unreadCount == 1)
    }

    @Test func keptWidgetListMatchesAFreshDecodeUnderRandomAppends() throws {
        let t = try TestLedger()
        var rng = SeededGenerator(seed: 7)
        for round in 0..<150 {
            let id = "m\(Int.random(in: 0..<20, using: &rng))"
            switch Int.random(in: 0..<3, using: &rng) {
            case 0:
                let sent = Timestamp(micros: 1_790_000_000_000_000 + Int64.random(in: 0..<1_000_000_000, using: &rng))
                try t.ledger.append(.inboxSynced(InboxSync(mode: .delta, messages: [
                    InboxMessage(id: id, title: "round \(round)", sentAt: sent, read: Bool.random(using: &rng)),
                ])))
            case 1: try t.ledger.append(.messageRead(ReadChange(ids: [id], read: Bool.random(using: &rng))))
            default: try t.ledger.append(.inboxSynced(InboxSync(mode: .delta, messages: [], removed: [id])))
            }
            let kept = try t.ledger.read({ try $0.widgetList(limit: 10) })
            let again = try t.ledger.read({ try $0.widgetList(limit: 10) })  // the kept one
            let fresh = try t.ledger.read({ try $0.widgetList(limit: 11) })  // another limit: decoded anew
            #expect(again == kept)
            #expect(kept.items == Array(fresh.items.prefix(10)), "round \(round)")
            #expect(kept.unreadCount == fresh.unreadCount && kept.badge == fresh.badge && kept.version == fresh.version)
        }
    }

    @Test func utf8CheckAgreesWithTheStandardLibrary() {
        var rng = SeededGenerator(seed: 42)
        // Bytes biased toward lead and continuation bytes, so that near-valid sequences abound.
        let interesting: [UInt8] = [0x00, 0x41, 0x7F, 0x80, 0x8F, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1,
                                    0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xFF]
        var cases: [[UInt8]] = [
            [], Array("plain ascii".utf8), Array("“quotes” €uro 𝄞 clef".utf8),
            [0xED, 0xA0, 0x80], [0xC0, 0xAF], [0xE0, 0x80, 0xAF], [0xF4, 0x90, 0x80, 0x80], [0xEF, 0xBF, 0xBD],
        ]
        for _ in 0..<50_000 {
            let n = Int.random(in: 1...6, using: &rng)
            cases.append((0..<n).map { _ in
                Bool.random(using: &rng) ? interesting.randomElement(using: &rng) ?? 0 : UInt8.random(in: 0...255, using: &rng)
            })
        }
        var disagreements: [[UInt8]] = []
        for bytes in cases {
            let ours = String(utf8: bytes)
            let reference = String(validating: bytes, as: UTF8.self)
            if ours != reference { disagreements.append(bytes) }
        }
        #expect(disagreements.isEmpty, "first: \(disagreements.prefix(5))")
    }
}
