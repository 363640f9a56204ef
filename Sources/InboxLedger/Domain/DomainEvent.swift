/// A message as the server lists it, carried by ``InboxSync``.
public struct InboxMessage: Hashable, Sendable, Codable {
    /// The server's message id (1–200 bytes).
    public var id: String
    /// Its title.
    public var title: String
    /// Its second line.
    public var subheading: String?
    /// URL of its icon.
    public var iconURL: String?
    /// When the server sent it (the widget lists newest first).
    public var sentAt: Timestamp
    /// When it leaves the list.
    public var expiresAt: Timestamp?
    /// The server's read flag; `nil` keeps what the ledger knew (new messages: unread).
    public var read: Bool?
    /// Application-defined strings, kept and shown as they are.
    public var extras: [String: String]?

    /// A message; only `id`, `title` and `sentAt` are required.
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

}

/// `inbox.synced`: the host app's view of the server inbox after a fetch.
public struct InboxSync: Hashable, Sendable, Codable {
    /// How the list relates to what the ledger holds.
    public enum Mode: String, Hashable, Sendable, Codable {
        /// Authoritative: messages missing from the list are removed.
        case full
        /// Upserts the listed messages and removes `removed`.
        case delta
    }

    /// Full or delta.
    public var mode: Mode
    /// The messages listed (ids unique).
    public var messages: [InboxMessage]
    /// Ids to remove (delta syncs).
    public var removed: [String]

    /// A sync of `messages`; `removed` only for delta syncs.
    public init(mode: Mode, messages: [InboxMessage], removed: [String] = []) {
        self.mode = mode
        self.messages = messages
        self.removed = removed
    }

}

/// `message.read`: read state changed locally (widget, app).
public struct ReadChange: Hashable, Sendable, Codable {
    /// The messages changed.
    public var ids: [String]
    /// Read (`true`) or unread.
    public var read: Bool

    /// Marks `ids` read or unread.
    public init(ids: [String], read: Bool) {
        self.ids = ids
        self.read = read
    }

}

/// `widget.action`: an action tapped in a widget, for the host app to carry out.
public struct WidgetAction: Hashable, Sendable, Codable {
    /// What the action does.
    public enum Kind: String, Hashable, Sendable, Codable, CaseIterable {
        /// Marks `target` read at once (the widget and badge are right before the host runs).
        case markRead
        case markTaskDone
        /// Opens `target` in the app.
        case openMessage
        /// An application-defined action named by `name`.
        case custom
    }

    /// An id the widget chooses, unique per action (a retry reuses it).
    public var actionID: String
    /// What the action does.
    public var kind: Kind
    /// The message or task it acts on (required for `markRead` and `openMessage`).
    public var target: String?
    /// The application-defined name (required for `custom`).
    public var name: String?
    /// Application-defined JSON, kept as it is.
    public var payload: JSONValue?

    /// An action; see ``Kind`` for which fields each kind needs.
    public init(actionID: String, kind: Kind, target: String? = nil, name: String? = nil, payload: JSONValue? = nil) {
        self.actionID = actionID
        self.kind = kind
        self.target = target
        self.name = name
        self.payload = payload
    }

}

/// `action.completed`: the host app acknowledges an action it carried out.
public struct ActionCompletion: Hashable, Sendable, Codable {
    /// How the host app finished an action.
    public enum Outcome: String, Hashable, Sendable, Codable, CaseIterable {
        case done, failed, discarded
    }

    /// The action's id.
    public var actionID: String
    /// Done, failed or discarded.
    public var outcome: Outcome
    /// Why, for a person (optional).
    public var reason: String?

    /// The host app's outcome for action `actionID`.
    public init(actionID: String, outcome: Outcome, reason: String? = nil) {
        self.actionID = actionID
        self.outcome = outcome
        self.reason = reason
    }

}

/// `message.removed`: messages removed locally (archived or deleted in the app or a widget).
///
/// A removal stays until the server reflects it (a full listing without the message, or a
/// delta sync that removes it): a sync that still lists the message does not bring it back
/// (docs/semantics.md, "Local changes and the server").
///
/// ```swift
/// try ledger.append(.messageRemoved(MessageRemoval(ids: ["m7"])))
/// ```
public struct MessageRemoval: Hashable, Sendable, Codable {
    /// The messages removed.
    public var ids: [String]

    /// Removes `ids` from the inbox on this device.
    public init(ids: [String]) {
        self.ids = ids
    }
}

