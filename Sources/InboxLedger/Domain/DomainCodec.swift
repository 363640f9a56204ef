/// Why a payload of a built-in type is invalid: the field's path (`data.messages[2].sentAt`)
/// and a reason.
struct FieldError: Error {
    var field: String
    var reason: String
}

extension FieldError {
    /// An id (message, action): 1–200 bytes. (``IdentifierRule`` is checked at append only,
    /// ``DomainEvent/checkIdentifiers(index:)``: events stored before it must still decode.)
    static func checkIdentifier(_ s: String, field: @autoclosure () -> String) throws(FieldError) {
        guard !s.isEmpty, s.utf8.count <= DomainLimits.maxIdentifierBytes else {
            throw FieldError(field: field(), reason: "must be 1–\(DomainLimits.maxIdentifierBytes) bytes")
        }
    }
}

// MARK: - Per payload: one decoder (`init(_:)`), one set of rules (`validate`), one encoder (`write`)

/// A built-in event payload. JSON input is decoded straight into typed fields by
/// `read(_:depth:path:)` (a ``PayloadReader``: types and presence, in the order the fields are
/// checked), then checked by `validate(at:)` — the one place of the domain's rules, which a
/// typed value an app built goes through too; `write(to:)` is the one encoder, writing the
/// canonical bytes the ledger stores directly (keys in their sorted order, no intermediate
/// `JSONValue`). Its `Encodable` conformance encodes those bytes.
protocol BuiltInPayload: Encodable {
    /// Decodes the value at the reader (at `depth`) into the payload: a syntax error is thrown,
    /// a field error returned (``Found``). `path` names the value in errors (`data`).
    static func read(_ reader: inout PayloadReader, depth: Int, path: @autoclosure () -> String) throws(JSONParser.Failure) -> Result<Self, FieldError>
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
        try FieldError.checkIdentifier(id, field: path() + ".id")
    }

    enum Field: String, CaseIterable, Sendable { case id, title, subheading, iconURL, sentAt, expiresAt, read, extras }
    static let fields = KnownKeys<Field>()

    static func read(_ r: inout PayloadReader, depth: Int, path: @autoclosure () -> String) throws(JSONParser.Failure) -> Result<InboxMessage, FieldError> {
        var id = Found<String>.absent, title = Found<String>.absent, subheading = Found<String>.absent, iconURL = Found<String>.absent
        var sentAt = Found<Timestamp>.absent, expiresAt = Found<Timestamp>.absent, read = Found<Bool>.absent
        var extras = Found<[String: String]>.absent
        let d = depth + 1
        return try r.payload(depth: depth, keys: fields, path: path(), { (r: inout PayloadReader, member: Member<Field>) throws(JSONParser.Failure) in
            switch member {
            case .known(.id): id = try r.string(depth: d, field: path() + ".id")
            case .known(.title): title = try r.string(depth: d, field: path() + ".title")
            case .known(.subheading): subheading = try r.string(depth: d, field: path() + ".subheading")
            case .known(.iconURL): iconURL = try r.string(depth: d, field: path() + ".iconURL")
            case .known(.sentAt): sentAt = try r.date(depth: d, field: path() + ".sentAt")
            case .known(.expiresAt): expiresAt = try r.date(depth: d, field: path() + ".expiresAt")
            case .known(.read): read = try r.bool(depth: d, field: path() + ".read")
            case .known(.extras): extras = try r.stringMap(depth: d, field: path() + ".extras")
            case .other: try r.skip(depth: d)
            }
        }, build: { () throws(FieldError) in
            InboxMessage(
                id: try id.required(path() + ".id", "a string"), title: try title.required(path() + ".title", "a string"),
                subheading: try subheading.optional(), iconURL: try iconURL.optional(),
                sentAt: try sentAt.required(path() + ".sentAt", "a string"), expiresAt: try expiresAt.optional(),
                read: try read.optional(), extras: try extras.optional())
        })
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
            try FieldError.checkIdentifier(id, field: path() + ".removed[\(i)]")
            if seen.contains(id) { throw FieldError(field: path() + ".removed[\(i)]", reason: "\"\(id)\" is also listed in messages") }
        }
    }

    enum Field: String, CaseIterable, Sendable { case mode, messages, removed }
    static let fields = KnownKeys<Field>()

    static func read(_ r: inout PayloadReader, depth: Int, path: @autoclosure () -> String) throws(JSONParser.Failure) -> Result<InboxSync, FieldError> {
        var mode = Found<Mode>.absent, messages = Found<[InboxMessage]>.absent, removed = Found<[String]>.absent
        let d = depth + 1
        return try r.payload(depth: depth, keys: fields, path: path(), { (r: inout PayloadReader, member: Member<Field>) throws(JSONParser.Failure) in
            switch member {
            case .known(.mode): mode = try r.choice(Mode.self, depth: d, field: path() + ".mode")
            case .known(.messages):
                messages = try r.array(depth: d, field: path() + ".messages") { (r: inout PayloadReader, i: Int) throws(JSONParser.Failure) in
                    try InboxMessage.read(&r, depth: d + 1, path: path() + ".messages[\(i)]")
                }
            case .known(.removed): removed = try r.strings(depth: d, field: path() + ".removed")
            case .other: try r.skip(depth: d)
            }
        }, build: { () throws(FieldError) in
            InboxSync(mode: try mode.required(path() + ".mode", "a string"),
                                 messages: try messages.required(path() + ".messages", "an array"),
                                 removed: try removed.optional() ?? [])
        })
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
        for (i, id) in ids.enumerated() { try FieldError.checkIdentifier(id, field: path() + ".ids[\(i)]") }
    }

    enum Field: String, CaseIterable, Sendable { case ids, read }
    static let fields = KnownKeys<Field>()

    static func read(_ r: inout PayloadReader, depth: Int, path: @autoclosure () -> String) throws(JSONParser.Failure) -> Result<ReadChange, FieldError> {
        var ids = Found<[String]>.absent, read = Found<Bool>.absent
        let d = depth + 1
        return try r.payload(depth: depth, keys: fields, path: path(), { (r: inout PayloadReader, member: Member<Field>) throws(JSONParser.Failure) in
            switch member {
            case .known(.ids): ids = try r.strings(depth: d, field: path() + ".ids")
            case .known(.read): read = try r.bool(depth: d, field: path() + ".read")
            case .other: try r.skip(depth: d)
            }
        }, build: { () throws(FieldError) in
            ReadChange(ids: try ids.required(path() + ".ids", "an array"), read: try read.required(path() + ".read", "true or false"))
        })
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
        try FieldError.checkIdentifier(actionID, field: path() + ".actionID")
        if kind == .markRead || kind == .openMessage, target?.isEmpty ?? true {
            throw FieldError(field: path() + ".target", reason: "required for kind \(kind.rawValue)")
        }
        if kind == .custom, name?.isEmpty ?? true { throw FieldError(field: path() + ".name", reason: "required for kind custom") }
        if let payload { try EventJSON.checkEncodable(payload, field: path() + ".payload") }
    }

    enum Field: String, CaseIterable, Sendable { case actionID, kind, target, name, payload }
    static let fields = KnownKeys<Field>()

    static func read(_ r: inout PayloadReader, depth: Int, path: @autoclosure () -> String) throws(JSONParser.Failure) -> Result<WidgetAction, FieldError> {
        var actionID = Found<String>.absent, kind = Found<Kind>.absent, target = Found<String>.absent, name = Found<String>.absent
        var payload = Found<JSONValue>.absent
        let d = depth + 1
        return try r.payload(depth: depth, keys: fields, path: path(), { (r: inout PayloadReader, member: Member<Field>) throws(JSONParser.Failure) in
            switch member {
            case .known(.actionID): actionID = try r.string(depth: d, field: path() + ".actionID")
            case .known(.kind): kind = try r.choice(Kind.self, depth: d, field: path() + ".kind")
            case .known(.target): target = try r.string(depth: d, field: path() + ".target")
            case .known(.name): name = try r.string(depth: d, field: path() + ".name")
            case .known(.payload): payload = try r.value(depth: d)
            case .other: try r.skip(depth: d)
            }
        }, build: { () throws(FieldError) in
            WidgetAction(actionID: try actionID.required(path() + ".actionID", "a string"),
                                      kind: try kind.required(path() + ".kind", "a string"),
                                      target: try target.optional(), name: try name.optional(), payload: try payload.optional())
        })
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
        try FieldError.checkIdentifier(actionID, field: path() + ".actionID")
    }

    enum Field: String, CaseIterable, Sendable { case actionID, outcome, reason }
    static let fields = KnownKeys<Field>()

    static func read(_ r: inout PayloadReader, depth: Int, path: @autoclosure () -> String) throws(JSONParser.Failure) -> Result<ActionCompletion, FieldError> {
        var actionID = Found<String>.absent, outcome = Found<Outcome>.absent, reason = Found<String>.absent
        let d = depth + 1
        return try r.payload(depth: depth, keys: fields, path: path(), { (r: inout PayloadReader, member: Member<Field>) throws(JSONParser.Failure) in
            switch member {
            case .known(.actionID): actionID = try r.string(depth: d, field: path() + ".actionID")
            case .known(.outcome): outcome = try r.choice(Outcome.self, depth: d, field: path() + ".outcome")
            case .known(.reason): reason = try r.string(depth: d, field: path() + ".reason")
            case .other: try r.skip(depth: d)
            }
        }, build: { () throws(FieldError) in
            ActionCompletion(actionID: try actionID.required(path() + ".actionID", "a string"),
                                              outcome: try outcome.required(path() + ".outcome", "a string"), reason: try reason.optional())
        })
    }
}

