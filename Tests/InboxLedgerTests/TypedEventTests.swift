import Foundation
import Testing
import TestSupport
@testable import InboxLedger

/// An app's own `Codable` events: one canonical encoding (retries never conflict by accident),
/// typed decoding with errors that name the sequence and the field, and upcasters for payload
/// shapes that change between app versions.
@Suite struct TypedEventTests {
    struct NoteAdded: LedgerEvent, Equatable {
        static let eventType = "com.example.note-added"
        var noteID: String
        var text: String
        var tags: [String: Int] = [:]
        var items: [Item] = []
        struct Item: Codable, Equatable { var n: Int }
    }

    /// Version 2 of the same event: `text` became `body`, and notes can be pinned.
    struct NoteAddedV2: LedgerEvent, Equatable {
        static let eventType = "com.example.note-added"
        static let eventVersion = 2
        var noteID: String
        var body: String
        var pinned: Bool
    }

    /// Version 3: `body` split into a title and the rest.
    struct NoteAddedV3: LedgerEvent, Equatable {
        static let eventType = "com.example.note-added"
        static let eventVersion = 3
        var noteID: String
        var title: String
        var pinned: Bool
    }

    @Test func aTypedEventRoundTripsThroughTheLog() throws {
        let t = try TestLedger()
        let note = NoteAdded(noteID: "n1", text: "Buy milk", tags: ["home": 1], items: [.init(n: 7)])
        let seq = try t.ledger.append(note, key: "note-n1")
        let stored = try #require(try t.ledger.read({ try $0.event(at: seq) }))
        #expect(stored.type == "com.example.note-added" && stored.typeVersion == 1 && stored.baseType == NoteAdded.eventType)
        #expect(String(decoding: stored.payload, as: UTF8.self) == #"{"items":[{"n":7}],"noteID":"n1","tags":{"home":1},"text":"Buy milk"}"#)
        #expect(try stored.decode(as: NoteAdded.self) == note)
        // A version-2 type is stored as type@2.
        let v2 = try t.ledger.append(NoteAddedV2(noteID: "n2", body: "Hi", pinned: true))
        #expect(try t.ledger.read({ try $0.event(at: v2) })?.type == "com.example.note-added@2")
    }

    @Test func theSameValueAlwaysGivesTheSameBytesSoRetriesNeverConflict() throws {
        let t = try TestLedger()
        var generator = SeededGenerator(seed: 15)
        for round in 0..<200 {
            let keys = (0..<Int.random(in: 1...40, using: &generator)).map { "k\($0 * 7919 % 1000)-\(round)" }
            // Two dictionaries with equal contents built differently iterate (and so encode) in
            // different orders; the ledger must not care.
            var ascending: [String: Int] = [:]
            ascending.reserveCapacity(1024)
            for (i, k) in keys.enumerated() { ascending[k] = i }
            var descending: [String: Int] = [:]
            for (i, k) in keys.enumerated().reversed() { descending[k] = i }
            let a = NoteAdded(noteID: "n\(round)", text: "τέχνη \"\(round)\"\n", tags: ascending)
            let b = NoteAdded(noteID: "n\(round)", text: "τέχνη \"\(round)\"\n", tags: descending)
            #expect(try CanonicalJSON.encode(a) == CanonicalJSON.encode(b))
            let first = try t.ledger.append(a, key: "retry-\(round)")
            #expect(try t.ledger.append(b, key: "retry-\(round)") == first, "an equal value under the same key conflicted")
            // The canonical bytes are what the parser's canonical form of the encoder's output is.
            let viaFoundation = try JSONEncoder().encode(b)
            #expect(try CanonicalJSON.canonicalize(Array(viaFoundation)) == CanonicalJSON.encode(a))
        }
        #expect(try t.ledger.read({ try $0.count() }) == 200)
        #expect(throws: LedgerError.self) { try CanonicalJSON.encode(["x": Double.nan]) }
        #expect(String(decoding: try CanonicalJSON.encode(["b": 1.0, "a": 0.5]), as: UTF8.self) == #"{"a":0.5,"b":1}"#)
    }

