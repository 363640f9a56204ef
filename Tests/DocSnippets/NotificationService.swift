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
            // The push's identifier as idempotency key: a redelivered push counts once.
            try ledger.append(.badgeAdjusted(.delta(1)), key: "push-" + request.identifier)
        } catch {
            print("ledger: \(error.localizedDescription)")
        }
    }
}
