/// Something a projection noticed while applying an event, reported to the appender.
public enum ProjectionNote: Hashable, Sendable, Codable, CustomStringConvertible {
    /// `action.completed` for an action that was never recorded.
    case unknownAction(actionID: String, sequence: UInt64)
    /// `action.completed` for an action already completed (the first completion stands).
    case alreadyCompleted(actionID: String, sequence: UInt64)
    /// `widget.action` reusing the id of an action already recorded (ignored).
    case duplicateAction(actionID: String, sequence: UInt64)
    /// `message.read`, `message.removed` (or a `markRead` action) naming messages the inbox
    /// neither holds nor was told of by a push (ignored).
    case unknownMessages(ids: [String], sequence: UInt64)

    /// What the projection noticed, in a sentence.
    public var description: String {
        switch self {
        case .unknownAction(let id, let seq): "event \(seq): action '\(id)' is unknown; nothing to complete"
        case .alreadyCompleted(let id, let seq): "event \(seq): action '\(id)' was already completed"
        case .duplicateAction(let id, let seq): "event \(seq): action '\(id)' was already recorded; ignored"
        case .unknownMessages(let ids, let seq): "event \(seq): unknown message(s) \(ids.joined(separator: ", ")); ignored"
        }
    }
}

/// What a projector knows of the earliest expiry in the `expiry` table.
enum ExpiryCache: Equatable {
    /// Not read in this transaction yet (or a change may have moved it): look it up.
    case unknown
    /// The table is empty: nothing can expire.
    case none
    /// The earliest expiry, µs since the epoch.
    case at(Int64)

    /// The cache for what a lookup found (nil: an empty table).
    init(_ earliest: Int64?) { self = earliest.map(Self.at) ?? .none }

    /// Notes an expiry just filed: it may be the new earliest. Unknown stays unknown (the
    /// table may hold an earlier one).
    mutating func filed(_ expiry: Int64) {
        switch self {
        case .unknown: break
        case .none: self = .at(expiry)
        case .at(let earliest): self = .at(min(earliest, expiry))
        }
    }
}

/// Applies events to the projections (docs/semantics.md states every rule implemented here).
/// One projector serves one write transaction (or one rebuild): it loads the scalar state once
/// and writes it back in ``finish()``.
final class Projector<Store: ProjectionStore> {
    let store: Store
    private(set) var state: ProjectionState
    private var stateDirty = false
    /// The earliest expiry in the `expiry` table, cached for the transaction, so applying an
    /// event does not open a cursor just to find nothing expired.
    private var earliestExpiry = ExpiryCache.unknown
    /// Whether the `local` table may hold records, known for the transaction once asked (nil:
    /// not read yet): it is empty unless the device removed messages or heard of pushes, so a
    /// sync of new messages does not look each of them up there.
    private var localMayHoldRecords: Bool?

    init(store: Store) throws {
        self.store = store
        state = try ProjectionState.load(from: store)
    }

    /// Writes the scalar state back if it changed.
    func finish() throws {
        guard stateDirty else { return }
        try store.put(.state, ProjectionState.key, state.encode())
        stateDirty = false
    }

