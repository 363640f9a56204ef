import Foundation
import Testing
import TestSupport
@testable import InboxLedger
import LMDB

extension Ledger {
    /// Stores `events` as another library version whose rules this one does not share did: an
    /// older one that knew their names only as custom types, or a newer one with built-in types
    /// this one does not know. No namespace check, no validation, nothing projected.
    @discardableResult
    func storeAsOtherLibrary(_ events: [NewEvent]) throws -> [UInt64] {
        let prepared = events.map { PreparedEvent(type: $0.type, key: $0.key, payload: $0.payload, domain: .custom(type: $0.type, payload: $0.payload)) }
        return try log.submit(prepared, cursor: nil).sequences
    }
}

/// The built-in types own their names and namespace (docs/events.md, "Type names"): custom
/// types that collide or could collide are refused; events an older library stored under a
/// name that is built-in now stay custom events, so the ledger stays writable and verifiable.
@Suite struct EventNamespaceTests {
    @Test func customTypesInTheBuiltInsNamespaceAreRefusedAndNothingIsWritten() throws {
        let t = try TestLedger()
        for name in ["Message.Read", "MESSAGE.READ", "Badge.Adjusted", "message.archived", "inbox", "Push.Received", "push.opened",
                     "badge.adjusted2", "widget@2", "inbox.synced@2", "action.completed.v2"] {
            do {
                try t.ledger.append(contentsOf: [event("com.example.ok"), event(name, "{}")])
                Issue.record("\(name) was accepted")
            } catch {
                guard case .invalidEvent(1, "type", let reason) = error else { Issue.record("\(name): \(error)"); continue }
                #expect(reason.contains("'\(name)'") && reason.contains("com.example.note-saved"), "\(reason)")
            }
        }
        // Typed custom events and app-defined types go through the same check.
        #expect(throws: LedgerError.self) { try t.ledger.append(.custom(type: "Widget.Action", payload: Array("{}".utf8))) }
        struct Misnamed: LedgerEvent { static let eventType = "message.note"; var text: String }
        #expect(throws: LedgerError.self) { try t.ledger.append(Misnamed(text: "hi")) }
        #expect(try t.ledger.read({ try $0.head() }) == 0)

        // Elsewhere, names are the app's, including ones that merely contain a built-in's.
        for name in ["com.example.message.read", "messages.read", "inboxes", "note.saved", "x.inbox.synced"] {
            try t.ledger.append(event(name))
        }
        #expect(try t.ledger.read({ try $0.head() }) == 5)
    }

    @Test func aCaseVariantOfABuiltInNamesTheBuiltIn() throws {
        let t = try TestLedger()
        #expect(throws: LedgerError.invalidEvent(index: 0, field: "type", reason: "'Message.Read' differs from the built-in type 'message.read' only in case; built-in names are exact, and name custom types in a namespace of your own, e.g. com.example.note-saved (docs/events.md, \"Type names\")")) {
            try t.ledger.append(event("Message.Read", #"{"ids":["m1"],"read":true}"#))
        }
        #expect(BuiltInEventType.isReserved("message.archived") && BuiltInEventType.isReserved("PUSH"))
        #expect(!BuiltInEventType.isReserved("com.example.note-saved"))
        #expect(BuiltInEventType.reservedNamespaces.isSuperset(of: ["inbox", "message", "widget", "action", "badge", "push"]))
    }

    @Test func theCommandRefusesThemWithExitOne() throws {
        let t = try TestLedger()
        let out = try Processes.run(Processes.product("ledger"), ["append", t.path],
                                    input: Data(#"{"type":"Message.Read","data":{"ids":["m1"],"read":true}}"#.utf8 + [0x0A]))
        #expect(out.status == 1, "\(out.stderr)")
        #expect(out.stderr.contains("'Message.Read' differs from the built-in type 'message.read' only in case"), "\(out.stderr)")
        #expect(try t.ledger.read({ try $0.head() }) == 0)
    }

    /// A ledger written by a library of the previous projection rules, which knew
    /// `message.removed` and `push.received` only as custom names, and accepted `Message.Read`.
    @Test func customEventsAnOlderLibraryStoredUnderNamesBuiltInNowStayCustom() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        do {
            let old = try Ledger(path: path, options: LedgerOptions(role: "app-old"))
            try old.append(.inboxSynced(InboxSync(mode: .full, messages: [msg("m1"), msg("m2")])))
            try old.storeAsOtherLibrary([
                event("message.removed", #"{"ids":["m1"]}"#),          // valid as today's built-in: would remove m1
                event("push.received", #"{"messageID":"m9"}"#),        // valid: would count in the badge
                event("push.received", #"{"campaign":"c1"}"#),         // invalid as today's built-in
                event("Message.Read", #"{"ids":["m2"],"read":true}"#), // a case variant
            ])
            // What that library left: projections of its rules, no record of the later built-ins.
            try old.write("simulate the older library") { txn in
                try txn.meta.put(Meta.projectionVersion, ProjectionRules.version - 1)
                for type in BuiltInEventType.allCases where !type.isOriginal {
                    _ = try txn.rawTransaction.delete(old.schema.meta, key: Schema.MetaKey.builtInSince(type))
                }
            }
        }
        // Today's library opens it writable: the projections are rebuilt by today's rules.
        let ledger = try Ledger(path: path, options: LedgerOptions(role: "app"))
        #expect(ledger.metadata.projectionVersion == ProjectionRules.version)
        var list = try ledger.read({ try $0.widgetList() })
        #expect(Set(list.items.map(\.id)) == ["m1", "m2"] && list.unreadCount == 2 && list.badge == 2)
        #expect(try ledger.maintenance.verifyProjections() == nil)
        #expect(try ledger.maintenance.verify().isHealthy)
        #expect(try ledger.read({ try $0.event(at: 3) })?.type == "push.received", "stored events are kept as they are")

        // Appends keep working, and the names are built-in from here on.
        try ledger.append(.messageRemoved(MessageRemoval(ids: ["m1"])))
        try ledger.append(.pushReceived(PushReceived(messageID: "m9")))
        list = try ledger.read({ try $0.widgetList() })
        #expect(list.items.map(\.id) == ["m2"])
        #expect(try ledger.maintenance.verifyProjections() == nil)

        // A rebuild after reopening (the record persists) gives the same.
        try ledger.write("force a rebuild") { txn in try txn.meta.put(Meta.projectionVersion, ProjectionRules.version - 1) }
        let reopened = try Ledger(path: path, options: LedgerOptions(role: "app"))
        #expect(try reopened.read({ try $0.widgetList() }) == list)
        #expect(try reopened.maintenance.verifyProjections() == nil)
    }

    @Test func aNewLedgerInterpretsTheLaterBuiltInsFromItsFirstEvent() throws {
        let t = try TestLedger()
        let since = try t.ledger.read("probe") { txn in try txn.meta.builtInBoundaries().since }
        #expect(since == Dictionary(uniqueKeysWithValues: BuiltInEventType.allCases.filter { !$0.isOriginal }.map { ($0, UInt64(1)) }))
        try t.ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [msg("m1"), msg("m2")])))
        try t.ledger.append(.messageRemoved(MessageRemoval(ids: ["m1"])))
        #expect(try t.ledger.read({ try $0.widgetList() }).items.map(\.id) == ["m2"])
        #expect(try t.ledger.maintenance.verifyProjections() == nil)
    }
}
