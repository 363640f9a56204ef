import Testing
import TestSupport
@testable import InboxLedger

/// The streaming payload decoder (`PayloadReader`) against an independent model: the decoder it
/// replaced, kept here — parse the whole document into a `JSONValue` tree, then read each field
/// from the dictionaries in the payload's order. On random documents built to hit every rule
/// (wrong types, nulls, missing and unknown keys, duplicate and escaped keys, bad dates, ids of
/// the wrong length, inexact numbers, deep nesting, trailing bytes, truncation), both must give
/// the same typed event or the same error, field path and message included.
@Suite struct PayloadDecoderModelTests {
    @Test func streamingDecoderAgreesWithTheTreeDecoderOnRandomDocuments() {
        var rng = SeededGenerator(seed: 20261123)
        var outcomes: [String: Int] = [:]
        for round in 0..<40_000 {
            let type = BuiltInEventType.allCases[round % BuiltInEventType.allCases.count]
            var document = Array(Generator.document(type, &rng).utf8)
            if Int.random(in: 0..<10, using: &rng) == 0, !document.isEmpty {
                // A byte-level fault on top: truncation, a flipped bit, a stray byte.
                let at = Int.random(in: 0..<document.count, using: &rng)
                switch Int.random(in: 0..<3, using: &rng) {
                case 0: document.removeLast(document.count - at)
                case 1: document[at] ^= UInt8(1 << Int.random(in: 0..<8, using: &rng))
                default: document.insert(UInt8.random(in: 0...255, using: &rng), at: at)
                }
            }
            let streamed = Self.describe { () throws(LedgerError) in try DomainEvent.decode(type: type.rawValue, payload: document) }
            let model = Self.describe { () throws(LedgerError) in try TreeDecoder.decode(type, document) }
            #expect(streamed == model, "\(String(decoding: document, as: UTF8.self))")
            if streamed != model { return }
            switch streamed {
            case .decoded: outcomes["ok", default: 0] += 1
            case .refused(let message): outcomes[String(message.split(separator: ":").dropFirst().first ?? ""), default: 0] += 1
            }
        }
        // The generator reaches valid documents and errors on many different fields.
        #expect(outcomes["ok", default: 0] > 2_000)
        #expect(outcomes.count > 25, "\(outcomes)")
    }

