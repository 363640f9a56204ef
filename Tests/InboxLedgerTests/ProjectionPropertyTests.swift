import Foundation
import Testing
import TestSupport
@testable import InboxLedger

/// Random interleavings of events from three origins, compared after every batch with the
/// independent ``InboxModel``.
@Suite struct ProjectionPropertyTests {
    struct Generator {
        var rng: SeededGenerator
        let ids = (0..<12).map { "m\($0)" }
        var actionCounter = 0

        mutating func pick<T>(_ items: [T]) -> T { items[Int.random(in: 0..<items.count, using: &rng)] }
        mutating func chance(_ p: Double) -> Bool { Double.random(in: 0..<1, using: &rng) < p }

        mutating func message(_ id: String) -> String {
            let day = Int.random(in: 10...20, using: &rng)
            var fields = [#""id":"\#(id)""#, #""title":"Title \#(Int.random(in: 0..<3, using: &rng))""#,
                          #""sentAt":"2026-11-\#(day)T08:00:00Z""#]
            if chance(0.5) { fields.append(#""read":\#(chance(0.5))"#) }
            if chance(0.15) { fields.append(#""expiresAt":"\#(chance(0.5) ? "2001-01-01T00:00:00Z" : "2099-01-01T00:00:00Z")""#) }
            return "{" + fields.joined(separator: ",") + "}"
        }

        mutating func appEvent() -> NewEvent {
            if chance(0.3) {
                let done = "a\(Int.random(in: 0...max(0, actionCounter), using: &rng))"
                return NewEvent(type: "action.completed", payload: Array(#"{"actionID":"\#(done)","outcome":"\#(pick(["done", "failed", "discarded"]))"}"#.utf8))
            }
            var chosen = Set<String>()
            for _ in 0..<Int.random(in: 0...6, using: &rng) { chosen.insert(pick(ids)) }
            let list = chosen.sorted().map { message($0) }.joined(separator: ",")
            let full = chance(0.3)
            var removed = ""
            if !full, chance(0.4) {
                let r = ids.filter { !chosen.contains($0) }
                if !r.isEmpty { removed = #","removed":["\#(pick(r))"]"# }
            }
            return NewEvent(type: "inbox.synced", payload: Array(#"{"mode":"\#(full ? "full" : "delta")","messages":[\#(list)]\#(removed)}"#.utf8))
        }

        mutating func widgetEvent() -> NewEvent {
            if chance(0.5) {
                actionCounter += 1
                let id = chance(0.1) ? "a\(max(1, actionCounter - 1))" : "a\(actionCounter)"
                let kind = pick(["markRead", "markTaskDone", "openMessage", "custom"])
                let extra = kind == "custom" ? #","name":"snooze""# : #","target":"\#(pick(ids))""#
                return NewEvent(type: "widget.action", payload: Array(#"{"actionID":"\#(id)","kind":"\#(kind)"\#(extra)}"#.utf8))
            }
            return NewEvent(type: "message.read", payload: Array(#"{"ids":["\#(pick(ids))","\#(pick(ids))"],"read":\#(chance(0.7))}"#.utf8))
        }

        mutating func notificationEvent() -> NewEvent {
            if chance(0.15) { return NewEvent(type: "custom.ping", payload: Array("{}".utf8)) }
            if chance(0.3) { return NewEvent(type: "badge.adjusted", payload: Array(#"{"set":\#(Int.random(in: 0...9, using: &rng))}"#.utf8)) }
            return NewEvent(type: "badge.adjusted", payload: Array(#"{"delta":\#(Int.random(in: -4...4, using: &rng))}"#.utf8))
        }
    }

    @Test(arguments: [1, 2, 3, 4])
    func projectionsEqualTheModelAfterEveryBatch(seed: UInt64) throws {
        let t = try TestLedger(role: "app")
        func open(_ role: String) throws -> Ledger {
            var options = LedgerOptions(role: role)
            options.durability = .none
            return try Ledger(path: t.path, options: options)
        }
        let writers = [t.ledger, try open("widget"), try open("notification-service")]
        var gen = Generator(rng: SeededGenerator(seed: seed))
        var model = InboxModel()
        var applied: UInt64 = 0
        for round in 0..<250 {
            let origin = Int.random(in: 0..<3, using: &gen.rng)
            let batch: [NewEvent] = (0..<Int.random(in: 1...4, using: &gen.rng)).map { _ in
                switch origin {
                case 0: gen.appEvent()
                case 1: gen.widgetEvent()
                default: gen.notificationEvent()
                }
            }
            try writers[origin].append(contentsOf: batch)
            for e in try t.ledger.read({ try $0.events(after: applied, limit: 100) }) {
                model.apply(e)
                applied = e.sequence
            }
            let list = try t.ledger.read({ try $0.widgetList(limit: 100) })
            #expect(list.items.map(\.id) == model.order, "seed \(seed) round \(round)")
            #expect(list.items.map(\.read) == model.order.map { model.messages[$0]!.read }, "seed \(seed) round \(round)")
            #expect(list.items.map(\.title) == model.order.map { model.messages[$0]!.title }, "seed \(seed) round \(round)")
            #expect(list.unreadCount == model.unread, "seed \(seed) round \(round)")
            #expect(list.badge == model.badge, "seed \(seed) round \(round)")
            #expect(try t.ledger.read({ try $0.pendingActions(limit: 1000) }).map(\.actionID) == model.pending, "seed \(seed) round \(round)")
            // Stop at the first divergence: later rounds would only repeat it.
            if list.unreadCount != model.unread || list.items.map(\.id) != model.order { return }
        }
        #expect(try t.ledger.maintenance.verifyProjections() == nil)
    }
}