extension BadgeAdjustment: BuiltInPayload {
    func write(to w: inout CanonicalWriter) {
        w.openObject()
        switch self {
        case .delta(let d): w.key("delta"); w.integer(Int64(d))
        case .set(let s): w.key("set"); w.integer(Int64(s))
        }
        w.closeObject()
    }

    func validate(at path: @autoclosure () -> String) throws(FieldError) {
        switch self {
        case .delta(let d):
            guard (-DomainLimits.maxBadge...DomainLimits.maxBadge).contains(Int64(d)) else { throw FieldError(field: path() + ".delta", reason: "must be within ±\(DomainLimits.maxBadge)") }
        case .set(let s):
            guard (0...DomainLimits.maxBadge).contains(Int64(s)) else { throw FieldError(field: path() + ".set", reason: "must be 0…\(DomainLimits.maxBadge)") }
        }
    }

    enum Field: String, CaseIterable, Sendable { case delta, set }
    static let fields = KnownKeys<Field>()

    static func read(_ r: inout PayloadReader, depth: Int, path: @autoclosure () -> String) throws(JSONParser.Failure) -> Result<BadgeAdjustment, FieldError> {
        var delta = Found<Int64>.absent, set = Found<Int64>.absent
        let d = depth + 1
        return try r.payload(depth: depth, keys: fields, path: path(), { (r: inout PayloadReader, member: Member<Field>) throws(JSONParser.Failure) in
            switch member {
            case .known(.delta): delta = try r.integer(depth: d, field: path() + ".delta")
            case .known(.set): set = try r.integer(depth: d, field: path() + ".set")
            case .other: try r.skip(depth: d)
            }
        }, build: { () throws(FieldError) in
            let adjustment: BadgeAdjustment
            switch (try delta.optional(), try set.optional()) {
            // Out of Int's range (a 32-bit platform) is out of the badge's range: validate says so.
            case (let d?, nil): adjustment = .delta(Int(exactly: d) ?? (d < 0 ? .min : .max))
            case (nil, let s?): adjustment = .set(Int(exactly: s) ?? (s < 0 ? .min : .max))
            case (nil, nil): throw FieldError(field: path() + ".delta", reason: "needs \"delta\" or \"set\"")
            case (_?, _?): throw FieldError(field: path() + ".set", reason: "give either delta or set, not both")
            }
            return adjustment
        })
    }
}