    /// Hostile input: a payload of 200,000 unknown keys (and a map of as many extras) is read in
    /// one pass — duplicate keys are found by hashing, not by comparing each key with all before.
    @Test(.timeLimit(.minutes(10))) func manyKeysAreReadInLinearTime() throws {
        let keys = (0..<200_000).map { #""k\#($0)":0"# }.joined(separator: ",")
        let action = Array(#"{"actionID":"a","kind":"custom","name":"n",\#(keys)}"#.utf8)
        #expect(try DomainEvent.decode(type: "widget.action", payload: action).builtInType == .widgetAction)
        let extras = (0..<200_000).map { #""k\#($0)":"v""# }.joined(separator: ",")
        let sync = Array(#"{"mode":"delta","messages":[{"id":"m","title":"t","sentAt":"2026-11-22T08:00:00Z","extras":{\#(extras)}}]}"#.utf8)
        guard case .inboxSynced(let decoded) = try DomainEvent.decode(type: "inbox.synced", payload: sync) else { Issue.record("not a sync"); return }
        #expect(decoded.messages.first?.extras?.count == 200_000)
        #expect(throws: LedgerError.invalidEvent(index: 0, field: "data", reason: #"duplicate key "k0" in an object"#)) {
            try DomainEvent.decode(type: "widget.action", payload: Array(#"{"actionID":"a","kind":"custom","name":"n",\#(keys),"k0":1}"#.utf8))
        }
    }

    enum Outcome: Equatable {
        case decoded(DomainEvent)
        case refused(String)
    }

    static func describe(_ body: () throws(LedgerError) -> DomainEvent) -> Outcome {
        do { return .decoded(try body()) } catch { return .refused("\(error)") }
    }
}

/// The tree decoder the streaming one replaced, as it was: the model.
private enum TreeDecoder {
    struct Fields {
        let fields: [String: JSONValue]
        let path: String

        init(_ value: JSONValue, path: String) throws(FieldError) {
            guard case .object(let fields) = value else { throw FieldError(field: path, reason: "must be an object") }
            self.fields = fields
            self.path = path
        }

        func at(_ key: String) -> String { path + "." + key }

        func optional(_ key: String) -> JSONValue? {
            switch fields[key] {
            case nil, .null?: nil
            case let value?: value
            }
        }

        func required(_ key: String, _ kind: String) throws(FieldError) -> JSONValue {
            switch fields[key] {
            case nil: throw FieldError(field: at(key), reason: "missing")
            case .null?: throw FieldError(field: at(key), reason: "must be \(kind), not null")
            case let value?: return value
            }
        }

        func string(_ key: String) throws(FieldError) -> String {
            guard case .string(let s) = try required(key, "a string") else { throw FieldError(field: at(key), reason: "must be a string") }
            return s
        }

        func optionalString(_ key: String) throws(FieldError) -> String? {
            guard let value = optional(key) else { return nil }
            guard case .string(let s) = value else { throw FieldError(field: at(key), reason: "must be a string") }
            return s
        }

        func bool(_ key: String) throws(FieldError) -> Bool {
            guard case .bool(let b) = try required(key, "true or false") else { throw FieldError(field: at(key), reason: "must be true or false") }
            return b
        }

        func optionalBool(_ key: String) throws(FieldError) -> Bool? {
            guard let value = optional(key) else { return nil }
            guard case .bool(let b) = value else { throw FieldError(field: at(key), reason: "must be true or false") }
            return b
        }

        func optionalInteger(_ key: String) throws(FieldError) -> Int64? {
            switch optional(key) {
            case nil: return nil
            case .integer(let i)?: return i
            case .number(let d)? where d.rounded() == d && abs(d) <= 9_007_199_254_740_992: return Int64(d)
            default: throw FieldError(field: at(key), reason: "must be an integer")
            }
        }

        func date(_ key: String) throws(FieldError) -> Timestamp {
            let text = try string(key)
            guard let t = Timestamp(iso8601: text) else { throw FieldError(field: at(key), reason: "not an ISO 8601 date: \"\(text)\"") }
            return t
        }

        func optionalDate(_ key: String) throws(FieldError) -> Timestamp? {
            guard optional(key) != nil else { return nil }
            return try date(key)
        }

        func choice<T: RawRepresentable>(_ key: String, _ type: T.Type) throws(FieldError) -> T where T.RawValue == String {
            guard let value = T(rawValue: try string(key)) else { throw FieldError(field: at(key), reason: "not one of the allowed values") }
            return value
        }

        func array(_ key: String, optional: Bool = false) throws(FieldError) -> [(value: JSONValue, path: String)]? {
            if optional, self.optional(key) == nil { return nil }
            guard case .array(let items) = try required(key, "an array") else { throw FieldError(field: at(key), reason: "must be an array") }
            return items.enumerated().map { (value: $0.element, path: at(key) + "[\($0.offset)]") }
        }

        func strings(_ key: String, optional: Bool = false) throws(FieldError) -> [String]? {
            guard let items = try array(key, optional: optional) else { return nil }
            var out: [String] = []
            for item in items {
                guard case .string(let s) = item.value else { throw FieldError(field: item.path, reason: "must be a string") }
                out.append(s)
            }
            return out
        }
    }

    static func decode(_ type: BuiltInEventType, _ bytes: [UInt8]) throws(LedgerError) -> DomainEvent {
        let root: JSONValue
        do { root = try JSONParser.parse(bytes) } catch { throw .invalidEvent(index: 0, field: "data", reason: error.message) }
        do throws(FieldError) {
            let f = try Fields(root, path: "data")
            switch type {
            case .inboxSynced: return .inboxSynced(try sync(f))
            case .messageRead:
                let change = ReadChange(ids: try f.strings("ids") ?? [], read: try f.bool("read"))
                try change.validate(at: f.path)
                return .messageRead(change)
            case .widgetAction:
                let action = WidgetAction(actionID: try f.string("actionID"), kind: try f.choice("kind", WidgetAction.Kind.self),
                                          target: try f.optionalString("target"), name: try f.optionalString("name"), payload: f.optional("payload"))
                try action.validate(at: f.path)
                return .widgetAction(action)
            case .actionCompleted:
                let completion = ActionCompletion(actionID: try f.string("actionID"), outcome: try f.choice("outcome", ActionCompletion.Outcome.self),
                                                  reason: try f.optionalString("reason"))
                try completion.validate(at: f.path)
                return .actionCompleted(completion)
            case .badgeAdjusted:
                let adjustment: BadgeAdjustment
                switch (try f.optionalInteger("delta"), try f.optionalInteger("set")) {
                case (let d?, nil): adjustment = .delta(Int(d))
                case (nil, let s?): adjustment = .set(Int(s))
                case (nil, nil): throw FieldError(field: f.at("delta"), reason: "needs \"delta\" or \"set\"")
                case (_?, _?): throw FieldError(field: f.at("set"), reason: "give either delta or set, not both")
                }
                try adjustment.validate(at: f.path)
                return .badgeAdjusted(adjustment)
            case .messageRemoved:
                let removal = MessageRemoval(ids: try f.strings("ids") ?? [])
                try removal.validate(at: f.path)
                return .messageRemoved(removal)
            case .pushReceived:
                let messageID = try f.string("messageID")
                let message = try f.optional("message").map { (value) throws(FieldError) in try Self.message(try Fields(value, path: f.at("message"))) }
                let push = PushReceived(messageID: messageID, message: message, badge: try f.optionalInteger("badge").map { Int($0) })
                try push.validate(at: f.path)
                return .pushReceived(push)
            case .sharedSettled:
                _ = try f.required("seq", "an integer")  // absent or null: the required field's errors
                guard let seq = try f.optionalInteger("seq") else { throw FieldError(field: f.at("seq"), reason: "missing") }
                guard seq >= 1 else { throw FieldError(field: f.at("seq"), reason: "must be 1…\(Int64.max)") }
                let position = try f.optionalInteger("position")
                if let position, position < 1 { throw FieldError(field: f.at("position"), reason: "must be 1…\(Int64.max)") }
                return .sharedSettled(SharedSettlement(sequence: UInt64(seq), position: position.map { UInt64($0) }))
            }
        } catch {
            throw .invalidEvent(index: 0, field: error.field, reason: error.reason)
        }
    }

    static func sync(_ f: Fields) throws(FieldError) -> InboxSync {
        let mode = try f.choice("mode", InboxSync.Mode.self)
        var messages: [InboxMessage] = []
        for item in try f.array("messages") ?? [] { messages.append(try message(try Fields(item.value, path: item.path))) }
        let sync = InboxSync(mode: mode, messages: messages, removed: try f.strings("removed", optional: true) ?? [])
        try sync.validate(at: f.path)
        return sync
    }

    static func message(_ f: Fields) throws(FieldError) -> InboxMessage {
        let id = try f.string("id"), title = try f.string("title")
        let subheading = try f.optionalString("subheading"), iconURL = try f.optionalString("iconURL")
        let sentAt = try f.date("sentAt"), expiresAt = try f.optionalDate("expiresAt"), read = try f.optionalBool("read")
        var extras: [String: String]?
        if let value = f.optional("extras") {
            guard case .object(let map) = value else { throw FieldError(field: f.at("extras"), reason: "must be an object of strings") }
            var strings: [String: String] = [:]
            for (k, v) in map {
                guard case .string(let s) = v else { throw FieldError(field: f.at("extras"), reason: "must be an object of strings") }
                strings[k] = s
            }
            extras = strings
        }
        let message = InboxMessage(id: id, title: title, subheading: subheading, iconURL: iconURL, sentAt: sentAt,
                                   expiresAt: expiresAt, read: read, extras: extras)
        try message.validate(at: f.path)
        return message
    }
}

/// Random payload documents, as JSON text, mostly of the right shape with faults mixed in.
private enum Generator {
    typealias RNG = SeededGenerator

    static func chance(_ percent: Int, _ rng: inout RNG) -> Bool { Int.random(in: 0..<100, using: &rng) < percent }
    static func pick<T>(_ items: [T], _ rng: inout RNG) -> T { items[Int.random(in: 0..<items.count, using: &rng)] }

    /// Values of the wrong kind, some of them malformed or unstorable.
    static let strays = [
        "null", "true", "false", "0", "-7", "1.0", "1.5", "2e3", "-0", "1e400", "18446744073709551616",
        "0.10000000000000000001", "9007199254740993.0", "\"x\"", "\"\"", "[]", "{}", "[1, \"a\", null]",
        "{\"a\": 1, \"b\": [true]}", "{\"a\": 1, \"a\": 2}", "[1,]", "nul", "tru", "\"\\ud800\"", "\"\\u00e9\"",
        String(repeating: "[", count: 70) + String(repeating: "]", count: 70),
    ]

    static func stray(_ rng: inout RNG) -> String { pick(strays, &rng) }

    static func text(_ rng: inout RNG) -> String {
        pick(["\"hello\"", "\"Caf\\u00e9 \\\"news\\\"\"", "\"“curly” €\"", "\"line\\nbreak\"", "\"\\ud83d\\ude00\"", "\"\"",
              "\"" + String(repeating: "a", count: 200) + "\"", "\"" + String(repeating: "b", count: 201) + "\""], &rng)
    }

    static func id(_ rng: inout RNG) -> String {
        chance(85, &rng) ? "\"m\(Int.random(in: 0..<6, using: &rng))\"" : text(&rng)
    }

    static func date(_ rng: inout RNG) -> String {
        pick(["\"2026-11-22T08:00:00Z\"", "\"2026-11-22T09:00:00.250+01:00\"", "\"2026-02-30T00:00:00Z\"", "\"yesterday\"",
              "\"2026\\u002d11-22T08:00:00Z\"", "\"2026-11-22T08:00:00\"", "\"2026-11-22 08:00:00.5z\""], &rng)
    }

    /// A value for a field: usually of its kind, sometimes a stray.
    static func value(_ good: (inout RNG) -> String, _ rng: inout RNG) -> String {
        chance(85, &rng) ? good(&rng) : stray(&rng)
    }

    /// An object from `fields` (key and value makers): some left out, unknown ones added, some
    /// given twice or with an escaped key, in a random order with random whitespace.
    static func object(_ fields: [(String, (inout RNG) -> String)], _ rng: inout RNG) -> String {
        var members: [(String, String)] = []
        for (key, make) in fields where !chance(8, &rng) { members.append((key, value(make, &rng))) }
        if chance(10, &rng) { members.append((pick(["extra", "K", "\\u212A", "é", "e\\u0301", ""], &rng), stray(&rng))) }
        if chance(4, &rng), let first = members.first { members.append((first.0, value(fields.first { $0.0 == first.0 }?.1 ?? stray, &rng))) }
        members.shuffle(using: &rng)
        let ws = { (rng: inout RNG) in pick(["", " ", "\n\t", "  "], &rng) }
        let parts = members.map { key, value in
            let written = chance(5, &rng) && !key.isEmpty && !key.contains("\\") ? "\\u00" + String(key.utf8.first ?? 0x61, radix: 16) + key.dropFirst() : key
            return ws(&rng) + "\"" + written + "\"" + ws(&rng) + ":" + ws(&rng) + value + ws(&rng)
        }
        return "{" + parts.joined(separator: ",") + "}"
    }

    static func array(_ element: (inout RNG) -> String, _ rng: inout RNG) -> String {
        "[" + (0..<Int.random(in: 0...3, using: &rng)).map { _ in chance(90, &rng) ? element(&rng) : stray(&rng) }.joined(separator: ", ") + "]"
    }

    static func message(_ rng: inout RNG) -> String {
        object([("id", id), ("title", text), ("subheading", text), ("iconURL", text), ("sentAt", date), ("expiresAt", date),
                ("read", { pick(["true", "false", "null"], &$0) }),
                ("extras", { rng in object([("a", text), ("b", text)], &rng) })], &rng)
    }

    static func document(_ type: BuiltInEventType, _ rng: inout RNG) -> String {
        if chance(3, &rng) { return stray(&rng) }
        let body: String
        switch type {
        case .inboxSynced:
            body = object([("mode", { pick(["\"full\"", "\"delta\"", "\"partial\""], &$0) }),
                           ("messages", { rng in array(message, &rng) }), ("removed", { rng in array(id, &rng) })], &rng)
        case .messageRead:
            body = object([("ids", { rng in array(id, &rng) }), ("read", { pick(["true", "false"], &$0) })], &rng)
        case .widgetAction:
            body = object([("actionID", id), ("kind", { pick(["\"markRead\"", "\"openMessage\"", "\"custom\"", "\"markTaskDone\"", "\"launch\""], &$0) }),
                           ("target", id), ("name", text), ("payload", { rng in pick(strays, &rng) })], &rng)
        case .actionCompleted:
            body = object([("actionID", id), ("outcome", { pick(["\"done\"", "\"failed\"", "\"discarded\"", "\"later\""], &$0) }),
                           ("reason", text)], &rng)
        case .badgeAdjusted:
            let number = { (rng: inout RNG) in pick(["1", "-3", "0", "2.0", "1000001", "-1000000", "1e2"], &rng) }
            body = object([("delta", number), ("set", number)], &rng)
        case .messageRemoved:
            body = object([("ids", { rng in array(id, &rng) })], &rng)
        case .pushReceived:
            let number = { (rng: inout RNG) in pick(["1", "0", "3.0", "1000001", "-1", "1e2"], &rng) }
            body = object([("messageID", id), ("message", message), ("badge", number)], &rng)
        case .sharedSettled:
            let number = { (rng: inout RNG) in pick(["1", "0", "47", "-2", "3.0", "9223372036854775807", "1e2", "\"4\""], &rng) }
            body = object([("seq", number), ("position", number)], &rng)
        }
        return chance(2, &rng) ? body + pick([" ", "x", "}", " {}"], &rng) : body
    }
}
