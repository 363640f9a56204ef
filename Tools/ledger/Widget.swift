import ArgumentParser
import Foundation
import InboxLedger

struct Widget: ParsableCommand, GuardedCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show exactly what the widget would show: rows, unread count, badge, pending actions.",
        discussion: """
            Reads the inline projections in one short read transaction (no log decoding).

            Example:
              ledger widget /tmp/inbox --limit 5 --json
            """
    )

    @OptionGroup var location: LedgerLocation

    @Option(help: "Rows to show.")
    var limit = 10

    @Flag(help: "Print one JSON object.")
    var json = false

    func validate() throws {
        guard limit >= 0 else { throw ValidationError("--limit must not be negative") }
    }

    func run() throws {
        let ledger = try openLedger(location, writes: false)
        let list: WidgetList
        let actions: [PendingAction]
        do {
            // One snapshot: the badge, the counts and the actions listed agree.
            (list, actions) = try ledger.read { snapshot in (try snapshot.widgetList(limit: limit), try snapshot.pendingActions(limit: 1000)) }
        } catch {
            throw fail(error)
        }
        if json {
            try emit(try jsonLine(WidgetOutput(list, actions: actions)))
            return
        }
        var lines = ["Widget \(location.path)"]
        lines.append("  " + Style.widgetCounts(badge: list.badge, unread: list.unreadCount, announced: list.announced, pendingActions: actions.count))
        lines.append("  version \(list.version)" + (list.updatedAt.map { ", updated \($0.iso8601)" } ?? ""))
        if list.items.isEmpty { lines.append("  (no messages)") }
        for item in list.items {
            let date = String(item.sentAt.iso8601.prefix(16)).replacingOccurrences(of: "T", with: " ")
            let row = "  \(item.read ? " " : "•") \(date)  \(item.title)"
            lines.append(Style.fit(row))
        }
        if !actions.isEmpty {
            lines.append("  pending actions")
            for action in actions.prefix(10) {
                let row = "    #\(action.sequence) \(action.kind.rawValue) \(action.target ?? action.name ?? "") (\(action.actionID), from \(action.origin))"
                lines.append(Style.fit(row))
            }
        }
        try emit(lines.joined(separator: "\n"))
    }
}
