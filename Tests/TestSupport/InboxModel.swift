import Foundation
import InboxLedger

/// An independent reference model of the inbox semantics (docs/semantics.md), written as a
/// plain in-memory fold over decoded JSON, sharing no code with the ledger's projections.
/// Used by the property tests and by the torture runner (`ledger-torture`).
public struct InboxModel: Sendable {
    public struct Message: Equatable, Sendable {
        public var title: String
        public var sentAt: Int64
        public var expiresAt: Int64?
        public var serverRead: Bool
        public var localRead: Bool?
        public var read: Bool { localRead ?? serverRead }
    }

    public var messages: [String: Message] = [:]
    public var adjustment = 0
    /// Pending actions in recording order.
    public var pending: [String] = []
    /// Every action ever recorded and whether it is still pending.
    public var actions: [String: Bool] = [:]

    public init() {}

    public var unread: Int { messages.values.filter { !$0.read }.count }
    public var badge: Int { max(0, unread + adjustment) }

    /// Newest first, ties by id (ascending byte order).
    public var order: [String] {
        messages.sorted { a, b in
            if a.value.sentAt != b.value.sentAt { return a.value.sentAt > b.value.sentAt }
            return Array(a.key.utf8).lexicographicallyPrecedes(Array(b.key.utf8))
        }.map(\.key)
    }

    /// Folds one event in (events the ledger accepted; anything unexpected is ignored).
    public mutating func apply(_ event: Event) {
        guard let object = try? JSONSerialization.jsonObject(with: Data(event.payload)) as? [String: Any] else { return }
        let now = event.timestampMicros
        func micros(_ text: Any?) -> Int64? { (text as? String).flatMap { Timestamp(iso8601: $0)?.micros } }
        func expired(_ at: Int64?) -> Bool { at.map { $0 <= now } ?? false }
        let knownTypes = ["inbox.synced", "message.read", "widget.action", "action.completed", "badge.adjusted"]
        guard knownTypes.contains(event.type) else { return }
        messages = messages.filter { !expired($0.value.expiresAt) }
        switch event.type {
        case "inbox.synced":
            let list = object["messages"] as? [[String: Any]] ?? []
            if object["mode"] as? String == "full" {
                let ids = Set(list.compactMap { $0["id"] as? String })
                messages = messages.filter { ids.contains($0.key) }
            }
            for id in object["removed"] as? [String] ?? [] { messages[id] = nil }
            for m in list {
                guard let id = m["id"] as? String, let title = m["title"] as? String, let sentAt = micros(m["sentAt"]) else { continue }
                let expiresAt = micros(m["expiresAt"])
                if expired(expiresAt) { messages[id] = nil; continue }
                let old = messages[id]
                let server = (m["read"] as? Bool) ?? old?.serverRead ?? false
                var local = old?.localRead
                if local == server { local = nil }
                messages[id] = Message(title: title, sentAt: sentAt, expiresAt: expiresAt, serverRead: server, localRead: local)
            }
        case "message.read":
            guard let read = object["read"] as? Bool else { return }
            for id in object["ids"] as? [String] ?? [] { markLocal(id, read) }
        case "widget.action":
            guard let id = object["actionID"] as? String, actions[id] == nil else { return }
            actions[id] = true
            pending.append(id)
            if object["kind"] as? String == "markRead", let target = object["target"] as? String { markLocal(target, true) }
        case "action.completed":
            guard let id = object["actionID"] as? String, actions[id] == true else { return }
            actions[id] = false
            pending.removeAll { $0 == id }
        case "badge.adjusted":
            if let d = object["delta"] as? Int {
                adjustment = max(adjustment + d, -unread)
            } else if let s = object["set"] as? Int {
                adjustment = s - unread
            }
        default:
            break
        }
    }

    private mutating func markLocal(_ id: String, _ read: Bool) {
        guard var m = messages[id] else { return }
        m.localRead = read == m.serverRead ? nil : read
        messages[id] = m
    }
}