/// `push.received`: a push notification announced message `messageID`.
///
/// The push counts once in the badge, whether or not it carries the message, until the
/// host's sync brings the message (then it counts as an unread row), it is read, or it is
/// removed (docs/semantics.md, "Pushes and the badge"). With `message` (the shape of a
/// listing entry) the message is shown at once; with `badge` (APNs `aps.badge`, absolute) the
/// badge shows the server's count until the next sync.
///
/// ```swift
/// // In the notification service extension; the push's identifier as key.
/// try ledger.append(.pushReceived(PushReceived(messageID: "m42", badge: 3)), key: "push-" + id)
/// ```
public struct PushReceived: Hashable, Sendable, Codable {
    /// The id of the message the push announces (the id the server's listing uses).
    public var messageID: String
    /// The message itself, if the push carries it (its `id` must be `messageID`).
    public var message: InboxMessage?
    /// The server's badge (absolute, 0…1,000,000), if the push carries one.
    public var badge: Int?

    /// A push announcing `messageID`, optionally with the message and the server's badge.
    public init(messageID: String, message: InboxMessage? = nil, badge: Int? = nil) {
        self.messageID = messageID
        self.message = message
        self.badge = badge
    }
}

/// `inbox.shared-settled`: the user's feed placed one of this ledger's **shared** events
/// (``EventSource/shared``) at `position`, or — without a position — the server refused it, so
/// no device will ever apply it. Appended by the sync client (one per feed entry of its own,
/// keyed by the entry; one per refused event); app projections then apply the event at that
/// place in the feed's order, or drop it (docs/semantics.md, "Custom events on every device").
/// An app does not append it.
///
/// ```swift
/// // {"seq":47,"position":6}: this ledger's event 47 is the feed's entry 6.
/// let settled = SharedSettlement(sequence: 47, position: 6)
/// ```
public struct SharedSettlement: Hashable, Sendable, Codable {
    /// The sequence of the shared event in this ledger.
    public var sequence: UInt64
    /// Its position in the user's feed; nil: the server refused it (dropped everywhere).
    public var position: UInt64?

    /// Event `sequence` placed at feed `position` (nil: refused).
    public init(sequence: UInt64, position: UInt64?) {
        self.sequence = sequence
        self.position = position
    }
}

/// `badge.adjusted`: `{"delta": n}` or `{"set": n}`, in `Int` like the badge and the counts
/// (``WidgetList/badge``); stored as a JSON integer.
///
/// ```swift
/// try ledger.append(.badgeAdjusted(.delta(1)), key: "push-4711")
/// try ledger.append(.badgeAdjusted(.set(list.unreadCount)))
/// ```
public enum BadgeAdjustment: Hashable, Sendable, Codable {
    /// Moves the badge as shown by n (|n| ≤ 1,000,000), never below 0.
    case delta(Int)
    /// Makes the badge n (0…1,000,000) at this point.
    case set(Int)
}

/// Limits of the domain vocabulary.
public enum DomainLimits {
    /// Longest message or action id, in bytes (ids are LMDB keys).
    public static let maxIdentifierBytes = 200
    /// Largest badge value or delta.
    public static let maxBadge: Int64 = 1_000_000
}

/// The built-in event types: the one registry of their names. Adding a case makes the compiler
/// name every place that must handle it (docs/design.md, "Adding a built-in event type").
public enum BuiltInEventType: String, CaseIterable, Hashable, Sendable {
    case inboxSynced = "inbox.synced"
    case messageRead = "message.read"
    case widgetAction = "widget.action"
    case actionCompleted = "action.completed"
    case badgeAdjusted = "badge.adjusted"
    case messageRemoved = "message.removed"
    case pushReceived = "push.received"
    case sharedSettled = "inbox.shared-settled"
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
    case messageRemoved(MessageRemoval)
    case pushReceived(PushReceived)
    case sharedSettled(SharedSettlement)
    case custom(type: String, payload: [UInt8])

    /// `inbox.synced`.
    public static let inboxSyncedType = BuiltInEventType.inboxSynced.rawValue
    /// `message.read`.
    public static let messageReadType = BuiltInEventType.messageRead.rawValue
    /// `widget.action`.
    public static let widgetActionType = BuiltInEventType.widgetAction.rawValue
    /// `action.completed`.
    public static let actionCompletedType = BuiltInEventType.actionCompleted.rawValue
    /// `badge.adjusted`.
    public static let badgeAdjustedType = BuiltInEventType.badgeAdjusted.rawValue
    /// `message.removed`.
    public static let messageRemovedType = BuiltInEventType.messageRemoved.rawValue
    /// `push.received`.
    public static let pushReceivedType = BuiltInEventType.pushReceived.rawValue
    /// `inbox.shared-settled`.
    public static let sharedSettledType = BuiltInEventType.sharedSettled.rawValue
    /// The type names the built-in projections understand.
    public static let builtInTypes: Set<String> = Set(BuiltInEventType.allCases.map(\.rawValue))

