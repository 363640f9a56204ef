import Foundation
import InboxLedger

/// Records one delivery of a push. Every value comes from the push (`sentAt` is the server's
/// send time from its payload), never from the clock, so a redelivery builds the same bytes:
/// returns false when this push was recorded before (nothing was written the second time).
func recordPush(pushID: String, messageID: String, title: String, sentAt: Date, in ledger: Ledger) throws -> Bool {
    let message = InboxMessage(id: messageID, title: title, sentAt: Timestamp(sentAt))   // not Timestamp(Date())
    let receipt = try ledger.append(AppendRequest(.pushReceived(PushReceived(messageID: messageID, message: message)),
                                               key: "push-" + pushID))
    return !receipt.isReplay
}
