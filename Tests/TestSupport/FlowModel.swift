import InboxLedger

/// What the user should see, written from docs/semantics.md alone (not from the projector):
/// the rows, read state, unread count, badge and pending actions that follow from the events a
/// ledger committed, in order. `FlowModelTests` feeds it the log of a ledger that real processes
/// wrote and compares it with what the ledger shows after every step. Expiry is not modelled
/// (the flows use messages without `expiresAt`).
public struct FlowModel: Sendable {
    public struct Row: Hashable, Sendable {
        public var title: String
        public var sentAt: Int64
        /// The server's flag from the last listing that carried one.
        public var serverRead: Bool
        /// A local change not yet reflected by the server.
        public var localRead: Bool?
        /// read = local override if there is one, else the server flag.
        public var read: Bool { localRead ?? serverRead }
    }

    /// The inbox's messages (not removed, not expired).
    public private(set) var rows: [String: Row] = [:]
    /// Removed on this device; not shown until a listing settles the removal.
    public private(set) var removedHere: Set<String> = []
    /// Announced by a push, no listing brought them yet: id → a read change made meanwhile.
    public private(set) var announced: [String: Bool?] = [:]
    /// From a push's `badge`, until the next listing.
    public private(set) var serverAdjustment = 0
    /// From `badge.adjusted`.
    public private(set) var appAdjustment = 0
    /// Pending action ids, in the order recorded.
    public private(set) var pending: [String] = []
    private var recorded: Set<String> = []

    public init() {}

    public var unread: Int { rows.values.filter { !$0.read }.count }
    /// Announced messages not read here.
    public var announcedCount: Int { announced.values.filter { $0 != true }.count }
    /// badge = max(0, unread + announced + server adjustment + app adjustment).
    public var badge: Int { max(0, unread + announcedCount + serverAdjustment + appAdjustment) }
    /// The widget's order: newest `sentAt` first, ties by id (byte order).
    public var orderedIDs: [String] {
        rows.sorted { a, b in
            a.value.sentAt != b.value.sentAt ? a.value.sentAt > b.value.sentAt : a.key.utf8.lexicographicallyPrecedes(b.key.utf8)
        }.map(\.key)
    }
    /// Read changes made here that the server has not reflected yet: id → the local value.
    public var unsettledReads: [String: Bool] { rows.compactMapValues(\.localRead) }

    /// Applies one committed event.
    public mutating func apply(_ event: DomainEvent) {
        switch event {
        case .inboxSynced(let sync):
            if sync.mode == .full {
                let listed = Set(sync.messages.map(\.id))
                rows = rows.filter { listed.contains($0.key) }
                removedHere = removedHere.intersection(listed)        // settled: the server dropped them
                announced = announced.filter { listed.contains($0.key) }  // withdrawn
            }
            for id in sync.removed {
                rows[id] = nil
                removedHere.remove(id)
                announced[id] = nil
            }
            for message in sync.messages { file(message) }
            serverAdjustment = 0
        case .messageRead(let change):
            read(change.ids, change.read)
        case .messageRemoved(let removal):
            for id in removal.ids {
                if rows.removeValue(forKey: id) != nil || announced.removeValue(forKey: id) != nil { removedHere.insert(id) }
            }
        case .pushReceived(let push):
            if rows[push.messageID] == nil, !removedHere.contains(push.messageID) {
                if let message = push.message {
                    file(message)
                } else if announced[push.messageID] == nil {
                    announced[push.messageID] = .some(nil)
                }
            }
            if let badge = push.badge { serverAdjustment = badge - (unread + announcedCount + appAdjustment) }
        case .badgeAdjusted(.delta(let d)):
            appAdjustment = max(appAdjustment + Int(d), -(unread + announcedCount + serverAdjustment))
        case .badgeAdjusted(.set(let n)):
            serverAdjustment = 0
            appAdjustment = Int(n) - (unread + announcedCount)
        case .widgetAction(let action):
            guard recorded.insert(action.actionID).inserted else { return }
            pending.append(action.actionID)
            if action.kind == .markRead, let target = action.target { read([target], true) }
        case .actionCompleted(let completion):
            pending.removeAll { $0 == completion.actionID }
        case .sharedSettled, .custom:
            break  // no effect on the inbox
        }
    }

    /// A listing entry (or a push carrying its message): kept out while removed here; absorbs
    /// an announcement and the read change made while it was announced.
    private mutating func file(_ m: InboxMessage) {
        if removedHere.contains(m.id) { return }
        let readWhileAnnounced = announced.removeValue(forKey: m.id) ?? nil
        let old = rows[m.id]
        let serverRead = m.read ?? old?.serverRead ?? false
        var localRead = old?.localRead ?? readWhileAnnounced
        if localRead == serverRead { localRead = nil }
        rows[m.id] = Row(title: m.title, sentAt: m.sentAt.micros, serverRead: serverRead, localRead: localRead)
    }

    private mutating func read(_ ids: [String], _ value: Bool) {
        for id in ids {
            if var row = rows[id] {
                row.localRead = value == row.serverRead ? nil : value
                rows[id] = row
            } else if announced[id] != nil {
                announced[id] = .some(value)
            }
        }
    }
}

extension FlowModel {
    /// What differs between a ledger's widget list and pending actions and the model — rows in
    /// order with their read state, titles, unread, announced, badge, pending action ids — or nil.
    /// `list` must hold every row (a large limit).
    public func mismatch(list: WidgetList, pending: [String]) -> String? {
        let rows = list.items.map { "\($0.id)\($0.read ? "(read)" : "")" }
        let expected = orderedIDs.map { id in "\(id)\(self.rows[id]?.read == true ? "(read)" : "")" }
        if rows != expected { return "rows \(rows), model \(expected)" }
        for item in list.items where item.title != self.rows[item.id]?.title {
            return "title of \(item.id) \(item.title), model \(self.rows[item.id]?.title ?? "-")"
        }
        if list.unreadCount != unread { return "unread \(list.unreadCount), model \(unread)" }
        if list.announced != announcedCount { return "announced \(list.announced), model \(announcedCount)" }
        if list.badge != badge { return "badge \(list.badge), model \(badge)" }
        if pending != self.pending { return "pending \(pending), model \(self.pending)" }
        return nil
    }
}
