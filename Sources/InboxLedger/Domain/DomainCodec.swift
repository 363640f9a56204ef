/// Why a payload of a built-in type is invalid: the field's path (`data.messages[2].sentAt`)
/// and a reason.
struct FieldError: Error {
    var field: String
    var reason: String
}

/// A JSON object being validated, with its path for error messages.
struct JSONFields {
    let fields: [String: JSONValue]
    let path: String

    init(_ value: JSONValue, path: String) throws(FieldError) {
        guard case .object(let fields) = value else { throw FieldError(field: path, reason: "must be an object") }
        self.fields = fields
        self.path = path
    }

    func at(_ key: String) -> String { path + "." + key }

    /// The value of `key`, or nil when absent or null.
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

    /// An integer (a number with no fractional part is accepted).
    func optionalInteger(_ key: String) throws(FieldError) -> Int64? {
        switch optional(key) {
        case nil: return nil
        case .integer(let i)?: return i
        case .number(let d)? where d.rounded() == d && abs(d) <= 9_007_199_254_740_992: return Int64(d)
        default: throw FieldError(field: at(key), reason: "must be an integer")
        }
    }

    func identifier(_ key: String) throws(FieldError) -> String {
        let s = try string(key)
        try Self.checkIdentifier(s, field: at(key))
        return s
    }

    static func checkIdentifier(_ s: String, field: String) throws(FieldError) {
        guard !s.isEmpty, s.utf8.count <= DomainLimits.maxIdentifierBytes else {
            throw FieldError(field: field, reason: "must be 1–\(DomainLimits.maxIdentifierBytes) bytes")
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
        out.reserveCapacity(items.count)
        for item in items {
            guard case .string(let s) = item.value else { throw FieldError(field: item.path, reason: "must be a string") }
            out.append(s)
        }
        return out
    }
}

// MARK: - One decoder (`init(_:)`, validating) and one encoder (`json`) per payload

/// A built-in event payload: decoded and validated from JSON fields, encoded to a JSON value
/// whose canonical bytes are what the ledger stores. Its `Encodable` conformance encodes `json`,
/// so there is one encoder, whoever asks.
protocol BuiltInPayload: Encodable {
    init(_ fields: JSONFields) throws(FieldError)
    var json: JSONValue { get }
}

extension BuiltInPayload {
    /// Encodes the payload exactly as the ledger stores it (``DomainEvent/newEvent(key:)``).
    public func encode(to encoder: any Encoder) throws { try json.encode(to: encoder) }
}

/// A JSON object of the fields that are present (nil ones are left out, as the decoder allows).
private func object(_ fields: [(String, JSONValue?)]) -> JSONValue {
    var out: [String: JSONValue] = [:]
    for (key, value) in fields { if let value { out[key] = value } }
    return .object(out)
}

extension InboxMessage: BuiltInPayload {
    var json: JSONValue {
        object([
            ("id", .string(id)), ("title", .string(title)), ("subheading", subheading.map(JSONValue.string)),
            ("iconURL", iconURL.map(JSONValue.string)), ("sentAt", .string(sentAt.iso8601)),
            ("expiresAt", expiresAt.map { .string($0.iso8601) }), ("read", read.map(JSONValue.bool)),
            ("extras", extras.map { .object($0.mapValues(JSONValue.string)) }),
        ])
    }

    init(_ f: JSONFields) throws(FieldError) {
        id = try f.identifier("id")
        title = try f.string("title")
        subheading = try f.optionalString("subheading")
        iconURL = try f.optionalString("iconURL")
        sentAt = try f.date("sentAt")
        expiresAt = try f.optionalDate("expiresAt")
        read = try f.optionalBool("read")
        if let extras = f.optional("extras") {
            guard case .object(let map) = extras else { throw FieldError(field: f.at("extras"), reason: "must be an object of strings") }
            var strings: [String: String] = [:]
            for (k, v) in map {
                guard case .string(let s) = v else { throw FieldError(field: f.at("extras"), reason: "must be an object of strings") }
                strings[k] = s
            }
            self.extras = strings
        } else {
            self.extras = nil
        }
    }
}

extension InboxSync: BuiltInPayload {
    var json: JSONValue {
        object([("mode", .string(mode.rawValue)), ("messages", .array(messages.map(\.json))),
                ("removed", removed.isEmpty ? nil : .array(removed.map(JSONValue.string)))])
    }