extension MessageRemoval: BuiltInPayload {
    func write(to w: inout CanonicalWriter) {
        w.openObject()
        w.key("ids"); w.strings(ids)
        w.closeObject()
    }

    func validate(at path: @autoclosure () -> String) throws(FieldError) {
        guard !ids.isEmpty else { throw FieldError(field: path() + ".ids", reason: "must list at least one id") }
        for (i, id) in ids.enumerated() { try FieldError.checkIdentifier(id, field: path() + ".ids[\(i)]") }
    }

    enum Field: String, CaseIterable, Sendable { case ids }
    static let fields = KnownKeys<Field>()

    static func read(_ r: inout PayloadReader, depth: Int, path: @autoclosure () -> String) throws(JSONParser.Failure) -> Result<MessageRemoval, FieldError> {
        var ids = Found<[String]>.absent
        let d = depth + 1
        return try r.payload(depth: depth, keys: fields, path: path(), { (r: inout PayloadReader, member: Member<Field>) throws(JSONParser.Failure) in
            switch member {
            case .known(.ids): ids = try r.strings(depth: d, field: path() + ".ids")
            case .other: try r.skip(depth: d)
            }
        }, build: { () throws(FieldError) in
            MessageRemoval(ids: try ids.required(path() + ".ids", "an array"))
        })
    }
}

