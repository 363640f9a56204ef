import Foundation
import InboxLedger

struct InboxEntry: TimelineEntry {
    let date: Date
    let list: WidgetList?
}

struct InboxTimeline: TimelineProvider {
    func placeholder(in context: Context) -> InboxEntry { InboxEntry(date: Date(), list: nil) }

    func getSnapshot(in context: Context, completion: @escaping (InboxEntry) -> Void) {
        completion(currentEntry())
    }

    func getTimeline(in context: Context, completion: @escaping (Timeline<InboxEntry>) -> Void) {
        let entry = currentEntry()
        // Reload when the first shown message expires; the app asks for a reload after changes.
        let policy: TimelineReloadPolicy = entry.list?.nextExpiry.map { .after($0.date) } ?? .never
        completion(Timeline(entries: [entry], policy: policy))
    }

    private func currentEntry() -> InboxEntry {
        do {
            // One short read transaction; no lock or reader slot is held afterwards.
            let list = try InboxStore.open(as: "widget").read { try $0.widgetList(limit: 5) }
            return InboxEntry(date: Date(), list: list)
        } catch {
            print("widget: \(error.localizedDescription)")
            return InboxEntry(date: Date(), list: nil)
        }
    }
}

/// What the widget's "mark read" button intent does in `perform()`: the badge and the list are
/// right at once; the host app completes the action when it next runs.
func widgetMarkedRead(messageID: String, tapID: String) throws {
    let ledger = try InboxStore.open(as: "widget")
    try ledger.append(.widgetAction(WidgetAction(actionID: tapID, kind: .markRead, target: messageID)))
}
