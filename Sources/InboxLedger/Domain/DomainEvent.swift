import Foundation

/// A message as the server lists it, carried by ``InboxSync``.
public struct InboxMessage: Hashable, Sendable, Codable {
    public var id: String
    public var title: String
    public var subheading: String?
    public var iconURL: String?
    public var sentAt: Timestamp
    public var expiresAt: Timestamp?
    /// The server's read flag; `nil` keeps what the ledger knew (new messages: unread).
    public var read: Bool?
    public var extras: [String: String]?

    public init(id: String, title: String, subheading: String? = nil, iconURL: String? = nil, sentAt: Timestamp,
                expiresAt: Timestamp? = nil, read: Bool? = nil, extras: [String: String]? = nil) {
        self.id = id
        self.title = title
        self.subheading = subheading
        self.iconURL = iconURL
        self.sentAt = sentAt
        self.expiresAt = expiresAt
        self.read = read
        self.extras = extras
    }

    enum CodingKeys: String, CodingKey { case id, title, subheading, iconURL, sentAt, expiresAt, read, extras }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decodeIdentifier(.id)
        title = try c.decode(String.self, forKey: .title)
        subheading = try c.decodeIfPresent(String.self, forKey: .subheading)
        iconURL = try c.decodeIfPresent(String.self, forKey: .iconURL)
        sentAt = try c.decodeDate(.sentAt)
        expiresAt = try c.decodeDateIfPresent(.expiresAt)
        read = try c.decodeIfPresent(Bool.self, forKey: .read)
        extras = try c.decodeIfPresent([String: String].self, forKey: .extras)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id)
        try c.encode(title, forKey: .title)
        try c.encodeIfPresent(subheading, forKey: .subheading)
        try c.encodeIfPresent(iconURL, forKey: .iconURL)
        try c.encode(sentAt.iso8601, forKey: .sentAt)
        try c.encodeIfPresent(expiresAt?.iso8601, forKey: .expiresAt)
        try c.encodeIfPresent(read, forKey: .read)
        try c.encodeIfPresent(extras, forKey: .extras)
    }
}

/// `inbox.synced`: the host app's view of the server inbox after a fetch.
public struct InboxSync: Hashable, Sendable, Codable {
    public enum Mode: String, Hashable, Sendable, Codable {
        /// Authoritative: messages missing from the list are removed.
        case full
        /// Upserts the listed messages and removes `removed`.
        case delta
    }

    public var mode: Mode
    public var messages: [InboxMessage]
    public var removed: [String]

    public init(mode: Mode, messages: [InboxMessage], removed: [String] = []) {
        self.mode = mode
        self.messages = messages
        self.removed = removed
    }

    enum CodingKeys: String, CodingKey { case mode, messages, removed }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        mode = try c.decode(Mode.self, forKey: .mode)
        messages = try c.decode([InboxMessage].self, forKey: .messages)
        removed = try c.decodeIfPresent([String].self, forKey: .removed) ?? []
        var seen = Set<String>()
        for (i, m) in messages.enumerated() where !seen.insert(m.id).inserted {
            throw DecodingError.dataCorrupted(.init(
                codingPath: c.codingPath + [CodingKeys.messages, IndexKey(i), InboxMessage.CodingKeys.id],
                debugDescription: "duplicate id \"\(m.id)\" in one message list"))
        }
        for (i, id) in removed.enumerated() {
            if id.isEmpty || id.utf8.count > DomainLimits.maxIdentifierBytes {
                throw DecodingError.dataCorrupted(.init(codingPath: c.codingPath + [CodingKeys.removed, IndexKey(i)],
                    debugDescription: "must be 1–\(DomainLimits.maxIdentifierBytes) bytes"))
            }
            if seen.contains(id) {
                throw DecodingError.dataCorrupted(.init(codingPath: c.codingPath + [CodingKeys.removed, IndexKey(i)],
                    debugDescription: "\"\(id)\" is also listed in messages"))
            }
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(mode, forKey: .mode)
        try c.encode(messages, forKey: .messages)
        if !removed.isEmpty { try c.encode(removed, forKey: .removed) }
    }
}

