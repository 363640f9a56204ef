import Foundation
import InboxLedger

final class NotificationService: UNNotificationServiceExtension {
    override func didReceive(_ request: UNNotificationRequest,
                             withContentHandler contentHandler: @escaping (UNNotificationContent) -> Void) {
        Ledger.resume()
        defer {
            try? Ledger.suspend()   // before the handler: the extension is suspended right after it
            contentHandler(request.content)
        }
        do {
            let ledger = try InboxStore.open(as: "notification-service")
            try ledger.append(.pushReceived(Self.push(from: request.content)), key: "push-" + request.identifier)
        } catch {
            print("ledger: \(error.localizedDescription)")
        }
    }

    /// The push as the ledger records it: the message id the server put in the payload, the
    /// message itself when the payload carries it, and the server's badge. Everything comes from
    /// the payload, so a redelivered push has the same content and is recognised as a retry.
    static func push(from content: UNNotificationContent) -> PushReceived {
        let info = content.userInfo
        let id = info["messageID"] as? String ?? content.threadIdentifier
        var message: InboxMessage?
        if let sent = (info["sentAt"] as? String).flatMap(Timestamp.init(iso8601:)) {
            message = InboxMessage(id: id, title: content.title, subheading: content.subtitle, sentAt: sent)
        }
        return PushReceived(messageID: id, message: message, badge: content.badge?.intValue)
    }
}
