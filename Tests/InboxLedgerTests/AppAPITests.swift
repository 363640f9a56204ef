import Foundation
import Testing
import TestSupport
@testable import InboxLedger

/// What an app's own tests and views need: a throw-away ledger, a clock it controls, and read
/// models it can put in a SwiftUI list, a widget timeline or a cache as they are.
@Suite struct AppAPITests {
    @Test func aTemporaryLedgerLivesOnTmpfsAndIsRemovedWithItsLastHandle() throws {
        var path = ""
        do {
            let ledger = try Ledger.temporary()
            path = ledger.path
            #if os(Linux)
            #expect(path.hasPrefix("/dev/shm/"), "a temporary ledger belongs on tmpfs when there is one")
            #endif
            try ledger.append(.badgeAdjusted(.delta(2)))
            // A second handle on the same directory keeps it alive after the first is gone.
            let second = try Ledger(path: path, options: LedgerOptions(role: "other"))
            _ = consume ledger
            #expect(FileManager.default.fileExists(atPath: path + "/data.mdb"))
            #expect(try second.read({ try $0.badge() }) == 2)
        }
        #expect(!path.isEmpty)
        #expect(!FileManager.default.fileExists(atPath: path), "the directory outlived its last handle")
        // Each call gets its own ledger.
        let a = try Ledger.temporary(), b = try Ledger.temporary()
        #expect(a.path != b.path)
        #expect(try a.read({ try $0.count() }) == 0 && b.read({ try $0.count() }) == 0)
    }

    @Test func anInjectedClockStampsCommitsAndDecidesExpiry() throws {
        let start = Timestamp(iso8601: "2026-11-22T08:00:00Z")!
        let clock = ManualClock(start)
        var options = LedgerOptions(role: "test")
        options.clock = clock.ledgerClock
        let ledger = try Ledger.temporary(options: options)
        #expect(ledger.metadata.createdAtMicros == start.micros)
        let expires = Timestamp(iso8601: "2026-11-22T09:00:00Z")!
        try ledger.append(.inboxSynced(InboxSync(mode: .delta, messages: [
            InboxMessage(id: "flash", title: "Flash sale", sentAt: start, expiresAt: expires),
            InboxMessage(id: "news", title: "News", sentAt: start),
        ])))
        let stored = try ledger.read({ try $0.events(after: 0, limit: 1) })
        #expect(stored.first?.timestampMicros == start.micros, "the commit was not stamped by the injected clock")
        #expect(try ledger.read({ try $0.widgetList() }).items.map(\.id) == ["flash", "news"] || ledger.read({ try $0.widgetList() }).items.map(\.id) == ["news", "flash"])
        #expect(try ledger.read({ try $0.badge() }) == 2)
        #expect(try ledger.read({ try $0.widgetList() }).nextExpiry == expires)

        clock.advance(seconds: 3599)
        #expect(try ledger.read({ try $0.widgetList() }).items.count == 2, "expired a second early")
        clock.advance(seconds: 1)
        #expect(try ledger.read({ try $0.widgetList() }).items.map(\.id) == ["news"], "the expired message is still shown")
        #expect(try ledger.read({ try $0.badge() }) == 1)
        // The next commit carries the clock's time.
        clock.set(Timestamp(iso8601: "2030-01-01T00:00:00Z")!)
        let seq = try ledger.append(.badgeAdjusted(.delta(1)))
        #expect(try ledger.read({ try $0.events(after: seq - 1, limit: 1) }).first?.timestampMicros == clock.now.micros)
        #expect(LedgerClock.fixed(start).now() == start)
    }

    @Test func readModelsAreIdentifiableCodableAndBridgeToDate() throws {
        let t = try TestLedger(role: "widget")
        let sent = Timestamp(iso8601: "2026-11-22T08:00:00.250Z")!
        try t.ledger.append(.inboxSynced(InboxSync(mode: .delta, messages: [
            InboxMessage(id: "m1", title: "Hello", subheading: "there", sentAt: sent, extras: ["k": "v"]),
        ])))
        try t.ledger.append(.widgetAction(WidgetAction(actionID: "a1", kind: .markRead, target: "m1")))
        let list = try t.ledger.read({ try $0.widgetList() })
        let actions = try t.ledger.read({ try $0.pendingActions() })
        let events = try t.ledger.read({ try $0.events(after: 0, limit: 10) })
        let message = try #require(try t.ledger.read({ try $0.message(id: "m1") }))
        #expect(list.items.map(\.id) == ["m1"])
        #expect(actions.map(\.id) == [2] && actions.first?.kind == .markRead)
        #expect(events.map(\.id) == [1, 2])
        #expect(message.id == "m1")

        func roundTrip<T: Codable & Equatable>(_ value: T) throws {
            let data = try JSONEncoder().encode(value)
            #expect(try JSONDecoder().decode(T.self, from: data) == value, "\(T.self) does not round-trip: \(String(decoding: data, as: UTF8.self))")
        }
        try roundTrip(list)
        try roundTrip(actions)
        try roundTrip(events)
        try roundTrip(message)
        try roundTrip(try t.ledger.consumers.consumer(named: "host").next())
        // Timestamps are ISO 8601 text in JSON, exact to the microsecond.
        #expect(String(decoding: try JSONEncoder().encode(sent), as: UTF8.self) == #""2026-11-22T08:00:00.25Z""#)
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(Timestamp.self, from: Data(#""yesterday""#.utf8)) }
        // Date bridges, both ways.
        #expect(sent.date == Date(timeIntervalSince1970: 1_795_334_400.25))
        #expect(Timestamp(sent.date) == sent)
        #expect(Timestamp(Date(timeIntervalSince1970: -1.5)).micros == -1_500_000)
        // Built-in payloads decode with the ledger's own validation.
        let sync = try JSONDecoder().decode(InboxSync.self, from: Data(#"{"mode":"delta","messages":[{"id":"x","title":"T","sentAt":"2026-11-22T08:00:00Z"}]}"#.utf8))
        #expect(sync.messages.first?.id == "x")
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(ReadChange.self, from: Data(#"{"ids":[],"read":true}"#.utf8))
        }
    }

    @Test func errorsSayWhatToDoThroughLocalizedError() throws {
        let error: any Error = LedgerError.writerBusy(path: "/x", holder: 42, waitedSeconds: 5)
        #expect(error.localizedDescription.contains("process 42"))
        let suggestion = (error as? LocalizedError)?.recoverySuggestion ?? ""
        #expect(suggestion.contains("nothing was written"))
        let missing = LedgerError.notALedger(path: "/nowhere", reason: "no such directory")
        #expect((missing as LocalizedError).errorDescription == missing.description)
    }
}
