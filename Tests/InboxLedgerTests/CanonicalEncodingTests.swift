import Foundation
import Testing
import TestSupport
@testable import InboxLedger

/// Each built-in payload has one encoder; its stored bytes must stay what they were when typed
/// events went through JSONEncoder and the canonical writer (idempotency digests depend on
/// them). The reference here is independent of the encoders: JSON text written by hand from
/// the same fields, then canonicalised.
@Suite struct CanonicalEncodingTests {
    /// A JSON string literal for `s` (Foundation's escaping; canonicalisation normalises it).
    func quoted(_ s: String) -> String {
        let data = (try? JSONSerialization.data(withJSONObject: [s], options: [.fragmentsAllowed])) ?? Data("[\"\"]".utf8)
        return String(decoding: data.dropFirst().dropLast(), as: UTF8.self)
    }

    func text(_ value: JSONValue) -> String {
        switch value {
        case .null: "null"
        case .bool(let b): b ? "true" : "false"
        case .integer(let i): String(i)
        case .number(let d): "\(d)"
        case .string(let s): quoted(s)
        case .array(let a): "[" + a.map(text).joined(separator: " , ") + "]"
        case .object(let o): "{ " + o.map { quoted($0.key) + ": " + text($0.value) }.joined(separator: ", ") + " }"
        }
    }

