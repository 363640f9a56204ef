#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A message as the server lists it, carried by ``InboxSync``.
public struct InboxMessage: Hashable, Sendable, Encodable {
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
public struct InboxSync: Hashable, Sendable, Encodable {
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

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(mode, forKey: .mode)
        try c.encode(messages, forKey: .messages)
        if !removed.isEmpty { try c.encode(removed, forKey: .removed) }
    }
}

/// `message.read`: read state changed locally (widget, app).
public struct ReadChange: Hashable, Sendable, Encodable {
    public var ids: [String]
    public var read: Bool

    public init(ids: [String], read: Bool) {
        self.ids = ids
        self.read = read
    }

    enum CodingKeys: String, CodingKey { case ids, read }

}

/// `widget.action`: an action tapped in a widget, for the host app to carry out.
public struct WidgetAction: Hashable, Sendable, Encodable {
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

}

/// `action.completed`: the host app acknowledges an action it carried out.
public struct ActionCompletion: Hashable, Sendable, Encodable {
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

}

/// `badge.adjusted`: `{"delta": n}` or `{"set": n}`.
public enum BadgeAdjustment: Hashable, Sendable, Encodable {
    case delta(Int64)
    case set(Int64)

    enum CodingKeys: String, CodingKey { case delta, set }

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
        guard builtInTypes.contains(type) else { return .custom(type: type, payload: payload) }
        let root: JSONValue
        do { root = try JSONParser.parse(payload) } catch {
            throw .invalidEvent(index: index, field: "data", reason: error.message)
        }
        do {
            let data = try JSONFields(root, path: "data")
            switch type {
            case inboxSyncedType: return .inboxSynced(try InboxSync(data))
            case messageReadType: return .messageRead(try ReadChange(data))
            case widgetActionType: return .widgetAction(try WidgetAction(data))
            case actionCompletedType: return .actionCompleted(try ActionCompletion(data))
            default: return .badgeAdjusted(try BadgeAdjustment(data))
            }
        } catch {
            throw .invalidEvent(index: index, field: error.field, reason: error.reason)
        }
    }
}
