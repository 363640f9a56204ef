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

    static func checkIdentifier(_ s: String, field: @autoclosure () -> String) throws(FieldError) {
        guard !s.isEmpty, s.utf8.count <= DomainLimits.maxIdentifierBytes else {
            throw FieldError(field: field(), reason: "must be 1–\(DomainLimits.maxIdentifierBytes) bytes")
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

// MARK: - Per payload: one decoder (`init(_:)`), one set of rules (`validate`), one encoder (`write`)

/// A built-in event payload. JSON input is read into typed fields by `init(_:)` (types and
/// presence), then checked by `validate(at:)` — the one place of the domain's rules, which a
/// typed value an app built goes through too; `write(to:)` is the one encoder, writing the
/// canonical bytes the ledger stores directly (keys in their sorted order, no intermediate
/// `JSONValue`). Its `Encodable` conformance encodes those bytes.
protocol BuiltInPayload: Encodable {
    init(_ fields: JSONFields) throws(FieldError)
    func validate(at path: @autoclosure () -> String) throws(FieldError)
    func write(to writer: inout CanonicalWriter)
}

extension BuiltInPayload {
    /// The canonical JSON bytes the ledger stores for this payload.
    var canonicalBytes: [UInt8] {
        var writer = CanonicalWriter()
        write(to: &writer)
        return writer.bytes
    }

    /// Encodes the payload exactly as the ledger stores it (``DomainEvent/newEvent(key:)``).
    public func encode(to encoder: any Encoder) throws { try JSONParser.parse(canonicalBytes).encode(to: encoder) }
}

/// Writes canonical JSON (docs/format.md): the caller gives object keys in UTF-8 byte order.
struct CanonicalWriter {
    private(set) var bytes: [UInt8] = []
    private var needsComma = false

    init() { bytes.reserveCapacity(512) }

    private mutating func separate() {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
    }

    mutating func openObject() { open(UInt8(ascii: "{")) }
    mutating func closeObject() { close(UInt8(ascii: "}")) }
    mutating func openArray() { open(UInt8(ascii: "[")) }
    mutating func closeArray() { close(UInt8(ascii: "]")) }

    private mutating func open(_ bracket: UInt8) {
        separate()
        bytes.append(bracket)
        needsComma = false
    }

    private mutating func close(_ bracket: UInt8) {
        bytes.append(bracket)
        needsComma = true
    }

    mutating func key(_ name: String) {
        separate()
        EventJSON.writeString(name, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
        needsComma = false
    }

    mutating func string(_ value: String) { self.value(.string(value)) }
    mutating func bool(_ value: Bool) { self.value(.bool(value)) }
    mutating func integer(_ value: Int64) { self.value(.integer(value)) }

    /// Any value, written by the canonical writer of ``JSONValue`` (the one formatting of
    /// strings and numbers).
    mutating func value(_ value: JSONValue) {
        separate()
        EventJSON.write(value, to: &bytes)
        needsComma = true
    }

    mutating func timestamp(_ value: Timestamp) {
        separate()
        bytes.append(UInt8(ascii: "\""))
        value.writeISO8601(to: &bytes)
        bytes.append(UInt8(ascii: "\""))
        needsComma = true
    }

    mutating func strings(_ values: [String]) {
        openArray()
        for value in values { string(value) }
        closeArray()
    }
}

extension InboxMessage: BuiltInPayload {
    func write(to w: inout CanonicalWriter) {
        w.openObject()
        if let expiresAt { w.key("expiresAt"); w.timestamp(expiresAt) }
        if let extras {
            w.key("extras")
            w.openObject()
            for (k, v) in extras.sorted(by: { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }) { w.key(k); w.string(v) }
            w.closeObject()
        }
        if let iconURL { w.key("iconURL"); w.string(iconURL) }
        w.key("id"); w.string(id)
        if let read { w.key("read"); w.bool(read) }
        w.key("sentAt"); w.timestamp(sentAt)
        if let subheading { w.key("subheading"); w.string(subheading) }
        w.key("title"); w.string(title)
        w.closeObject()
    }

    func validate(at path: @autoclosure () -> String) throws(FieldError) {
        try JSONFields.checkIdentifier(id, field: path() + ".id")
    }

    init(_ f: JSONFields) throws(FieldError) {
        id = try f.string("id")
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
        try validate(at: f.path)
    }
}

extension InboxSync: BuiltInPayload {
    func write(to w: inout CanonicalWriter) {
        w.openObject()
        w.key("messages")
        w.openArray()
        for message in messages { message.write(to: &w) }
        w.closeArray()
        w.key("mode"); w.string(mode.rawValue)
        if !removed.isEmpty { w.key("removed"); w.strings(removed) }
        w.closeObject()
    }

    func validate(at path: @autoclosure () -> String) throws(FieldError) {
        var seen = Set<String>()
        for (i, message) in messages.enumerated() {
            try message.validate(at: path() + ".messages[\(i)]")
            guard seen.insert(message.id).inserted else {
                throw FieldError(field: path() + ".messages[\(i)].id", reason: "duplicate id \"\(message.id)\" in one message list")
            }
        }
        for (i, id) in removed.enumerated() {
            try JSONFields.checkIdentifier(id, field: path() + ".removed[\(i)]")
            if seen.contains(id) { throw FieldError(field: path() + ".removed[\(i)]", reason: "\"\(id)\" is also listed in messages") }
        }
    }

    init(_ f: JSONFields) throws(FieldError) {
        mode = try f.choice("mode", Mode.self)
        var messages: [InboxMessage] = []
        for item in try f.array("messages") ?? [] {
            let fields = try JSONFields(item.value, path: item.path)
            messages.append(try InboxMessage(fields))
        }
        self.messages = messages
        removed = try f.strings("removed", optional: true) ?? []
        try validate(at: f.path)
    }
}

extension ReadChange: BuiltInPayload {
    func write(to w: inout CanonicalWriter) {
        w.openObject()
        w.key("ids"); w.strings(ids)
        w.key("read"); w.bool(read)
        w.closeObject()
    }

    func validate(at path: @autoclosure () -> String) throws(FieldError) {
        guard !ids.isEmpty else { throw FieldError(field: path() + ".ids", reason: "must list at least one id") }
        for (i, id) in ids.enumerated() { try JSONFields.checkIdentifier(id, field: path() + ".ids[\(i)]") }
    }

    init(_ f: JSONFields) throws(FieldError) {
        ids = try f.strings("ids") ?? []
        read = try f.bool("read")
        try validate(at: f.path)
    }
}

extension WidgetAction: BuiltInPayload {
    func write(to w: inout CanonicalWriter) {
        w.openObject()
        w.key("actionID"); w.string(actionID)
        w.key("kind"); w.string(kind.rawValue)
        if let name { w.key("name"); w.string(name) }
        if let payload { w.key("payload"); w.value(payload) }
        if let target { w.key("target"); w.string(target) }
        w.closeObject()
    }

    func validate(at path: @autoclosure () -> String) throws(FieldError) {
        try JSONFields.checkIdentifier(actionID, field: path() + ".actionID")
        if kind == .markRead || kind == .openMessage, target?.isEmpty ?? true {
            throw FieldError(field: path() + ".target", reason: "required for kind \(kind.rawValue)")
        }
        if kind == .custom, name?.isEmpty ?? true { throw FieldError(field: path() + ".name", reason: "required for kind custom") }
        if let payload { try EventJSON.checkEncodable(payload, field: path() + ".payload") }
    }

    init(_ f: JSONFields) throws(FieldError) {
        actionID = try f.string("actionID")
        kind = try f.choice("kind", Kind.self)
        target = try f.optionalString("target")
        name = try f.optionalString("name")
        payload = f.optional("payload")
        try validate(at: f.path)
    }
}

extension ActionCompletion: BuiltInPayload {
    func write(to w: inout CanonicalWriter) {
        w.openObject()
        w.key("actionID"); w.string(actionID)
        w.key("outcome"); w.string(outcome.rawValue)
        if let reason { w.key("reason"); w.string(reason) }
        w.closeObject()
    }

    func validate(at path: @autoclosure () -> String) throws(FieldError) {
        try JSONFields.checkIdentifier(actionID, field: path() + ".actionID")
    }

    init(_ f: JSONFields) throws(FieldError) {
        actionID = try f.string("actionID")
        outcome = try f.choice("outcome", Outcome.self)
        reason = try f.optionalString("reason")
        try validate(at: f.path)
    }
}

extension BadgeAdjustment: BuiltInPayload {
    func write(to w: inout CanonicalWriter) {
        w.openObject()
        switch self {
        case .delta(let d): w.key("delta"); w.integer(d)
        case .set(let s): w.key("set"); w.integer(s)
        }
        w.closeObject()
    }

    func validate(at path: @autoclosure () -> String) throws(FieldError) {
        switch self {
        case .delta(let d):
            guard (-DomainLimits.maxBadge...DomainLimits.maxBadge).contains(d) else { throw FieldError(field: path() + ".delta", reason: "must be within ±\(DomainLimits.maxBadge)") }
        case .set(let s):
            guard (0...DomainLimits.maxBadge).contains(s) else { throw FieldError(field: path() + ".set", reason: "must be 0…\(DomainLimits.maxBadge)") }
        }
    }

    init(_ f: JSONFields) throws(FieldError) {
        switch (try f.optionalInteger("delta"), try f.optionalInteger("set")) {
        case (let d?, nil): self = .delta(d)
        case (nil, let s?): self = .set(s)
        case (nil, nil):
            throw FieldError(field: f.at("delta"), reason: "needs \"delta\" or \"set\"")
        case (_?, _?):
            throw FieldError(field: f.at("set"), reason: "give either delta or set, not both")
        }
        try validate(at: f.path)
    }
}