    init(_ f: JSONFields) throws(FieldError) {
        mode = try f.choice("mode", Mode.self)
        var messages: [InboxMessage] = []
        var seen = Set<String>()
        for item in try f.array("messages") ?? [] {
            let message = try InboxMessage(try JSONFields(item.value, path: item.path))
            guard seen.insert(message.id).inserted else {
                throw FieldError(field: item.path + ".id", reason: "duplicate id \"\(message.id)\" in one message list")
            }
            messages.append(message)
        }
        self.messages = messages
        removed = try f.strings("removed", optional: true) ?? []
        for (i, id) in removed.enumerated() {
            try JSONFields.checkIdentifier(id, field: f.at("removed") + "[\(i)]")
            if seen.contains(id) { throw FieldError(field: f.at("removed") + "[\(i)]", reason: "\"\(id)\" is also listed in messages") }
        }
    }
}

extension ReadChange: BuiltInPayload {
    var json: JSONValue { object([("ids", .array(ids.map(JSONValue.string))), ("read", .bool(read))]) }

    init(_ f: JSONFields) throws(FieldError) {
        ids = try f.strings("ids") ?? []
        read = try f.bool("read")
        guard !ids.isEmpty else { throw FieldError(field: f.at("ids"), reason: "must list at least one id") }
        for (i, id) in ids.enumerated() { try JSONFields.checkIdentifier(id, field: f.at("ids") + "[\(i)]") }
    }
}

extension WidgetAction: BuiltInPayload {
    var json: JSONValue {
        object([("actionID", .string(actionID)), ("kind", .string(kind.rawValue)), ("target", target.map(JSONValue.string)),
                ("name", name.map(JSONValue.string)), ("payload", payload)])
    }

    init(_ f: JSONFields) throws(FieldError) {
        actionID = try f.identifier("actionID")
        kind = try f.choice("kind", Kind.self)
        target = try f.optionalString("target")
        name = try f.optionalString("name")
        payload = f.optional("payload")
        if kind == .markRead || kind == .openMessage, target?.isEmpty ?? true {
            throw FieldError(field: f.at("target"), reason: "required for kind \(kind.rawValue)")
        }
        if kind == .custom, name?.isEmpty ?? true { throw FieldError(field: f.at("name"), reason: "required for kind custom") }
    }
}

extension ActionCompletion: BuiltInPayload {
    var json: JSONValue {
        object([("actionID", .string(actionID)), ("outcome", .string(outcome.rawValue)), ("reason", reason.map(JSONValue.string))])
    }

    init(_ f: JSONFields) throws(FieldError) {
        actionID = try f.identifier("actionID")
        outcome = try f.choice("outcome", Outcome.self)
        reason = try f.optionalString("reason")
    }
}

extension BadgeAdjustment: BuiltInPayload {
    var json: JSONValue {
        switch self {
        case .delta(let d): .object(["delta": .integer(d)])
        case .set(let s): .object(["set": .integer(s)])
        }
    }

    init(_ f: JSONFields) throws(FieldError) {
        switch (try f.optionalInteger("delta"), try f.optionalInteger("set")) {
        case (let d?, nil):
            guard (-DomainLimits.maxBadge...DomainLimits.maxBadge).contains(d) else { throw FieldError(field: f.at("delta"), reason: "must be within ±\(DomainLimits.maxBadge)") }
            self = .delta(d)
        case (nil, let s?):
            guard (0...DomainLimits.maxBadge).contains(s) else { throw FieldError(field: f.at("set"), reason: "must be 0…\(DomainLimits.maxBadge)") }
            self = .set(s)
        case (nil, nil):
            throw FieldError(field: f.at("delta"), reason: "needs \"delta\" or \"set\"")
        case (_?, _?):
            throw FieldError(field: f.at("set"), reason: "give either delta or set, not both")
        }
    }
}