extension SharedSettlement: BuiltInPayload {
    func write(to w: inout CanonicalWriter) {
        w.openObject()
        if let position { w.key("position"); w.integer(Int64(bitPattern: position)) }
        w.key("seq"); w.integer(Int64(bitPattern: sequence))
        w.closeObject()
    }

    func validate(at path: @autoclosure () -> String) throws(FieldError) {
        guard (1...UInt64(Int64.max)).contains(sequence) else { throw FieldError(field: path() + ".seq", reason: "must be 1…\(Int64.max)") }
        if let position, !(1...UInt64(Int64.max)).contains(position) {
            throw FieldError(field: path() + ".position", reason: "must be 1…\(Int64.max)")
        }
    }

    enum Field: String, CaseIterable, Sendable { case seq, position }
    static let fields = KnownKeys<Field>()

    static func read(_ r: inout PayloadReader, depth: Int, path: @autoclosure () -> String) throws(JSONParser.Failure) -> Result<SharedSettlement, FieldError> {
        var seq = Found<Int64>.absent, position = Found<Int64>.absent
        let d = depth + 1
        return try r.payload(depth: depth, keys: fields, path: path(), { (r: inout PayloadReader, member: Member<Field>) throws(JSONParser.Failure) in
            switch member {
            case .known(.seq): seq = try r.integer(depth: d, field: path() + ".seq")
            case .known(.position): position = try r.integer(depth: d, field: path() + ".position")
            case .other: try r.skip(depth: d)
            }
        }, build: { () throws(FieldError) in
            let sequence = try seq.required(path() + ".seq", "an integer")
            guard sequence >= 1 else { throw FieldError(field: path() + ".seq", reason: "must be 1…\(Int64.max)") }
            let placed = try position.optional()
            if let placed, placed < 1 { throw FieldError(field: path() + ".position", reason: "must be 1…\(Int64.max)") }
            return SharedSettlement(sequence: UInt64(sequence), position: placed.map { UInt64($0) })
        })
    }
}

extension PushReceived: BuiltInPayload {
    func write(to w: inout CanonicalWriter) {
        w.openObject()
        if let badge { w.key("badge"); w.integer(Int64(badge)) }
        if let message { w.key("message"); message.write(to: &w) }
        w.key("messageID"); w.string(messageID)
        w.closeObject()
    }

    func validate(at path: @autoclosure () -> String) throws(FieldError) {
        try FieldError.checkIdentifier(messageID, field: path() + ".messageID")
        if let message {
            try message.validate(at: path() + ".message")
            guard message.id == messageID else {
                throw FieldError(field: path() + ".message.id", reason: "must equal messageID \"\(messageID)\"")
            }
        }
        if let badge, !(0...Int(DomainLimits.maxBadge)).contains(badge) {
            throw FieldError(field: path() + ".badge", reason: "must be 0…\(DomainLimits.maxBadge)")
        }
    }

    enum Field: String, CaseIterable, Sendable { case messageID, message, badge }
    static let fields = KnownKeys<Field>()

    static func read(_ r: inout PayloadReader, depth: Int, path: @autoclosure () -> String) throws(JSONParser.Failure) -> Result<PushReceived, FieldError> {
        var messageID = Found<String>.absent, message = Found<InboxMessage>.absent, badge = Found<Int64>.absent
        let d = depth + 1
        return try r.payload(depth: depth, keys: fields, path: path(), { (r: inout PayloadReader, member: Member<Field>) throws(JSONParser.Failure) in
            switch member {
            case .known(.messageID): messageID = try r.string(depth: d, field: path() + ".messageID")
            case .known(.message):
                message = try r.object(depth: d) { (r: inout PayloadReader) throws(JSONParser.Failure) in
                    try InboxMessage.read(&r, depth: d, path: path() + ".message")
                }
            case .known(.badge): badge = try r.integer(depth: d, field: path() + ".badge")
            case .other: try r.skip(depth: d)
            }
        }, build: { () throws(FieldError) in
            PushReceived(messageID: try messageID.required(path() + ".messageID", "a string"),
                         message: try message.optional(), badge: try badge.optional().map { Int($0) })
        })
    }
}