    func randomString(_ rng: inout SeededGenerator) -> String {
        let alphabet: [String] = ["a", "Z", "é", "😀", "\"", "\\", "/", "\n", "\u{01}", " ", "ß", "中", "\t"]
        return (0..<Int.random(in: 1...12, using: &rng)).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &rng)] }.joined()
    }

    func randomJSON(_ rng: inout SeededGenerator, depth: Int = 0) -> JSONValue {
        switch Int.random(in: 0...(depth > 2 ? 4 : 6), using: &rng) {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &rng))
        case 2: return .integer(Int64.random(in: -1_000_000...1_000_000, using: &rng))
        case 3: return .number([0.5, -2.25, 1e-7, 3.0e20, 0.1][Int.random(in: 0..<5, using: &rng)])
        case 4: return .string(randomString(&rng))
        case 5: return .array((0..<Int.random(in: 0...3, using: &rng)).map { _ in randomJSON(&rng, depth: depth + 1) })
        default:
            var o: [String: JSONValue] = [:]
            for _ in 0..<Int.random(in: 0...3, using: &rng) { o[randomString(&rng)] = randomJSON(&rng, depth: depth + 1) }
            return .object(o)
        }
    }

    func maybe<T>(_ present: Bool, _ make: () -> T) -> T? { present ? make() : nil }

    /// A random built-in event and the hand-written JSON of its payload.
    func randomEvent(_ rng: inout SeededGenerator) -> (DomainEvent, String) {
        let when = Timestamp(micros: Int64.random(in: 0...4_000_000_000_000_000, using: &rng))
        switch Int.random(in: 0..<8, using: &rng) {
        case 7:
            let settled = SharedSettlement(sequence: UInt64.random(in: 1...UInt64(Int64.max), using: &rng),
                                           position: maybe(Bool.random(using: &rng)) { UInt64.random(in: 1...1_000_000, using: &rng) })
            let position = settled.position.map { ", \"position\": \($0)" } ?? ""
            return (.sharedSettled(settled), "{\"seq\": \(settled.sequence)\(position)}")
        case 5:
            let removal = MessageRemoval(ids: (0..<Int.random(in: 1...3, using: &rng)).map { "id\($0)" + randomString(&rng) })
            return (.messageRemoved(removal), "{\"ids\": [\(removal.ids.map(quoted).joined(separator: ","))]}")
        case 6:
            let id = "p-" + randomString(&rng)
            let message = maybe(Bool.random(using: &rng)) { InboxMessage(id: id, title: randomString(&rng), sentAt: when) }
            let push = PushReceived(messageID: id, message: message, badge: maybe(Bool.random(using: &rng)) { Int.random(in: 0...1000, using: &rng) })
            var parts = ["\"messageID\": \(quoted(id))"]
            if let m = message { parts.append("\"message\": {\"title\": \(quoted(m.title)), \"id\": \(quoted(id)), \"sentAt\": \(quoted(when.iso8601))}") }
            if let b = push.badge { parts.append("\"badge\": \(b)") }
            return (.pushReceived(push), "{" + parts.shuffled(using: &rng).joined(separator: ", ") + "}")
        case 0:
            var fields: [String] = []
            let messages = (0..<Int.random(in: 0...3, using: &rng)).map { i -> InboxMessage in
                let m = InboxMessage(id: "m\(i)-" + randomString(&rng), title: randomString(&rng), subheading: maybe(Bool.random(using: &rng)) { randomString(&rng) },
                                     iconURL: maybe(Bool.random(using: &rng)) { "https://x.example/\(i).png" }, sentAt: when, expiresAt: maybe(Bool.random(using: &rng)) { when },
                                     read: maybe(Bool.random(using: &rng)) { Bool.random(using: &rng) }, extras: maybe(Bool.random(using: &rng)) { ["k": randomString(&rng)] })
                var parts = ["\"id\": \(quoted(m.id))", "\"title\": \(quoted(m.title))", "\"sentAt\": \(quoted(m.sentAt.iso8601))"]
                if let s = m.subheading { parts.append("\"subheading\": \(quoted(s))") }
                if let u = m.iconURL { parts.append("\"iconURL\": \(quoted(u))") }
                if let e = m.expiresAt { parts.append("\"expiresAt\": \(quoted(e.iso8601))") }
                if let r = m.read { parts.append("\"read\": \(r)") }
                if let x = m.extras { parts.append("\"extras\": {" + x.map { "\(quoted($0.key)): \(quoted($0.value))" }.joined(separator: ",") + "}") }
                fields.append("{" + parts.shuffled(using: &rng).joined(separator: ",") + "}")
                return m
            }
            let removed = Bool.random(using: &rng) ? ["gone-" + randomString(&rng)] : []
            let sync = InboxSync(mode: Bool.random(using: &rng) ? .full : .delta, messages: messages, removed: removed)
            var json = "{\"mode\": \"\(sync.mode.rawValue)\", \"messages\": [\(fields.joined(separator: ","))]"
            if !removed.isEmpty { json += ", \"removed\": [\(removed.map(quoted).joined(separator: ","))]" }
            return (.inboxSynced(sync), json + "}")
        case 1:
            let change = ReadChange(ids: (0..<Int.random(in: 1...3, using: &rng)).map { "id\($0)" + randomString(&rng) }, read: Bool.random(using: &rng))
            return (.messageRead(change), "{\"read\": \(change.read), \"ids\": [\(change.ids.map(quoted).joined(separator: ","))]}")
        case 2:
            let action = WidgetAction(actionID: "a-" + randomString(&rng), kind: .custom, target: maybe(Bool.random(using: &rng)) { randomString(&rng) },
                                      name: "n-" + randomString(&rng),
                                      // A payload of null reads back as no payload (null is absence in the decoder).
                                      payload: maybe(Bool.random(using: &rng)) { .array([randomJSON(&rng)]) })
            var parts = ["\"actionID\": \(quoted(action.actionID))", "\"kind\": \"custom\"", "\"name\": \(quoted(action.name ?? ""))"]
            if let t = action.target { parts.append("\"target\": \(quoted(t))") }
            if let p = action.payload { parts.append("\"payload\": \(text(p))") }
            return (.widgetAction(action), "{" + parts.joined(separator: ", ") + "}")
        case 3:
            let done = ActionCompletion(actionID: "a-" + randomString(&rng), outcome: [.done, .failed, .discarded][Int.random(in: 0..<3, using: &rng)],
                                        reason: maybe(Bool.random(using: &rng)) { randomString(&rng) })
            var parts = ["\"actionID\": \(quoted(done.actionID))", "\"outcome\": \"\(done.outcome.rawValue)\""]
            if let r = done.reason { parts.append("\"reason\": \(quoted(r))") }
            return (.actionCompleted(done), "{" + parts.joined(separator: ",") + "}")
        default:
            let n = Int.random(in: -1000...1000, using: &rng)
            return Bool.random(using: &rng) ? (.badgeAdjusted(.delta(n)), "{\"delta\": \(n)}") : (.badgeAdjusted(.set(abs(n))), "{\"set\": \(abs(n))}")
        }
    }

    @Test func typedEventsEncodeToTheSameCanonicalBytesAsBefore() throws {
        var rng = SeededGenerator(seed: 2026)
        for _ in 0..<2000 {
            let (event, json) = randomEvent(&rng)
            let stored = try event.newEvent().payload
            let reference = try EventJSON.canonicalize(Array(json.utf8))
            #expect(stored == reference, "\(event.type): \(String(decoding: stored, as: UTF8.self)) vs \(String(decoding: reference, as: UTF8.self))")
            // And it decodes back to the same event.
            let decoded = try DomainEvent.decode(type: event.type, payload: stored)
            #expect(decoded == event, "\(decoded) vs \(event)")
        }
    }

    /// The idempotency digest stored with every keyed event (FNV-1a 64 over the type, a zero
    /// byte and the payload) never changes: a retry after an upgrade must still be recognised.
    /// The value is FNV-1a computed outside Swift (Python) for these bytes.
    @Test func theContentDigestIsPinned() {
        #expect(ContentDigest.of(type: "badge.adjusted", payload: Array(#"{"delta":1}"#.utf8)) == 0x0146_E110_3F2A_B7EB)
    }

    /// The typed append path (validated on the typed value, encoded once, never parsed) stores
    /// exactly what the JSON path stores for the same event, so digests match across paths: a
    /// retry of a typed event as JSON (or the reverse) under the same key is recognised.
    @Test func theTypedAppendPathStoresTheJSONPathsBytes() throws {
        let typed = try TestLedger(role: "app")
        let json = try TestLedger(role: "app")
        var rng = SeededGenerator(seed: 14)
        for i in 0..<500 {
            let (event, text) = randomEvent(&rng)
            let key = "k\(i)"
            let typedSeq: UInt64
            do { typedSeq = try typed.ledger.append(event, key: key) } catch {
                // Both paths refuse the same events, with the same error.
                #expect(throws: error) { try json.ledger.append(NewEvent(type: event.type, payload: Array(text.utf8), key: key)) }
                continue
            }
            let jsonSeq = try json.ledger.append(NewEvent(type: event.type, payload: try EventJSON.canonicalize(Array(text.utf8)), key: key))
            let a = try #require(try typed.ledger.read({ try $0.event(at: typedSeq) })), b = try #require(try json.ledger.read({ try $0.event(at: jsonSeq) }))
            #expect(a.payload == b.payload && a.type == b.type, "\(event.type): \(String(decoding: a.payload, as: UTF8.self)) vs \(String(decoding: b.payload, as: UTF8.self))")
            // The same event again through the other path is a retry, not a conflict.
            #expect(try typed.ledger.append(try EventJSON.parse(#"{"type":"\#(event.type)","key":"\#(key)","data":\#(text)}"#)) == typedSeq)
            #expect(try json.ledger.append(event, key: key) == jsonSeq)
        }
        #expect(try typed.ledger.maintenance.verifyProjections() == nil && json.ledger.maintenance.verifyProjections() == nil)
        // The same lists (commit times aside: two ledgers, two clocks).
        var a = try typed.ledger.read({ try $0.widgetList(limit: 100) }), b = try json.ledger.read({ try $0.widgetList(limit: 100) })
        a.updatedAt = nil
        b.updatedAt = nil
        #expect(a == b)
    }

    /// How dates were always written (the string-building form the digit-by-digit writer
    /// replaced): the reference stored bytes and digests depend on.
    static func referenceISO8601(_ micros: Int64) -> String {
        let seconds = micros >= 0 ? micros / 1_000_000 : (micros - 999_999) / 1_000_000
        let fraction = Int(micros - seconds * 1_000_000)
        let days = Int(seconds >= 0 ? seconds / 86400 : (seconds - 86399) / 86400)
        let secondOfDay = Int(seconds) - days * 86400
        let (y, m, d) = Timestamp.civilFromDays(days)
        func pad(_ v: Int, _ n: Int) -> String {
            let s = String(v)
            return String(repeating: "0", count: max(0, n - s.count)) + s
        }
        var text = "\(pad(y, 4))-\(pad(m, 2))-\(pad(d, 2))T\(pad(secondOfDay / 3600, 2)):\(pad(secondOfDay / 60 % 60, 2)):\(pad(secondOfDay % 60, 2))"
        if fraction != 0 {
            var f = pad(fraction, 6)
            while f.hasSuffix("0") { f.removeLast() }
            text += "." + f
        }
        return text + "Z"
    }

    /// The canonical writer formats dates digit by digit; it must give exactly the reference
    /// text (stored bytes and digests depend on it), for any instant.
    @Test func datesAreWrittenExactlyAsTheGeneralForm() throws {
        var rng = SeededGenerator(seed: 8601)
        let edges: [Int64] = [0, -1, 1, 999_999, 1_000_000, -1_000_000, 253_402_300_799_999_999, 253_402_300_800_000_000, -62_167_219_200_000_000, -62_167_219_200_000_001]
        for micros in edges + (0..<20_000).map({ _ in Int64.random(in: -100_000_000_000_000_000...400_000_000_000_000_000, using: &rng) }) {
            let t = Timestamp(micros: micros)
            #expect(t.iso8601 == Self.referenceISO8601(micros), "\(micros)")
            if t.iso8601.count <= 27, let back = Timestamp(iso8601: t.iso8601) { #expect(back == t, "\(t.iso8601)") }
        }
    }

    @Test func everyBuiltInTypeDecodesAsItselfNeverAsAnother() throws {
        #expect(DomainEvent.builtInTypes == Set(BuiltInEventType.allCases.map(\.rawValue)))
        var rng = SeededGenerator(seed: 9)
        var seen = Set<BuiltInEventType>()
        for _ in 0..<200 {
            let (event, _) = randomEvent(&rng)
            let decoded = try DomainEvent.decode(type: event.type, payload: try event.newEvent().payload)
            #expect(decoded.builtInType == event.builtInType && decoded.type == event.type)
            if let type = decoded.builtInType { seen.insert(type) }
        }
        #expect(seen == Set(BuiltInEventType.allCases), "the generator missed a built-in type")
        // A name outside the registry is custom, whatever its payload.
        #expect(try DomainEvent.decode(type: "badge.adjusted2", payload: Array(#"{"delta":1}"#.utf8)).builtInType == nil)
    }
}
