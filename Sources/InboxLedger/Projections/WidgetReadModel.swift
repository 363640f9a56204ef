/// The widget's reads: the list (with the process's kept copy, ``WidgetCache``), the pending
/// actions, the local changes and one message, each read from the one projection snapshot
/// it is given, so that reads made together from one transaction agree
/// (``Ledger/widgetSnapshot(limit:actionsLimit:now:)``).
struct WidgetReadModel {
    /// The last list read in this process (shared by every handle of the directory).
    let cache: WidgetCache
    /// The ledger's directory, for errors.
    let path: String

    /// The top `limit` rows, unread count, badge and version as `store` holds them at `now`;
    /// the kept list while the projection state is unchanged and no message expired since.
    func list(_ store: some ProjectionStore, limit: Int, now: Timestamp) throws -> WidgetList {
        let state = try ProjectionState.load(from: store)
        if let kept = cache.list(state: state, limit: limit, now: now.micros) { return kept }
        let (expiredUnread, nextExpiry) = try expiredUnread(store, now: now.micros)
        var items: [WidgetItem] = []
        if limit > 0 {
            try store.scan(.widget, from: []) { key, value in
                guard let record = MessageRecord.decode(value) else {
                    throw LedgerError.corruptStore(path: path, reason: "widget row \(key.count) bytes is malformed")
                }
                if let e = record.expiresAt, e <= now.micros { return true }
                items.append(WidgetItem(
                    id: record.id, title: record.title, subheading: record.subheading, iconURL: record.iconURL,
                    sentAt: Timestamp(micros: record.sentAt), expiresAt: record.expiresAt.map(Timestamp.init(micros:)),
                    read: record.isRead))
                return items.count < limit
            }
        }
        let unread = max(0, state.unread - expiredUnread)
        let list = WidgetList(
            items: items, unreadCount: Int(unread), announced: Int(state.announced), badge: Int(state.badge(unread: unread)),
            version: state.version, updatedAt: state.version == 0 ? nil : Timestamp(micros: state.updatedAt),
            pendingActions: Int(state.pendingCount), nextExpiry: nextExpiry.map(Timestamp.init(micros:)))
        cache.keep(list, state: state, limit: limit, now: now.micros)
        return list
    }

    /// A message with both read flags, or nil if the inbox does not hold it.
    func message(_ store: some ProjectionStore, id: String) throws -> MessageState? {
        guard let bytes = try store.get(.messages, Array(id.utf8)) else { return nil }
        guard let r = MessageRecord.decode(bytes) else {
            throw LedgerError.corruptStore(path: path, reason: "message '\(id)' is malformed")
        }
        return MessageState(
            id: r.id, title: r.title, subheading: r.subheading, iconURL: r.iconURL, sentAt: Timestamp(micros: r.sentAt),
            expiresAt: r.expiresAt.map(Timestamp.init(micros:)), extras: r.extras, serverRead: r.serverRead,
            localRead: r.localRead, read: r.isRead, changedAt: r.changedAt)
    }

    /// Up to `limit` messages removed here or announced by pushes and not settled yet, by id.
    func localChanges(_ store: some ProjectionStore, limit: Int) throws -> [LocalChange] {
        guard limit > 0 else { return [] }
        var changes: [LocalChange] = []
        try store.scan(.local, from: []) { key, value in
            guard let r = LocalMessageRecord.decode(value) else {
                throw LedgerError.corruptStore(path: path, reason: "local change row '\(String(decoding: key, as: UTF8.self))' is malformed")
            }
            let kind: LocalChange.Kind = switch r.standing {
            case .removed: .removed
            case .announced: .announced
            }
            changes.append(LocalChange(id: String(decoding: key, as: UTF8.self), kind: kind, localRead: r.localRead, changedAt: r.changedAt))
            return changes.count < limit
        }
        return changes
    }

    /// Up to `limit` pending actions in the order they were recorded.
    func pendingActions(_ store: some ProjectionStore, limit: Int) throws -> [PendingAction] {
        guard limit > 0 else { return [] }
        var actions: [PendingAction] = []
        try store.scan(.actions, from: []) { key, value in
            guard let seq = SequenceKey.decode(key), let r = ActionRecord.decode(value) else {
                throw LedgerError.corruptStore(path: path, reason: "pending action row is malformed")
            }
            actions.append(PendingAction(
                sequence: seq, actionID: r.actionID, kind: r.kind, target: r.target, name: r.name,
                payload: r.payload, origin: r.role, recordedAt: Timestamp(micros: r.recordedAt)))
            return actions.count < limit
        }
        return actions
    }

    /// Unread messages that expired since the last event (hidden from reads already), and the
    /// next expiry still ahead.
    private func expiredUnread(_ store: some ProjectionStore, now: Int64) throws -> (Int64, Int64?) {
        var count: Int64 = 0
        var next: Int64?
        try store.scan(.expiry, from: []) { key, _ in
            guard let at = TimeKey.decodeAscending(key[...]) else { return false }
            if at > now { next = at; return false }
            if let bytes = try store.get(.messages, Array(key.dropFirst(8))), let r = MessageRecord.decode(bytes), !r.isRead {
                count += 1
            }
            return true
        }
        return (count, next)
    }
}
