import Foundation
import InboxLedger
import InboxLedgerSync
import Testing

/// Issue 31, items 1 and 2 on the client: a feed entry the ledger refuses stops the down side
/// naming it (nothing skipped), and a ledger restored behind its state file gets the feed again.
@Suite struct SyncRestoreTests {
    @Test func aFeedEntryTheLedgerRefusesStopsNamingItAndSkipsNothing() async throws {
        let (ledger, state) = try makeDevice()
        let server = FakeServer()
        server.publish(type: "inbox.synced", payload: try listing(["m1"]))
        server.publish(type: "message.read", payload: "")  // what a payloadBase64 read became on the old server
        server.publish(type: "message.read", payload: #"{"ids":["m1"],"read":true}"#)
        let client = try SyncClient(ledger: ledger, configuration: configuration(state: state), transport: server)
        await #expect {
            _ = try await client.syncOnce()
        } throws: { error in
            "\(error)".contains("feed entry 2 of alice (message.read) cannot be applied")
        }
        // Nothing of the page, nothing after the entry: the cursor stays before it.
        #expect(try await ledger.read({ try $0.widgetList(limit: 10) }).items.isEmpty)
        #expect(client.status.downCursor == 0)

        // The operator replaces the entry (docs/operations.md): everything comes down, in order.
        server.state.withLock { $0.feed[1].payload = #"{"ids":["m1"],"read":false}"# }
        let report = try await client.syncOnce()
        #expect(report.received == 3 && report.downCursor == 3)
        #expect(try await ledger.read({ try $0.widgetList(limit: 10) }).items.map(\.read) == [true])
    }

    @Test func aLedgerRestoredBehindItsStateFileGetsTheFeedAgain() async throws {
        let (ledger, state) = try makeDevice()
        let server = FakeServer()
        server.publish(type: "inbox.synced", payload: try listing(["m1", "m2"]))
        let client = try SyncClient(ledger: ledger, configuration: configuration(state: state), transport: server)
        _ = try await client.syncOnce()
        let backup = NSTemporaryDirectory() + "/sync-backup-\(UUID().uuidString)"
        try ledger.maintenance.compactCopy(to: backup)
        defer { try? FileManager.default.removeItem(atPath: backup) }
        server.publish(type: "message.read", payload: #"{"ids":["m1"],"read":true}"#)
        _ = try await client.syncOnce()
        #expect(client.status.downCursor == 2)

        // The ledger restored from the backup; the state file (outside it) still says 2.
        let restored = try Ledger(path: backup, options: LedgerOptions(role: "app"))
        #expect(restored.metadata.ledgerID == ledger.metadata.ledgerID)
        let again = try SyncClient(ledger: restored, configuration: configuration(state: state), transport: server)
        #expect(again.status.downCursor == 0)
        let report = try await again.syncOnce()
        #expect(report.received == 2)
        #expect(try await restored.read({ try $0.widgetList(limit: 10) }).items.first { $0.id == "m1" }?.read == true)
        // The original ledger's own state file is still believed.
        #expect(try SyncClient(ledger: ledger, configuration: configuration(state: state), transport: server).status.downCursor == 2)
    }
}