    @Test func decodingErrorsNameTheSequenceAndTheField() throws {
        let t = try TestLedger()
        let missing = try t.ledger.append(NewEvent(type: NoteAdded.eventType, payload: Array(#"{"noteID":"n1"}"#.utf8)))
        let nested = try t.ledger.append(NewEvent(type: NoteAdded.eventType, payload: Array(#"{"noteID":"n1","text":"t","tags":{},"items":[{"n":1},{"n":"two"}]}"#.utf8)))
        let other = try t.ledger.append(.badgeAdjusted(.delta(1)))
        func failure(_ seq: UInt64) throws -> LedgerError? {
            let event = try #require(try t.ledger.read({ try $0.event(at: seq) }))
            do { _ = try event.decode(as: NoteAdded.self); return nil } catch { return error }
        }
        guard case .eventDecoding(missing, _, "data.text", "missing")? = try failure(missing) else {
            Issue.record("missing field: \(String(describing: try failure(missing)))"); return
        }
        guard case .eventDecoding(nested, _, "data.items[1].n", _)? = try failure(nested) else {
            Issue.record("nested field: \(String(describing: try failure(nested)))"); return
        }
        guard case .eventDecoding(other, "badge.adjusted", "type", _)? = try failure(other) else {
            Issue.record("other type: \(String(describing: try failure(other)))"); return
        }
        #expect(try failure(nested)?.description.hasPrefix("event \(nested) (com.example.note-added): data.items[1].n:") == true)
        // A version the type does not have is named too.
        let v2 = try t.ledger.append(NoteAddedV2(noteID: "n", body: "b", pinned: false))
        guard case .eventDecoding(v2, _, "type", let reason)? = try failure(v2) else { Issue.record("version"); return }
        #expect(reason.contains("version 2"))
    }

    @Test func upcastersUpgradeOldPayloadsAsTheyAreReadAndNeverRewriteThem() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        let old = try Ledger(path: path, options: LedgerOptions(role: "app-v1"))
        let first = try old.append(NoteAdded(noteID: "n1", text: "Groceries: milk"), key: "n1")
        let second = try old.append(NoteAddedV2(noteID: "n2", body: "Call: Bob", pinned: true))
        let raw = try old.read({ try $0.events(after: 0) })

        var options = LedgerOptions(role: "app-v3")
        options.upcasters = [
            EventUpcaster(NoteAdded.self, to: NoteAddedV2.self) { v1 in NoteAddedV2(noteID: v1.noteID, body: v1.text, pinned: false) },
            EventUpcaster(eventType: NoteAdded.eventType, fromVersion: 2) { value in
                guard case .object(var fields) = value, case .string(let body)? = fields["body"] else { throw CocoaError(.coderReadCorrupt) }
                fields["title"] = .string(String(body.split(separator: ":").first ?? ""))
                fields["body"] = nil
                return .object(fields)
            },
        ]
        let upgraded = try Ledger(path: path, options: options)
        let events = try upgraded.read({ try $0.events(after: 0) })
        #expect(events.map(\.type) == ["com.example.note-added@3", "com.example.note-added@3"])
        #expect(try events.map { try $0.decode(as: NoteAddedV3.self) } == [
            NoteAddedV3(noteID: "n1", title: "Groceries", pinned: false), NoteAddedV3(noteID: "n2", title: "Call", pinned: true),
        ])
        #expect(try upgraded.read({ try $0.event(at: second) })?.decode(as: NoteAddedV3.self).title == "Call")
        // A consumer reads the upgraded form as well.
        let batch = try upgraded.consumers.consumer(named: "host").next()
        #expect(batch.events.map(\.type) == events.map(\.type))
        // Nothing was rewritten: the stored bytes, and so the idempotency digest, are as written.
        let plain = try Ledger(path: dir.child("ledger"), options: LedgerOptions(role: "reader"))
        #expect(try plain.read({ try $0.events(after: 0) }) == raw)
        #expect(try upgraded.append(NoteAdded(noteID: "n1", text: "Groceries: milk"), key: "n1") == first)
        #expect(try upgraded.maintenance.verify().isHealthy)

        // An upcaster whose result has no JSON form (a NaN deep inside) fails the read, naming
        // the event, instead of storing null in its place.
        var nonFinite = LedgerOptions(role: "nan")
        nonFinite.upcasters = [EventUpcaster(eventType: NoteAdded.eventType, fromVersion: 1) { _ in .object(["x": .array([.number(.nan)])]) }]
        do {
            _ = try Ledger(path: path, options: nonFinite).read { try $0.events(after: 0) }
            Issue.record("a NaN from an upcaster was accepted")
        } catch {
            guard case .eventDecoding(first, _, "data", let reason) = error else { Issue.record("\(error)"); return }
            #expect(reason.contains("cannot be encoded"))
        }

        // An upcaster that fails names the event.
        var failing = LedgerOptions(role: "broken")
        failing.upcasters = [EventUpcaster(eventType: NoteAdded.eventType, fromVersion: 1) { _ in throw CocoaError(.coderReadCorrupt) }]
        let broken = try Ledger(path: path, options: failing)
        do {
            _ = try broken.read({ try $0.events(after: 0) })
            Issue.record("a failing upcaster went unnoticed")
        } catch {
            guard case .eventDecoding(first, _, "data", let reason) = error else { Issue.record("\(error)"); return }
            #expect(reason.contains("upcaster from version 1"))
        }
    }
}
