import Foundation
import Testing
import TestSupport
@testable import InboxLedger

/// An event type written by a newer version of the library (here `inbox.archived`, which this
/// version does not know): preserved, delivered to consumers, skipped by the projections,
/// shown as unknown by `ledger inspect`.
@Suite struct ForwardCompatibilityTests {
    @Test func aNewerEventTypeIsKeptDeliveredSkippedAndShownAsUnknown() throws {
        let t = try TestLedger()
        try t.ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [msg("m1"), msg("m2")])))
        let before = try t.ledger.read({ try $0.widgetList() })
        let future = NewEvent(type: "inbox.archived", payload: Array(#"{"ids":["m1"],"folder":"Archive","v":2}"#.utf8), key: "arch-1")
        // Appended by the newer library (this one refuses custom types in the built-ins' namespace).
        let sequence = try #require(try t.ledger.storeAsOtherLibrary([future]).first)

        // Preserved byte for byte.
        let stored = try #require(try t.ledger.read({ try $0.event(at: sequence) }))
        #expect(stored.type == "inbox.archived" && stored.payload == future.payload && stored.key == "arch-1")
        // Delivered to consumers, in order.
        let consumer = try t.ledger.consumers.consumer(named: "host")
        let batch = try consumer.next(limit: 10)
        #expect(batch.events.map(\.type) == ["inbox.synced", "inbox.archived"])
        // Skipped by the projections: the list is what it was (only the version bookkeeping moved).
        let after = try t.ledger.read({ try $0.widgetList() })
        #expect(after.items == before.items && after.unreadCount == before.unreadCount && after.badge == before.badge)
        #expect(try t.ledger.maintenance.verifyProjections() == nil)
        #expect(try t.ledger.maintenance.verify().isHealthy)

        // Shown as unknown by inspect.
        let human = try Processes.run(Processes.product("ledger"), ["inspect", t.path])
        #expect(human.status == 0, "\(human.stderr)")
        #expect(human.stdout.contains("inbox.archived (unknown) 1"), "\(human.stdout)")
        #expect(!human.stdout.contains("inbox.synced (unknown)"))
        let json = try Processes.run(Processes.product("ledger"), ["inspect", t.path, "--json"])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(object["unknownTypes"] as? [String] == ["inbox.archived"])
    }
}
