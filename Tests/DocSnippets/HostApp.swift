import Foundation
import InboxLedgerSync
import InboxLedger
import Observation

@MainActor @Observable
final class InboxViewModel {
    private(set) var rows: [WidgetItem] = []
    private(set) var badge = 0
    private let ledger: Ledger

    init(ledger: Ledger) { self.ledger = ledger }

    /// Keeps `rows` and `badge` current, whichever process changes the inbox; call it from
    /// `.task { await model.observe() }` so that it ends with the view.
    func observe() async {
        do {
            for try await list in LedgerObservation.tracking({ try $0.widgetList(limit: 20) }).values(in: ledger) {
                rows = list.items
                badge = list.badge
            }
        } catch {
            print("inbox observation ended: \(error.localizedDescription)")
        }
    }

    /// Marks a message read; the append runs off the main thread and the observation above
    /// delivers the new list.
    func markRead(_ id: String) async {
        do {
            try await ledger.append(.messageRead(ReadChange(ids: [id], read: true)))
        } catch {
            print("could not mark \(id) read: \(error.localizedDescription)")
        }
    }
}

/// Called from the app's `.onChange(of: scenePhase)`.
func scenePhaseChanged(to phase: ScenePhase) {
    switch phase {
    case .background: try? Ledger.suspend()   // nothing to undo if it throws: calls stay refused until resume()
    case .active: Ledger.resume()
    default: break
    }
}

/// Carries out the widget's actions exactly once: the cursor and the completions commit in
/// one transaction, so a crash in between repeats nothing and loses nothing. Run it in a task
/// that lives as long as the app (it ends when the task is cancelled).
func runActionQueue(_ ledger: Ledger, perform: @Sendable (WidgetAction) async throws -> Void) async throws {
    let host = try await ledger.consumers.consumer(named: "host-app")   // waits through a suspension too
    for try await batch in host.batches(limit: 50) {
        var completions: [NewEvent] = []
        for event in batch.events where event.type == BuiltInEventType.widgetAction.rawValue {
            guard case .widgetAction(let action) = try DomainEvent.decode(type: event.type, payload: event.payload) else { continue }
            try await perform(action)
            completions.append(try DomainEvent.actionCompleted(ActionCompletion(actionID: action.actionID, outcome: .done)).newEvent())
        }
        try await host.commit(batch, appending: completions)   // the next batch is read after this
    }
}

/// At launch: the app's ledger, its sync client, the background refresh registered.
func startSync(server: URL, token: String, refreshToken: @escaping @Sendable (String) async throws -> String) throws -> SyncClient {
    let sync = try InboxSyncing.client(for: try InboxStore.open(as: "app"), server: server, token: token, refreshToken: refreshToken)
    InboxSyncing.registerBackgroundRefresh(sync)
    return sync
}

/// Archives messages on this device; the sync client sends the removal, and the server keeps
/// them removed on every device of the user.
func archive(_ ledger: Ledger, _ ids: [String]) async throws {
    try await ledger.append(.messageRemoved(MessageRemoval(ids: ids)))
}