/// `message.read`: read state changed locally (widget, app).
public struct ReadChange: Hashable, Sendable, Codable {
    public var ids: [String]
    public var read: Bool

    public init(ids: [String], read: Bool) {
        self.ids = ids
        self.read = read
    }

    enum CodingKeys: String, CodingKey { case ids, read }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        ids = try c.decode([String].self, forKey: .ids)
        read = try c.decode(Bool.self, forKey: .read)
        guard !ids.isEmpty else {
            throw DecodingError.dataCorruptedError(forKey: .ids, in: c, debugDescription: "must list at least one id")
        }
        for (i, id) in ids.enumerated() where id.isEmpty || id.utf8.count > DomainLimits.maxIdentifierBytes {
            throw DecodingError.dataCorrupted(.init(codingPath: c.codingPath + [CodingKeys.ids, IndexKey(i)],
                debugDescription: "must be 1–\(DomainLimits.maxIdentifierBytes) bytes"))
        }
    }
}

/// `widget.action`: an action tapped in a widget, for the host app to carry out.
public struct WidgetAction: Hashable, Sendable, Codable {
    public enum Kind: String, Hashable, Sendable, Codable, CaseIterable {
        /// Marks `target` read at once (the widget and badge are right before the host runs).
        case markRead
        case markTaskDone
        /// Opens `target` in the app.
        case openMessage
        /// An application-defined action named by `name`.
        case custom
    }

    public var actionID: String
    public var kind: Kind
    public var target: String?
    public var name: String?
    public var payload: JSONValue?

    public init(actionID: String, kind: Kind, target: String? = nil, name: String? = nil, payload: JSONValue? = nil) {
        self.actionID = actionID
        self.kind = kind
        self.target = target
        self.name = name
        self.payload = payload
    }

    enum CodingKeys: String, CodingKey { case actionID, kind, target, name, payload }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        actionID = try c.decodeIdentifier(.actionID)
        kind = try c.decode(Kind.self, forKey: .kind)
        target = try c.decodeIfPresent(String.self, forKey: .target)
        name = try c.decodeIfPresent(String.self, forKey: .name)
        payload = try c.decodeIfPresent(JSONValue.self, forKey: .payload)
        if kind == .markRead || kind == .openMessage, target?.isEmpty ?? true {
            throw DecodingError.dataCorruptedError(forKey: .target, in: c, debugDescription: "required for kind \(kind.rawValue)")
        }
        if kind == .custom, name?.isEmpty ?? true {
            throw DecodingError.dataCorruptedError(forKey: .name, in: c, debugDescription: "required for kind custom")
        }
    }
}

/// `action.completed`: the host app acknowledges an action it carried out.
public struct ActionCompletion: Hashable, Sendable, Codable {
    public enum Outcome: String, Hashable, Sendable, Codable, CaseIterable {
        case done, failed, discarded
    }

    public var actionID: String
    public var outcome: Outcome
    public var reason: String?

    public init(actionID: String, outcome: Outcome, reason: String? = nil) {
        self.actionID = actionID
        self.outcome = outcome
        self.reason = reason
    }

    enum CodingKeys: String, CodingKey { case actionID, outcome, reason }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        actionID = try c.decodeIdentifier(.actionID)
        outcome = try c.decode(Outcome.self, forKey: .outcome)
        reason = try c.decodeIfPresent(String.self, forKey: .reason)
    }
}

/// `badge.adjusted`: `{"delta": n}` or `{"set": n}`.
public enum BadgeAdjustment: Hashable, Sendable, Codable {
    case delta(Int64)
    case set(Int64)