    /// The built-in type of this event (nil for a custom one).
    public var builtInType: BuiltInEventType? {
        switch self {
        case .inboxSynced: .inboxSynced
        case .messageRead: .messageRead
        case .widgetAction: .widgetAction
        case .actionCompleted: .actionCompleted
        case .badgeAdjusted: .badgeAdjusted
        case .messageRemoved: .messageRemoved
        case .pushReceived: .pushReceived
        case .sharedSettled: .sharedSettled
        case .custom: nil
        }
    }

    /// The event's type name.
    public var type: String {
        if case .custom(let type, _) = self { return type }
        return builtInType?.rawValue ?? ""
    }

    /// The built-in payload (nil for a custom event, whose payload is bytes).
    private var payload: (any BuiltInPayload)? {
        switch self {
        case .inboxSynced(let v): v
        case .messageRead(let v): v
        case .widgetAction(let v): v
        case .actionCompleted(let v): v
        case .badgeAdjusted(let v): v
        case .messageRemoved(let v): v
        case .pushReceived(let v): v
        case .sharedSettled(let v): v
        case .custom: nil
        }
    }

    /// The canonical bytes stored for this event: the payload's own encoder for a built-in
    /// type, the bytes as given for a custom one.
    var canonicalPayload: [UInt8] {
        if case .custom(_, let bytes) = self { return bytes }
        return payload?.canonicalBytes ?? []
    }

    /// Checks a typed built-in event by the same rules (and field paths) as its JSON form.
    func validate(index: Int) throws(LedgerError) {
        do { try payload?.validate(at: "data") } catch {
            throw .invalidEvent(index: index, field: error.field, reason: error.reason)
        }
    }

    /// The event to append, with its payload as canonical JSON (the payload's own encoder,
    /// written once: no JSONEncoder, no re-parse). Validation happens when it is appended.
    public func newEvent(key: String? = nil) throws(LedgerError) -> NewEvent {
        NewEvent(type: type, payload: canonicalPayload, key: key)
    }

    /// Decodes and validates a payload of `type`; custom types are returned as they are.
    /// `index` names the event in errors. The bytes go straight into the typed fields
    /// (``PayloadReader``); a syntax error is reported on `data`, a field error on its path.
    public static func decode(type: String, payload: [UInt8], index: Int = 0) throws(LedgerError) -> DomainEvent {
        guard let builtIn = BuiltInEventType(rawValue: type) else { return .custom(type: type, payload: payload) }
        let decoded: Result<DomainEvent, FieldError>
        do {
            decoded = try PayloadReader.read(payload) { (r: inout PayloadReader) throws(JSONParser.Failure) in
                switch builtIn {
                case .inboxSynced: try InboxSync.read(&r, depth: 0, path: "data").map(DomainEvent.inboxSynced)
                case .messageRead: try ReadChange.read(&r, depth: 0, path: "data").map(DomainEvent.messageRead)
                case .widgetAction: try WidgetAction.read(&r, depth: 0, path: "data").map(DomainEvent.widgetAction)
                case .actionCompleted: try ActionCompletion.read(&r, depth: 0, path: "data").map(DomainEvent.actionCompleted)
                case .badgeAdjusted: try BadgeAdjustment.read(&r, depth: 0, path: "data").map(DomainEvent.badgeAdjusted)
                case .messageRemoved: try MessageRemoval.read(&r, depth: 0, path: "data").map(DomainEvent.messageRemoved)
                case .pushReceived: try PushReceived.read(&r, depth: 0, path: "data").map(DomainEvent.pushReceived)
                case .sharedSettled: try SharedSettlement.read(&r, depth: 0, path: "data").map(DomainEvent.sharedSettled)
                }
            }
        } catch {
            throw .invalidEvent(index: index, field: "data", reason: error.message)
        }
        switch decoded {
        case .success(let event): return event
        case .failure(let error): throw .invalidEvent(index: index, field: error.field, reason: error.reason)
        }
    }
}
