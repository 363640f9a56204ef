import Foundation
import InboxLedger

enum InboxStore {
    static let appGroup = "group.com.example.inbox"

    /// Opens the shared ledger as `role` ("app", "widget", "notification-service").
    static func open(as role: String) throws -> Ledger {
        guard let container = FileManager.default.containerURL(forSecurityApplicationGroupIdentifier: appGroup) else {
            throw CocoaError(.fileNoSuchFile)
        }
        var options = LedgerOptions(role: role)
        // Extensions are suspended without warning: release the files after 5 s without a call.
        options.closesWhenIdle = role == "app" ? nil : 5
        options.projections = [TaskList.self, SharedNotes.self]   // the app's own read models ("Your own read models")
        return try Ledger(path: container.appendingPathComponent("inbox").path, options: options)
    }
}
