import Foundation
@testable import InboxLedger

/// An independent reference model of the inbox semantics (docs/semantics.md), written as a
/// plain in-memory fold over decoded JSON, sharing no code with the ledger's projections.
struct InboxModel {
    struct Message: Equatable {
        var title: String
        var sentAt: String
        var expiresAt: String?
        var serverRead: Bool
        var localRead: Bool?
        var read: Bool { localRead ?? serverRead }
    }

    var messages: [String: Message] = [:]
    var adjustment = 0
    /// Pending actions in recording order.
    var pending: [String] = []
    /// Every action ever recorded and whether it is still pending.
    var actions: [String: Bool] = [:]

    var unread: Int { messages.values.filter { !$0.read }.count }
    var badge: Int { max(0, unread + adjustment) }

    /// Newest first, ties by id (ascending byte order).
    var order: [String] {
        messages.keys.sorted { a, b in
            let ta = Timestamp(iso8601: messages[a]!.sentAt)!, tb = Timestamp(iso8601: messages[b]!.sentAt)!
            if ta != tb { return ta > tb }
            return Array(a.utf8).lexicographicallyPrecedes(Array(b.utf8))
        }
    }

    mutating func apply(_ event: Event) {
        guard let object = try? JSONSerialization.jsonObject(with: Data(event.payload)) as? [String: Any] else { return }
        let now = event.timestampMicros
        func expired(_ text: String?) -> Bool { text.map { Timestamp(iso8601: $0)!.micros <= now } ?? false }
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
                let id = m["id"] as! String
                if expired(m["expiresAt"] as? String) { messages[id] = nil; continue }
                let old = messages[id]
                let server = (m["read"] as? Bool) ?? old?.serverRead ?? false
                var local = old?.localRead
                if local == server { local = nil }
                messages[id] = Message(title: m["title"] as! String, sentAt: m["sentAt"] as! String,
                                       expiresAt: m["expiresAt"] as? String, serverRead: server, localRead: local)
            }
        case "message.read":
            let read = object["read"] as! Bool
            for id in object["ids"] as! [String] { markLocal(id, read) }
        case "widget.action":
            let id = object["actionID"] as! String
            guard actions[id] == nil else { return }
            actions[id] = true
            pending.append(id)
            if object["kind"] as? String == "markRead", let target = object["target"] as? String { markLocal(target, true) }
        case "action.completed":
            let id = object["actionID"] as! String
            guard actions[id] == true else { return }
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