    /// Applies one committed event. Custom types leave the projections untouched.
    func apply(_ event: Event, _ domain: DomainEvent) throws -> [ProjectionNote] {
        if case .custom = domain { return [] }
        let before = state
        var notes: [ProjectionNote] = []
        var changed = try removeExpired(asOf: event.timestampMicros)
        switch domain {
        case .inboxSynced(let sync):
            changed = try applySync(sync, event) || changed
        case .messageRead(let change):
            var unknown: [String] = []
            for id in change.ids {
                switch try setLocalRead(id, change.read, event.sequence) {
                case nil: unknown.append(id)
                case let didChange?: changed = didChange || changed
                }
            }
            if !unknown.isEmpty { notes.append(.unknownMessages(ids: unknown, sequence: event.sequence)) }
        case .messageRemoved(let removal):
            var unknown: [String] = []
            for id in removal.ids {
                switch try removeLocally(id, event.sequence) {
                case nil: unknown.append(id)
                case let didChange?: changed = didChange || changed
                }
            }
            if !unknown.isEmpty { notes.append(.unknownMessages(ids: unknown, sequence: event.sequence)) }
        case .pushReceived(let push):
            changed = try applyPush(push, event) || changed
        case .sharedSettled:
            break  // for the app projections only (AppProjectionFold)
        case .widgetAction(let action):
            let idKey = Array(action.actionID.utf8)
            if try store.get(.actionIDs, idKey) != nil {
                notes.append(.duplicateAction(actionID: action.actionID, sequence: event.sequence))
                break
            }
            let record = ActionRecord(
                actionID: action.actionID, kind: action.kind, target: action.target, name: action.name,
                // Checked when the event was appended (or parsed from JSON): no non-finite number.
                payload: action.payload.map(EventJSON.canonicalBytes) ?? [],
                role: event.origin.role, recordedAt: event.timestampMicros)
            try store.put(.actions, SequenceKey.encode(event.sequence), record.encode())
            try store.put(.actionIDs, idKey, ActionStatus(sequence: event.sequence, state: .pending, completedAt: 0).encode())
            state.pendingCount += 1
            if action.kind == .markRead, let target = action.target {
                switch try setLocalRead(target, true, event.sequence) {
                case nil: notes.append(.unknownMessages(ids: [target], sequence: event.sequence))
                case let didChange?: changed = didChange || changed
                }
            }
        case .actionCompleted(let completion):
            let idKey = Array(completion.actionID.utf8)
            guard let bytes = try store.get(.actionIDs, idKey), var status = ActionStatus.decode(bytes) else {
                notes.append(.unknownAction(actionID: completion.actionID, sequence: event.sequence))
                break
            }
            guard status.state == .pending else {
                notes.append(.alreadyCompleted(actionID: completion.actionID, sequence: event.sequence))
                break
            }
            try store.delete(.actions, SequenceKey.encode(status.sequence))
            status.state = switch completion.outcome {
            case .done: .done
            case .failed: .failed
            case .discarded: .discarded
            }
            status.completedAt = event.sequence
            try store.put(.actionIDs, idKey, status.encode())
            state.pendingCount -= 1
        case .badgeAdjusted(let adjustment):
            switch adjustment {
            case .delta(let d):
                // The shown badge moves by d and never below 0.
                state.badgeAdjustment = max(state.badgeAdjustment + Int64(d), -(state.counted(unread: state.unread) + state.serverBadgeAdjustment))
            case .set(let n):
                // The badge is n now; the app's value replaces a push's server badge.
                state.serverBadgeAdjustment = 0
                state.badgeAdjustment = Int64(n) - state.counted(unread: state.unread)
            }
        case .custom:
            break
        }
        if changed || state.unread != before.unread || state.badge(unread: state.unread) != before.badge(unread: before.unread) {
            state.version = event.sequence
            state.updatedAt = event.timestampMicros
        }
        state.appliedThrough = event.sequence
        stateDirty = true
        return notes
    }

    // MARK: - Messages

    /// The stored row of message `id` and its header, if there is one.
    private func message(_ id: String) throws -> (bytes: [UInt8], header: MessageRecord.Header)? {
        guard let bytes = try store.get(.messages, Array(id.utf8)) else { return nil }
        guard let header = MessageRecord.Header(stored: bytes) else { throw ProjectionError.malformed(table: .messages, key: id) }
        return (bytes, header)
    }

    /// Files message `id` (its row `bytes`, filed as `new` says) in place of the row `old`
    /// described, keeping the widget order, the expiry index and the counts in step.
    private func write(_ id: String, _ new: MessageRecord.Header, _ bytes: [UInt8], replacing old: MessageRecord.Header?) throws {
        if let old {
            if old.sentAt != new.sentAt { try store.delete(.widget, TimeKey.widgetKey(sentAt: old.sentAt, id: id)) }
            if let e = old.expiresAt, e != new.expiresAt { try store.delete(.expiry, TimeKey.expiryKey(expiresAt: e, id: id)) }
            if !old.isRead { state.unread -= 1 }
        } else {
            state.messageCount += 1
        }
        try store.put(.messages, Array(id.utf8), bytes)
        try store.put(.widget, TimeKey.widgetKey(sentAt: new.sentAt, id: id), bytes)
        if let e = new.expiresAt {
            try store.put(.expiry, TimeKey.expiryKey(expiresAt: e, id: id), [])
            earliestExpiry.filed(e)
        }
        if old?.expiresAt != nil, old?.expiresAt != new.expiresAt { earliestExpiry = .unknown }
        if !new.isRead { state.unread += 1 }
    }

