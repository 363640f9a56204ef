/// One row of the widget's list.
public struct WidgetItem: Hashable, Sendable, Codable, Identifiable {
    /// The message id.
    public var id: String
    /// Its title.
    public var title: String
    /// Its second line, if any.
    public var subheading: String?
    /// Its icon, if any.
    public var iconURL: String?
    /// When the server sent it (the list is newest first).
    public var sentAt: Timestamp
    /// When it disappears from the list, if ever.
    public var expiresAt: Timestamp?
    /// Read as the user sees it (a local change wins until the server agrees).
    public var read: Bool
}

/// Everything a widget shows, read in one short transaction.
public struct WidgetList: Hashable, Sendable, Codable {
    /// Newest first (ties by id), without removed or expired messages.
    public var items: [WidgetItem]
    /// Unread messages (all of them, not only the rows returned).
    public var unreadCount: Int
    /// Messages announced by pushes that no sync has brought yet and that are not read
    /// (`push.received` without the message): counted in the badge, not in ``unreadCount``.
    public var announced: Int
    /// The app badge: max(0, unread + announced + adjustments) (docs/semantics.md, "Badge").
    public var badge: Int
    /// Sequence of the last event that changed what the widget shows (0: never).
    public var version: UInt64
    /// Commit time of that event.
    public var updatedAt: Timestamp?
    /// Actions recorded and not yet completed.
    public var pendingActions: Int
    /// When the next shown message expires: refresh then, even without a new event.
    public var nextExpiry: Timestamp?

    private enum CodingKeys: String, CodingKey {
        case items, unreadCount, announced, badge, version, updatedAt, pendingActions, nextExpiry
    }

    /// Decodes a list, also one an app cached as JSON before `announced` existed (read as 0).
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        items = try c.decode([WidgetItem].self, forKey: .items)
        unreadCount = try c.decode(Int.self, forKey: .unreadCount)
        announced = try c.decodeIfPresent(Int.self, forKey: .announced) ?? 0
        badge = try c.decode(Int.self, forKey: .badge)
        version = try c.decode(UInt64.self, forKey: .version)
        updatedAt = try c.decodeIfPresent(Timestamp.self, forKey: .updatedAt)
        pendingActions = try c.decode(Int.self, forKey: .pendingActions)
        nextExpiry = try c.decodeIfPresent(Timestamp.self, forKey: .nextExpiry)
    }

    init(items: [WidgetItem], unreadCount: Int, announced: Int, badge: Int, version: UInt64, updatedAt: Timestamp?,
         pendingActions: Int, nextExpiry: Timestamp?) {
        self.items = items
        self.unreadCount = unreadCount
        self.announced = announced
        self.badge = badge
        self.version = version
        self.updatedAt = updatedAt
        self.pendingActions = pendingActions
        self.nextExpiry = nextExpiry
    }
}

/// A message with both read flags (``Ledger/message(id:)``).
public struct MessageState: Hashable, Sendable, Codable, Identifiable {
    /// The message id.
    public var id: String
    /// Its title.
    public var title: String
    /// Its second line, if any.
    public var subheading: String?
    /// Its icon, if any.
    public var iconURL: String?
    /// When the server sent it.
    public var sentAt: Timestamp
    /// When it expires, if ever.
    public var expiresAt: Timestamp?
    /// Application-defined strings the server attached.
    public var extras: [String: String]
    /// The server's flag, from the last sync that carried one.
    public var serverRead: Bool
    /// A local override (widget, app), kept until a sync agrees.
    public var localRead: Bool?
    /// What the user sees.
    public var read: Bool
    /// Sequence of the last event that changed this message.
    public var changedAt: UInt64
}

/// A change this device made or heard of that the server's listing does not reflect yet
/// (``Ledger/localChanges(limit:)``; docs/semantics.md, "Local changes and the server").
public struct LocalChange: Hashable, Sendable, Codable, Identifiable {
    /// What is pending for the message.
    public enum Kind: String, Hashable, Sendable, Codable {
        /// Removed here (`message.removed`); settled when a listing no longer has it.
        case removed
        /// Announced by a push; settled when a listing brings it (or a full one does not).
        case announced
    }

    /// The message id.
    public var id: String
    /// Removed or announced.
    public var kind: Kind
    /// A read change made before any listing brought the message (announced messages only).
    public var localRead: Bool?
    /// Sequence of the event that last changed it.
    public var changedAt: UInt64
}

/// A widget action waiting for the host app.
public struct PendingAction: Hashable, Sendable, Codable, Identifiable {
    /// Sequence of the `widget.action` event.
    public var sequence: UInt64
    /// The id the widget gave the action.
    public var actionID: String
    /// What the action does.
    public var kind: WidgetAction.Kind
    /// What it acts on, if anything.
    public var target: String?
    /// The application-defined name of a `custom` action.
    public var name: String?
    /// The action's payload as canonical JSON (empty if none).
    public var payload: [UInt8]
    /// Role of the process that recorded it.
    public var origin: String
    /// When it was appended.
    public var recordedAt: Timestamp
}
