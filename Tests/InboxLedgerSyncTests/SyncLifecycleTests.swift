import Foundation
import InboxLedger
import InboxLedgerSync
import Synchronization
import Testing

/// The app trial's flows (issue 32) against the in-process server: what an app puts on screen
/// and does at its lifecycle's moments. The ledgers' suspension is recorded instead of done:
/// `Ledger.suspend()` is process-wide, and these tests share their process with others
/// (SuspensionTests checks the real one in processes of their own).
@Suite struct SyncLifecycleTests {
    /// Counts the lifecycle's suspensions and resumptions.
    final class SuspensionRecorder: Sendable {
        let counts = Mutex((suspended: 0, resumed: 0))
        var suspension: LedgerSuspension {
            LedgerSuspension(suspend: { self.counts.withLock { $0.suspended += 1 } }, resume: { self.counts.withLock { $0.resumed += 1 } })
        }
    }

    /// Every status a client delivers, with when it came.
    final class StatusLog: Sendable {
        let entries = Mutex<[(ContinuousClock.Instant, SyncStatus)]>([])
        let task = Mutex<Task<Void, Never>?>(nil)

        init(_ client: SyncClient) {
            let following = Task { [weak self] in
                for await status in client.statusUpdates() { self?.entries.withLock { $0.append((.now, status)) } }
            }
            task.withLock { $0 = following }
        }

        var statuses: [SyncStatus] { entries.withLock { $0.map(\.1) } }
        deinit { task.withLock { $0?.cancel() } }
    }

    func configuration(state: String) -> SyncConfiguration { InboxLedgerSyncTests.configuration(state: state, custom: ["com.example.n"]) }

    func notes(_ ledger: Ledger, _ range: Range<Int>) async throws {
        _ = try ledger.append(contentsOf: range.map { NewEvent(type: "com.example.n", payload: Array("{\"n\":\($0)}".utf8)) })
    }

    /// Waits (polling: the fake server has no notification) until `condition` holds.
    func until(_ condition: () throws -> Bool) async throws {
        while try !condition() { try await Task.sleep(for: .milliseconds(2)) }
    }

    @Test func aFreshClientReportsWhatItKnows() async throws {
        let (ledger, state) = try makeDevice()
        let server = FakeServer()
        for i in 0..<3_000 { server.publish(type: "message.read", payload: "{\"ids\":[\"m\(i)\"],\"read\":true}") }
        try await notes(ledger, 0..<1_000)
        let client = try SyncClient(ledger: ledger, configuration: configuration(state: state), transport: server)
        // Before any round trip: not running, 1,000 events to send, the down lag unknown — not "idle, caught up".
        let fresh = client.status
        #expect(fresh.phase == .stopped && fresh.up.phase == .stopped && fresh.down.phase == .stopped)
        #expect(fresh.upLag == 1_000 && fresh.upCursor == 0)
        #expect(fresh.downLag == nil && fresh.downHead == nil && fresh.error == nil)
        var updates = client.statusUpdates().makeAsyncIterator()
        let first = await updates.next()
        #expect(first == fresh, "the first status delivered is the same")
        // The first answer tells the down lag.
        let loops = Task { await client.run() }
        for await status in client.statusUpdates() where status.downHead != nil {
            #expect(status.downHead == 3_000)
            break
        }
        for await status in client.statusUpdates() where status.downLag == 0 && status.upLag == 0 && status.phase == .idle { break }
        loops.cancel()
        await loops.value
        #expect(client.status.phase == .stopped && client.status.error == nil)
        #expect(client.status.eventsSent == 1_000 && client.status.changesReceived == 3_000)
    }

    @Test func backgroundTripsInTheMiddleOfABatchAreNeverFailures() async throws {
        let (ledger, state) = try makeDevice()
        let server = FakeServer()
        server.state.withLock { $0.answerDelay = .milliseconds(20) }  // every answer comes 20 ms after the commit
        var c = configuration(state: state)
        c.batchSize = 7
        let client = try SyncClient(ledger: ledger, configuration: c, transport: server)
        let recorder = SuspensionRecorder()
        client.useSuspension(recorder.suspension)
        let log = StatusLog(client)
        try await notes(ledger, 0..<300)
        var midBatch = 0
        for cycle in 0..<25 {
            client.enterForeground()
            // In the background while a batch is on its way (the server committed it, the answer not back yet).
            try await until { try server.state.withLock { $0.waiting > 0 } || relayCursor(ledger) == 300 }
            if server.state.withLock({ $0.waiting > 0 }) { midBatch += 1 }
            try client.enterBackground()
            await client.lifecycleRun?.value
            let status = client.status
            #expect(status.phase == .stopped && status.error == nil, "cycle \(cycle): \(status)")
            if cycle % 5 == 0 { try await notes(ledger, 300 + cycle..<301 + cycle) }  // written while in the background
        }
        #expect(midBatch > 0, "no trip happened in the middle of a batch")
        client.enterForeground()
        try await until { try relayCursor(ledger) == 305 }
        try client.enterBackground()
        await client.lifecycleRun?.value
        // Every event on the server once, in order; what was cancelled mid-batch was resent as duplicates.
        #expect(server.applied[ledger.metadata.ledgerID]?.map(\.seq) == Array(1...305))
        #expect(recorder.counts.withLock { $0 } == (suspended: 26, resumed: 26))
        // No status ever said failed, nor carried "cancelled".
        let statuses = log.statuses
        #expect(!statuses.isEmpty)
        #expect(!statuses.contains { $0.phase == .failed || $0.up.error != nil || $0.down.error != nil }, "\(statuses.filter { $0.phase == .failed })")
    }