    private func remove(_ id: String, _ old: MessageRecord.Header) throws {
        try store.delete(.messages, Array(id.utf8))
        try store.delete(.widget, TimeKey.widgetKey(sentAt: old.sentAt, id: id))
        if let e = old.expiresAt {
            try store.delete(.expiry, TimeKey.expiryKey(expiresAt: e, id: id))
            earliestExpiry = .unknown
        }
        if !old.isRead { state.unread -= 1 }
        state.messageCount -= 1
    }

    /// Removes messages whose expiry is at or before `now` (the event's commit time).
    private func removeExpired(asOf now: Int64) throws -> Bool {
        let next: Int64
        switch earliestExpiry {
        case .none:
            return false
        case .at(let at):
            next = at
        case .unknown:
            var first: Int64?
            try store.scan(.expiry, from: []) { key, _ in
                first = TimeKey.decodeAscending(key[...])
                return false
            }
            earliestExpiry = ExpiryCache(first)
            guard let first else { return false }
            next = first
        }
        guard next <= now else { return false }
        var expired: [String] = []
        try store.scan(.expiry, from: []) { key, _ in
            guard let at = TimeKey.decodeAscending(key[...]), at <= now else { return false }
            expired.append(String(decoding: key.dropFirst(8), as: UTF8.self))
            return true
        }
        for id in expired {
            if let stored = try message(id) { try remove(id, stored.header) } else {
                throw ProjectionError.malformed(table: .expiry, key: id)
            }
        }
        earliestExpiry = .unknown
        return !expired.isEmpty
    }

    private func applySync(_ sync: InboxSync, _ event: Event) throws -> Bool {
        var changed = false
        if sync.mode == .full {
            // Authoritative: what it does not list is gone from the server. Rows go, and so do
            // local records — a removal is settled, an announcement was withdrawn.
            let listed = Set(sync.messages.map(\.id))
            var missing: [(id: String, header: MessageRecord.Header)] = []
            try store.scan(.messages, from: []) { key, value in
                let id = String(decoding: key, as: UTF8.self)
                if !listed.contains(id) {
                    guard let header = MessageRecord.Header(stored: value) else { throw ProjectionError.malformed(table: .messages, key: id) }
                    missing.append((id, header))
                }
                return true
            }
            for (id, header) in missing { try remove(id, header) }
            changed = !missing.isEmpty
            var settled: [(id: String, record: LocalMessageRecord)] = []
            try store.scan(.local, from: []) { key, value in
                let id = String(decoding: key, as: UTF8.self)
                if !listed.contains(id) {
                    guard let record = LocalMessageRecord.decode(value) else { throw ProjectionError.malformed(table: .local, key: id) }
                    settled.append((id, record))
                }
                return true
            }
            for (id, record) in settled { try deleteLocal(id, record) }
        }
        for id in sync.removed {
            if let stored = try message(id) {
                try remove(id, stored.header)
                changed = true
            }
            if let record = try localRecord(id) { try deleteLocal(id, record) }
        }
        for m in sync.messages {
            changed = try upsert(m, event) || changed
        }
        // The listing is newer than any push: the server's badge of an earlier push is settled.
        state.serverBadgeAdjustment = 0
        return changed
    }

    /// Files message `m` as a listing (or a push that carries it) gives it: kept apart while it
    /// is removed here, absorbing a push's announcement and a local read made before it came.
    /// Returns whether a row changed.
    private func upsert(_ m: InboxMessage, _ event: Event) throws -> Bool {
        let stored = try message(m.id)
        var local: LocalMessageRecord?
        if stored == nil, try localTableMayHoldRecords(), let record = try localRecord(m.id) {
            // Removed here and the server still lists it: it stays removed until it does not.
            if record.standing == .removed { return false }
            local = record
        }
        let old = stored?.header
        if let local { try deleteLocal(m.id, local) }
        if let expires = m.expiresAt, expires.micros <= event.timestampMicros {
            // Already expired when synced: not kept.
            if let old { try remove(m.id, old); return true }
            return false
        }
        let serverRead = m.read ?? old?.serverRead ?? false
        var localRead = old?.localRead ?? local?.localRead
        if localRead == serverRead { localRead = nil }  // the server caught up with the local change
        var record = MessageRecord(
            id: m.id, title: m.title, subheading: m.subheading, iconURL: m.iconURL, sentAt: m.sentAt.micros,
            expiresAt: m.expiresAt?.micros, serverRead: serverRead, localRead: localRead,
            extras: m.extras ?? [:], changedAt: old?.changedAt ?? event.sequence)
        // The encoding is canonical: the same bytes are the same row, and nothing changes.
        var bytes = record.encode()
        if let stored, bytes.sameBytes(as: stored.bytes) { return false }
        record.changedAt = event.sequence
        MessageRecord.setChangedAt(event.sequence, in: &bytes)
        try write(m.id, record.header, bytes, replacing: old)
        // A listing that only settles a local change (same content, same read as shown) changes
        // nothing the widget shows.
        guard let old, let stored else { return true }
        return old.isRead != record.isRead || !MessageRecord.sameContent(bytes, stored.bytes)
    }