    enum CodingKeys: String, CodingKey { case delta, set }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let delta = try c.decodeSmallInteger(.delta)
        let set = try c.decodeSmallInteger(.set)
        switch (delta, set) {
        case (let d?, nil):
            guard abs(d) <= DomainLimits.maxBadge else {
                throw DecodingError.dataCorruptedError(forKey: .delta, in: c, debugDescription: "must be within ±\(DomainLimits.maxBadge)")
            }
            self = .delta(d)
        case (nil, let s?):
            guard (0...DomainLimits.maxBadge).contains(s) else {
                throw DecodingError.dataCorruptedError(forKey: .set, in: c, debugDescription: "must be 0…\(DomainLimits.maxBadge)")
            }
            self = .set(s)
        case (nil, nil):
            throw DecodingError.keyNotFound(CodingKeys.delta, .init(codingPath: c.codingPath, debugDescription: "needs \"delta\" or \"set\""))
        case (_?, _?):
            throw DecodingError.dataCorruptedError(forKey: .set, in: c, debugDescription: "give either delta or set, not both")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .delta(let d): try c.encode(d, forKey: .delta)
        case .set(let s): try c.encode(s, forKey: .set)
        }
    }
}

/// Limits of the domain vocabulary.
public enum DomainLimits {
    /// Longest message or action id, in bytes (ids are LMDB keys).
    public static let maxIdentifierBytes = 200
    /// Largest badge value or delta.
    public static let maxBadge: Int64 = 1_000_000
}

/// The built-in event vocabulary, and custom events the projections keep but ignore.
///
/// ```swift
/// let sync = DomainEvent.inboxSynced(InboxSync(mode: .delta, messages: [
///     InboxMessage(id: "m1", title: "Welcome", sentAt: Timestamp(iso8601: "2026-11-22T08:00:00Z")!)
/// ]))
/// try ledger.append(sync, key: "sync-1")
/// ```
public enum DomainEvent: Hashable, Sendable {
    case inboxSynced(InboxSync)
    case messageRead(ReadChange)
    case widgetAction(WidgetAction)
    case actionCompleted(ActionCompletion)
    case badgeAdjusted(BadgeAdjustment)
    case custom(type: String, payload: [UInt8])

    public static let inboxSyncedType = "inbox.synced"
    public static let messageReadType = "message.read"
    public static let widgetActionType = "widget.action"
    public static let actionCompletedType = "action.completed"
    public static let badgeAdjustedType = "badge.adjusted"
    /// The type names the built-in projections understand.
    public static let builtInTypes: Set<String> = [inboxSyncedType, messageReadType, widgetActionType, actionCompletedType, badgeAdjustedType]

    /// The event's type name.
    public var type: String {
        switch self {
        case .inboxSynced: Self.inboxSyncedType
        case .messageRead: Self.messageReadType
        case .widgetAction: Self.widgetActionType
        case .actionCompleted: Self.actionCompletedType
        case .badgeAdjusted: Self.badgeAdjustedType
        case .custom(let type, _): type
        }
    }

    /// The event to append, with its payload as canonical JSON.
    public func newEvent(key: String? = nil) throws(LedgerError) -> NewEvent {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let data: Data
        do {
            switch self {
            case .inboxSynced(let v): data = try encoder.encode(v)
            case .messageRead(let v): data = try encoder.encode(v)
            case .widgetAction(let v): data = try encoder.encode(v)
            case .actionCompleted(let v): data = try encoder.encode(v)
            case .badgeAdjusted(let v): data = try encoder.encode(v)
            case .custom(let type, let payload): return NewEvent(type: type, payload: payload, key: key)
            }
        } catch {
            throw .invalidEvent(index: 0, field: "data", reason: "cannot be encoded: \(error)")
        }
        return NewEvent(type: type, payload: try EventJSON.canonicalize(Array(data)), key: key)
    }

