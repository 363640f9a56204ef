// docs/sync.md, "The client".
import Foundation
import InboxLedger
import InboxLedgerSync

func runSync(ledger: Ledger, server: URL, token: String) async throws {
    let client = try SyncClient(ledger: ledger, configuration: SyncConfiguration(
        server: server, token: token,
        stateFile: NSTemporaryDirectory() + "/inbox.sync-state",
        sharedCustomTypes: ["com.example.note-saved"]))
    let progress = Task { for await status in client.statusUpdates() { print(status.phase, status.upLag, status.downLag) } }
    await client.run()     // up and down loops until the task is cancelled
    progress.cancel()
}