    /// A push announcing a message: it counts once, as a row if it carries the message (and the
    /// inbox does not have it yet), else as an announcement; nothing if the inbox already has
    /// the message or it was removed here. A server badge applies after the count.
    private func applyPush(_ push: PushReceived, _ event: Event) throws -> Bool {
        var changed = false
        if try message(push.messageID) == nil {
            let record = try localRecord(push.messageID)
            if record?.standing != .removed {
                if let m = push.message {
                    changed = try upsert(m, event)
                } else if record == nil {
                    try putLocal(push.messageID, LocalMessageRecord(standing: .announced, localRead: nil, changedAt: event.sequence), replacing: nil)
                }
            }
        }
        if let badge = push.badge {
            state.serverBadgeAdjustment = Int64(badge) - state.counted(unread: state.unread) - state.badgeAdjustment
        }
        return changed
    }

    // MARK: - Local records

    private func localRecord(_ id: String) throws -> LocalMessageRecord? {
        guard let bytes = try store.get(.local, Array(id.utf8)) else { return nil }
        guard let record = LocalMessageRecord.decode(bytes) else { throw ProjectionError.malformed(table: .local, key: id) }
        return record
    }

    private func localTableMayHoldRecords() throws -> Bool {
        if let known = localMayHoldRecords { return known }
        var any = false
        try store.scan(.local, from: []) { _, _ in
            any = true
            return false
        }
        localMayHoldRecords = any
        return any
    }

    private func putLocal(_ id: String, _ record: LocalMessageRecord, replacing old: LocalMessageRecord?) throws {
        localMayHoldRecords = true
        if old?.countsInBadge == true { state.announced -= 1 }
        if record.countsInBadge { state.announced += 1 }
        try store.put(.local, Array(id.utf8), record.encode())
    }

    private func deleteLocal(_ id: String, _ record: LocalMessageRecord) throws {
        if record.countsInBadge { state.announced -= 1 }
        try store.delete(.local, Array(id.utf8))
    }

    /// Removes message `id` here until the server's listing drops it. Returns nil for a message
    /// the inbox neither holds nor was told of, else whether a row changed.
    private func removeLocally(_ id: String, _ sequence: UInt64) throws -> Bool? {
        let removed = LocalMessageRecord(standing: .removed, localRead: nil, changedAt: sequence)
        if let stored = try message(id) {
            try remove(id, stored.header)
            try putLocal(id, removed, replacing: nil)
            return true
        }
        guard let record = try localRecord(id) else { return nil }
        if record.standing == .announced { try putLocal(id, removed, replacing: record) }
        return false
    }

    /// Sets a local read flag. Returns nil for an unknown message, else whether anything changed.
    private func setLocalRead(_ id: String, _ read: Bool, _ sequence: UInt64) throws -> Bool? {
        guard let stored = try message(id) else {
            // A message announced by a push and read (or unread) before any listing brought it.
            guard var record = try localRecord(id), record.standing == .announced else { return nil }
            let old = record
            record.localRead = read
            if record != old {
                record.changedAt = sequence
                try putLocal(id, record, replacing: old)
            }
            return false
        }
        let old = stored.header
        var new = old
        new.localRead = read == old.serverRead ? nil : read
        if new.localRead == old.localRead { return false }
        new.changedAt = sequence
        var bytes = stored.bytes
        MessageRecord.setLocalRead(new.localRead, in: &bytes)
        MessageRecord.setChangedAt(sequence, in: &bytes)
        try write(id, new, bytes, replacing: old)
        return new.isRead != old.isRead
    }
}
