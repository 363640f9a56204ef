// Every `///` code example of Sources/InboxLedgerSync, compiled (DocumentationTests checks
// that each one is here, verbatim).

import Foundation
import InboxLedger
import InboxLedgerSync

// SyncClient.swift
func exampleSyncConfiguration(server: URL, token: String, container: String) {
    var configuration = SyncConfiguration(server: server, token: token, stateFile: container + "/inbox.sync-state")
    configuration.sharedTypes.insert("com.example.note-saved")
    _ = configuration
}

func exampleSyncClient(_ ledger: Ledger, server: URL, token: String, container: String) async throws {
    let client = try SyncClient(ledger: ledger, configuration: SyncConfiguration(
        server: server, token: token, stateFile: container + "/inbox.sync-state"))
    let loops = Task { await client.run() }          // until cancelled; survives suspension
    for await status in client.statusUpdates() { print(status.phase, status.upLag, status.downLag ?? 0) }
    loops.cancel()
}

final class ExampleSyncLabel {
    var label = ""

    func follow(_ client: SyncClient) async {
        for await status in client.statusUpdates() { label = "\(status.phase) · \(status.upLag) to send" }
    }
}

func exampleSyncOnce(_ client: SyncClient) async throws {
    let report = try await client.syncOnce()
    print("sent \(report.sent), received \(report.received)")
}

final class ExampleAuth: Sendable {
    func freshToken(replacing refused: String) async throws -> String { refused }
}

func exampleTokenProvider(_ configuration: inout SyncConfiguration, auth: ExampleAuth) {
    configuration.tokenProvider = { refused in try await auth.freshToken(replacing: refused) }
}

// Lifecycle.swift
func exampleLifecycle(_ sync: SyncClient, phase: ScenePhase) {
    switch phase {
    case .active: sync.enterForeground()
    case .background: try? sync.enterBackground()   // nothing to undo if it throws
    default: break
    }
}

func exampleBackgroundRefresh(_ sync: SyncClient, task: BGAppRefreshTask) {
    let refresh = Task { await sync.backgroundRefresh() }
    task.expirationHandler = { refresh.cancel() }   // returns at once; nothing is lost
}

// SyncError.swift
func exampleSyncError(_ client: SyncClient) async {
    do { _ = try await client.syncOnce() } catch { print(error.isRetryable, error) }
}

func exampleNetworkFailure(_ error: SyncError) {
    if case .offline(let failure) = error, failure.reason == .timedOut { print("slow network:", failure) }
}

// SyncStatus.swift
func exampleSyncStatus(_ client: SyncClient) async {
    for await status in client.statusUpdates() {
        switch status.error {
        case .unauthorized?: print("sign in again")
        case .offline(let failure)?: print("offline:", failure)
        default: print(status.phase, "up", status.up.phase, "down", status.down.phase)
        }
    }
}

// Transport.swift
func exampleTransport(url: URL, token: String) async throws {
    let transport = HTTPSyncTransport(server: url, token: token)
    let answer = try await transport.fetch(after: 0, limit: 100, waitSeconds: 0)
    _ = answer
}

func exampleTransportFile() {
    let transport = HTTPSyncTransport(server: URL(fileURLWithPath: "/"), token: "v1.…")
    _ = transport
}

// Wire.swift
func exampleWire(_ ledger: Ledger) throws {
    let request = SyncWire.UpRequest(ledger: ledger.metadata.ledgerID, after: 0, through: 1, events: [])
    let body = try JSONEncoder().encode(request)
    _ = body
}

func exampleWireEndpoint() {
    let up = URL(fileURLWithPath: "/").appendingPathComponent(SyncWire.Endpoint.up.relativePath)
    _ = up
}

func exampleWireErrorCode() {
    let retry = SyncWire.ErrorCode(rawValue: "unavailable")?.isRetryable ?? false   // true
    _ = retry
}

func exampleWireIdentifier() {
    let fine = SyncWire.identifierProblem("m42")          // nil
    let refused = SyncWire.identifierProblem("e\u{301}")  // "is not in Unicode Normalization Form C …"
    _ = (fine, refused)
}

func exampleWireSameEvent(_ event: Event) {
    let again = SyncWire.UpEvent(event)
    assert(again.isSameEvent(as: SyncWire.UpEvent(event)))
}

func exampleWireHealth() {
    let health = SyncWire.Health(ok: false, database: "unreachable: connection refused", longPolls: 0, longPollsLeft: 0)
    _ = health
}