    @Test func a401IsUnauthorizedAndTheTokenProviderRecoversIt() async throws {
        let (ledger, state) = try makeDevice()
        let server = FakeServer()
        server.state.withLock { $0.acceptedTokens = ["t2"] }
        try await notes(ledger, 0..<3)
        // Without a provider: .unauthorized, the status says so, nothing committed.
        let stuck = try SyncClient(ledger: ledger, configuration: configuration(state: state), transport: server)
        await #expect(throws: SyncError.unauthorized("the token has expired")) { try await stuck.syncOnce() }
        #expect(stuck.status.phase == .failed && stuck.status.error == .unauthorized("the token has expired"))
        #expect(try relayCursor(ledger) == 0)

        // With one: asked once with the refused token, the batch sent again at once.
        let asked = Mutex<[String]>([])
        var c = configuration(state: state)
        c.tokenProvider = { refused in
            asked.withLock { $0.append(refused) }
            return "t2"
        }
        let client = try SyncClient(ledger: ledger, configuration: c, transport: server)
        let report = try await client.syncOnce()
        #expect(report.sent == 3)
        #expect(asked.withLock { $0 } == ["test"])
        #expect(client.status.error == nil)

        // While running: the token expires, both directions meet the 401, the provider is asked once.
        server.state.withLock { $0.acceptedTokens = ["t3"] }
        c.tokenProvider = { refused in
            asked.withLock { $0.append(refused) }
            return "t3"
        }
        let running = try SyncClient(ledger: ledger, configuration: c, transport: server)
        let loops = Task { await running.run() }
        try await notes(ledger, 3..<5)
        for await status in running.statusUpdates() {
            // The provider fixes the 401: no status in between says "unauthorized" (issue 40).
            if case .unauthorized? = status.error { Issue.record("a refresh the provider fixed was shown: \(status)") }
            if status.eventsSent == 2 && status.up.phase == .idle { break }
        }
        #expect(asked.withLock { $0 } == ["test", "test"])
        loops.cancel()
        await loops.value

        // A provider that fails: .unauthorized saying so, and the direction stops.
        c.tokenProvider = { _ in throw CocoaError(.userCancelled) }
        server.state.withLock { $0.acceptedTokens = ["t4"] }
        let signedOut = try SyncClient(ledger: ledger, configuration: c, transport: server)
        do {
            _ = try await signedOut.syncOnce()
            Issue.record("a refused token synced")
        } catch {
            guard case .unauthorized(let message) = error else { throw error }
            #expect(message.contains("token provider failed"))
        }
        #expect(signedOut.status.phase == .failed)
    }

    @Test func statusUpdatesAreCoalescedUnderABurstOf1000Events() async throws {
        let (ledger, state) = try makeDevice()
        let server = FakeServer()
        let client = try SyncClient(ledger: ledger, configuration: configuration(state: state), transport: server)
        let log = StatusLog(client)
        let loops = Task { await client.run() }
        for await status in client.statusUpdates() where status.phase == .idle { break }
        let start = ContinuousClock.now
        for i in 0..<1_000 { try ledger.append(NewEvent(type: "com.example.n", payload: Array("{\"n\":\(i)}".utf8))) }
        for await status in client.statusUpdates() where status.eventsSent == 1_000 && status.up.phase == .idle { break }
        let elapsed = ContinuousClock.now - start
        loops.cancel()
        await loops.value
        let entries = log.entries.withLock { $0.filter { $0.0 >= start } }
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        var stateChanges = 0, upFlips = 0
        for (previous, next) in zip(entries.map(\.1), entries.map(\.1).dropFirst()) {
            if previous.up.phase != next.up.phase || previous.down.phase != next.down.phase || previous.error != next.error { stateChanges += 1 }
            if previous.up.phase == .syncing, next.up.phase == .idle { upFlips += 1 }
        }
        let countersOnly = entries.count - stateChanges
        print("coalescing: \(entries.count) statuses (\(stateChanges) state changes, \(upFlips) syncing → idle) for 1,000 appends in \(String(format: "%.2f", seconds)) s")
        // The rule: counters at most 4 a second; `idle` only after 1 s idle, so at most one flip a second.
        #expect(Double(countersOnly) <= 4 * seconds + 2)
        #expect(Double(upFlips) <= seconds + 1)
        // And the last state always arrives.
        #expect(entries.contains { $0.1.eventsSent == 1_000 && $0.1.up.phase == .idle })
    }

    @Test func aBackgroundRefreshCancelledByItsExpirationReturnsAtOnceAndLosesNothing() async throws {
        let (ledger, state) = try makeDevice()
        let server = FakeServer()
        server.state.withLock { $0.hang = true }  // accepts, never answers
        let client = try SyncClient(ledger: ledger, configuration: configuration(state: state), transport: server)
        let recorder = SuspensionRecorder()
        client.useSuspension(recorder.suspension)
        try await notes(ledger, 0..<5)
        let refresh = Task { await client.backgroundRefresh() }
        try await until { server.state.withLock { $0.waiting } > 0 }
        #expect(recorder.counts.withLock { $0 } == (suspended: 0, resumed: 1))
        refresh.cancel()  // the expiration handler
        // Returns by itself — the server never answers — with the ledgers suspended again.
        #expect(await refresh.value == false)
        #expect(recorder.counts.withLock { $0 } == (suspended: 1, resumed: 1))
        #expect(client.status.phase == .stopped && client.status.error == nil)
        #expect(try relayCursor(ledger) == 0)
        // The next refresh, the server answering: everything once.
        server.state.withLock { $0.hang = false }
        #expect(await client.backgroundRefresh())
        #expect(server.applied[ledger.metadata.ledgerID]?.map(\.seq) == [1, 2, 3, 4, 5])
        #expect(try relayCursor(ledger) == 5)
        #expect(recorder.counts.withLock { $0 } == (suspended: 2, resumed: 2))
    }
}