    /// Decodes and validates a payload of `type`; custom types are returned as they are.
    /// `index` names the event in errors.
    public static func decode(type: String, payload: [UInt8], index: Int = 0) throws(LedgerError) -> DomainEvent {
        let decoder = JSONDecoder()
        let data = Data(payload)
        do {
            switch type {
            case inboxSyncedType: return .inboxSynced(try decoder.decode(InboxSync.self, from: data))
            case messageReadType: return .messageRead(try decoder.decode(ReadChange.self, from: data))
            case widgetActionType: return .widgetAction(try decoder.decode(WidgetAction.self, from: data))
            case actionCompletedType: return .actionCompleted(try decoder.decode(ActionCompletion.self, from: data))
            case badgeAdjustedType: return .badgeAdjusted(try decoder.decode(BadgeAdjustment.self, from: data))
            default: return .custom(type: type, payload: payload)
            }
        } catch let error as DecodingError {
            let (field, reason) = describe(error)
            throw .invalidEvent(index: index, field: field, reason: reason)
        } catch {
            throw .invalidEvent(index: index, field: "data", reason: "\(error)")
        }
    }

    /// `data.messages[2].sentAt` and a reason, from a decoding error.
    static func describe(_ error: DecodingError) -> (String, String) {
        func path(_ keys: [any CodingKey]) -> String {
            var text = "data"
            for key in keys {
                if let index = key.intValue { text += "[\(index)]" } else { text += "." + key.stringValue }
            }
            return text
        }
        switch error {
        case .keyNotFound(let key, let context):
            let reason = context.debugDescription.hasPrefix("needs") ? context.debugDescription : "missing"
            return (path(context.codingPath + [key]), reason)
        case .typeMismatch(let type, let context):
            return (path(context.codingPath), "must be \(typeName(type))")
        case .valueNotFound(let type, let context):
            return (path(context.codingPath), "must be \(typeName(type)), not null")
        case .dataCorrupted(let context):
            if context.codingPath.isEmpty { return ("data", "malformed JSON") }
            let text = context.debugDescription
            let reason = text.hasPrefix("Cannot initialize") ? "not one of the allowed values" : text
            return (path(context.codingPath), reason)
        @unknown default:
            return ("data", "\(error)")
        }
    }

    static func typeName(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Bool.Type: "true or false"
        case is Int64.Type, is Int.Type: "an integer"
        case is [String].Type, is [InboxMessage].Type, is Array<Any>.Type: "an array"
        default: type is [String: String].Type ? "an object of strings" : "\(type)"
        }
    }
}

/// An array position in a coding path.
struct IndexKey: CodingKey {
    var stringValue: String
    var intValue: Int?
    init(_ index: Int) { intValue = index; stringValue = "\(index)" }
    init?(stringValue: String) { return nil }
    init?(intValue: Int) { self.init(intValue) }
}

extension KeyedDecodingContainer {
    func decodeIdentifier(_ key: Key) throws -> String {
        let value = try decode(String.self, forKey: key)
        guard !value.isEmpty, value.utf8.count <= DomainLimits.maxIdentifierBytes else {
            throw DecodingError.dataCorruptedError(forKey: key, in: self,
                debugDescription: "must be 1–\(DomainLimits.maxIdentifierBytes) bytes")
        }
        return value
    }

    /// An integer that fits a Double exactly. (Decoded as Double first: on Linux, Foundation
    /// reports `1.5` given for an Int64 as malformed JSON instead of a type mismatch.)
    func decodeSmallInteger(_ key: Key) throws -> Int64? {
        guard contains(key), try !decodeNil(forKey: key) else { return nil }
        let value = try decode(Double.self, forKey: key)
        guard value.rounded() == value, abs(value) <= 9_007_199_254_740_992 else {
            throw DecodingError.typeMismatch(Int64.self, .init(codingPath: codingPath + [key], debugDescription: "not an integer"))
        }
        return Int64(value)
    }

    func decodeDate(_ key: Key) throws -> Timestamp {
        let text = try decode(String.self, forKey: key)
        guard let date = Timestamp(iso8601: text) else {
            throw DecodingError.dataCorruptedError(forKey: key, in: self, debugDescription: "not an ISO 8601 date: \"\(text)\"")
        }
        return date
    }

    func decodeDateIfPresent(_ key: Key) throws -> Timestamp? {
        guard contains(key), try !decodeNil(forKey: key) else { return nil }
        return try decodeDate(key)
    }
}
