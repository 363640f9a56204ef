import Foundation
import InboxLedger

func inboxTour(sharedContainer: String) throws {
    // The widget: read what to show (one short read transaction), record a tap.
    let ledger = try Ledger(path: sharedContainer + "/inbox", options: LedgerOptions(role: "widget"))
    let list = try ledger.read({ try $0.widgetList(limit: 5) })          // rows, unreadCount, badge, version
    print(list.items.map(\.title), list.badge)
    try ledger.append(.widgetAction(WidgetAction(actionID: UUID().uuidString, kind: .markRead, target: "m42")))

    // The notification extension: the pushed message counts once in the badge, before and
    // after the host's sync brings it; a redelivered push (same key) changes nothing.
    try ledger.append(.pushReceived(PushReceived(messageID: "m43")), key: "push-4711")

    // The host app: carry out widget actions exactly once.
    let host = try ledger.consumers.consumer(named: "host-app")
    let batch = try host.next(limit: 50)
    let done = try batch.events.compactMap { e -> NewEvent? in
        guard case .widgetAction(let a) = try DomainEvent.decode(type: e.type, payload: e.payload) else { return nil }
        return try DomainEvent.actionCompleted(ActionCompletion(actionID: a.actionID, outcome: .done)).newEvent()
    }
    try host.commit(batch, appending: done)             // cursor and completions: one transaction

    // Going to the background: iOS kills a suspended process that holds a file lock (0xdead10cc).
    try Ledger.suspend()                                // every lock and reader slot released
    Ledger.resume()                                     // back in the foreground: the next call reopens
}
