// docs/sync.md, "In an app": the host app's sync glue, the status banner, and a tool's loop.
import Observation
import Foundation
import InboxLedger
import InboxLedgerSync

enum InboxSyncing {
    static let refreshTask = "com.example.inbox.sync"

    /// One client for the app's life; the token provider is asked when the server refuses the token (401).
    static func client(for ledger: Ledger, server: URL, token: String,
                       refreshToken: @escaping @Sendable (String) async throws -> String) throws -> SyncClient {
        guard let container = FileManager.default.containerURL(forSecurityApplicationGroupIdentifier: InboxStore.appGroup) else {
            throw CocoaError(.fileNoSuchFile)
        }
        var configuration = SyncConfiguration(server: server, token: token,
                                              stateFile: container.appendingPathComponent("inbox.sync-state").path,
                                              sharedCustomTypes: ["com.example.note-saved"])
        configuration.tokenProvider = refreshToken
        return try SyncClient(ledger: ledger, configuration: configuration)
    }

    /// From the app's `.onChange(of: scenePhase)` (or `didBecomeActive` / `didEnterBackground`).
    static func scenePhaseChanged(to phase: ScenePhase, sync: SyncClient) {
        switch phase {
        case .active: sync.enterForeground()             // resume the ledgers, start syncing
        case .background: try? sync.enterBackground()    // stop syncing, suspend the ledgers (nothing to undo if it throws)
        default: break
        }
    }

    /// At launch, before the app finishes launching (`BGAppRefreshTask`: the `fetch` background mode).
    static func registerBackgroundRefresh(_ sync: SyncClient) {
        BGTaskScheduler.shared.register(forTaskWithIdentifier: refreshTask, using: nil) { task in
            let refresh = Task { await sync.backgroundRefresh() }
            task.expirationHandler = { refresh.cancel() }   // returns at once; nothing is lost
            Task { task.setTaskCompleted(success: await refresh.value) }
        }
    }

    /// When the app goes to the background: ask for the next refresh.
    static func scheduleBackgroundRefresh() {
        let request = BGAppRefreshTaskRequest(identifier: refreshTask)
        request.earliestBeginDate = Date(timeIntervalSinceNow: 15 * 60)
        do { try BGTaskScheduler.shared.submit(request) } catch { print("no background refresh: \(error)") }
    }
}

@MainActor @Observable
final class SyncBanner {
    private(set) var text = ""

    func follow(_ sync: SyncClient) async {
        for await status in sync.statusUpdates() {
            switch (status.phase, status.error) {
            case (_, .unauthorized?): text = "Sign in again"
            case (_, let error?) where error.needsOperator: text = "Sync stopped: contact support"
            case (.offline, _): text = "Offline · \(status.upLag) to send"
            case (.syncing, _): text = "Syncing…"
            default: text = status.upLag > 0 ? "\(status.upLag) to send" : ""
            }
        }
    }
}

func runSync(ledger: Ledger, server: URL, token: String, stateFile: String) async throws {
    let client = try SyncClient(ledger: ledger, configuration: SyncConfiguration(
        server: server, token: token, stateFile: stateFile, sharedCustomTypes: ["com.example.note-saved"]))
    let progress = Task { for await status in client.statusUpdates() { print(status.phase, status.upLag, status.downLag ?? 0) } }
    await client.run()     // up and down directions until the task is cancelled
    progress.cancel()
}
