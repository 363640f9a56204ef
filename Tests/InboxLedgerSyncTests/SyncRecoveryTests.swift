import Foundation
import InboxLedger
import InboxLedgerSync
import Testing

/// The outside trial's findings (issue 23): a trim before sending, bodies too large, status.
@Suite struct SyncRecoveryTests {
    /// Compacts `ledger` keeping `tail` events, whatever the relay has read (its lease expired).
    func trim(_ ledger: Ledger, keeping tail: Int) throws {
        var policy = CompactionPolicy()
        policy.retainedTail = tail
        policy.consumerLeaseSeconds = 0
        _ = try Compactor(ledger: ledger, policy: policy).runOnce()
    }

    /// Shared events the server does not echo down the feed (so sequences stay predictable).
    func reads(_ ledger: Ledger, _ range: Range<Int>) async throws {
        for i in range { try ledger.append(NewEvent(type: "com.example.n", payload: Array("{\"n\":\(i)}".utf8))) }
    }

    func configuration(state: String) -> SyncConfiguration { InboxLedgerSyncTests.configuration(state: state, custom: ["com.example.n"]) }

    @Test func eventsTrimmedBeforeSendingAreDeclaredLostAndSyncGoesOn() async throws {
        let (ledger, state) = try makeDevice()
        let server = FakeServer()
        let client = try SyncClient(ledger: ledger, configuration: configuration(state: state), transport: server)
        try await reads(ledger, 0..<3)
        _ = try await client.syncOnce()
        try await reads(ledger, 3..<13)  // sequences 4…13; the trim keeps 12 and 13
        try trim(ledger, keeping: 2)

        let report = try await client.syncOnce()
        #expect(report.eventsLost == 8)
        #expect(report.sent == 2)
        #expect(client.status.eventsLost == 8)
        #expect(client.status.up.phase == .stopped && client.status.up.error == nil)
        let id = ledger.metadata.ledgerID
        #expect(server.state.withLock { $0.acked[id] } == 13)
        #expect(server.state.withLock { $0.lost[id] } == 8)
        #expect(server.applied[id]?.map(\.seq) == [1, 2, 3, 12, 13])
        #expect(try relayCursor(ledger) == 13)

        // Later reads travel as before, and the loss is not declared again.
        try await reads(ledger, 13..<14)
        let later = try await client.syncOnce()
        #expect(later.sent == 1 && later.eventsLost == 0)
        #expect(server.state.withLock { $0.lost[id] } == 8)
        #expect(server.applied[id]?.last?.seq == 14)
    }

    @Test func runDeclaresATrimAndKeepsSending() async throws {
        let (ledger, state) = try makeDevice()
        let server = FakeServer()
        try await reads(ledger, 0..<10)
        let client = try SyncClient(ledger: ledger, configuration: configuration(state: state), transport: server)
        try trim(ledger, keeping: 3)
        let loops = Task { await client.run() }
        for await status in client.statusUpdates() where status.eventsSent == 3 && status.eventsLost == 7 { break }
        try await reads(ledger, 10..<12)
        for await status in client.statusUpdates() where status.eventsSent == 5 { break }
        loops.cancel()
        await loops.value
        let id = ledger.metadata.ledgerID
        #expect(server.applied[id]?.map(\.seq) == [8, 9, 10, 11, 12])
        #expect(server.state.withLock { $0.lost[id] } == 7)
    }

    @Test func everythingAfterTheCursorTrimmedIsDeclaredOnce() async throws {
        let (ledger, state) = try makeDevice()
        let server = FakeServer()
        try await reads(ledger, 0..<5)
        try trim(ledger, keeping: 0)
        let client = try SyncClient(ledger: ledger, configuration: configuration(state: state), transport: server)
        let report = try await client.syncOnce()
        let id = ledger.metadata.ledgerID
        #expect(report.eventsLost == 5)
        #expect(server.state.withLock { $0.acked[id] } == 5)
        try await reads(ledger, 5..<6)
        let next = try await client.syncOnce()
        #expect(next.sent == 1 && next.eventsLost == 0)
        #expect(server.state.withLock { $0.lost[id] } == 5)
        #expect(try relayCursor(ledger) == 6)
    }

    @Test func aGapTheDeviceDidNotCauseStillStops() async throws {
        let (ledger, state) = try makeDevice()
        let server = FakeServer()
        let client = try SyncClient(ledger: ledger, configuration: configuration(state: state), transport: server)
        try await reads(ledger, 0..<2)
        _ = try await client.syncOnce()
        server.state.withLock { $0.acked[ledger.metadata.ledgerID] = 0 }  // restored from an old backup
        try await reads(ledger, 2..<3)
        await #expect(throws: SyncError.gap(serverAcked: 0, deviceCursor: 2)) { try await client.syncOnce() }
        #expect(client.status.phase == .failed)
    }

    @Test func aRunningClientRenewsTheRelayLeaseWhileOffline() async throws {
        let (ledger, state) = try makeDevice()
        let server = FakeServer()
        server.state.withLock { $0.offline = true }
        var c = configuration(state: state)
        c.leaseRenewal = .milliseconds(20)
        let client = try SyncClient(ledger: ledger, configuration: c, transport: server)
        let registered = try #require(try ledger.consumers.list().first { $0.name == "sync-relay" }).lastSeen
        let loops = Task { await client.run() }
        var renewed = registered
        while renewed <= registered {
            try await Task.sleep(for: .milliseconds(10))
            renewed = try #require(try ledger.consumers.list().first { $0.name == "sync-relay" }).lastSeen
        }
        loops.cancel()
        await loops.value
        #expect(try relayCursor(ledger) == 0)
    }

    @Test func batchesStayBelowTheBodyLimitAndA413Halves() async throws {
        let (ledger, state) = try makeDevice()
        let server = FakeServer()
        // 20 reads of 3,500 ids (~54 KB each): over 1 MiB in one batch of 500.
        for i in 0..<20 {
            try await ledger.append(.messageRead(ReadChange(ids: (0..<3_500).map { "m-\(i)-\($0)" }, read: true)))
        }
        let client = try SyncClient(ledger: ledger, configuration: configuration(state: state), transport: server)
        let report = try await client.syncOnce()
        #expect(report.sent == 20)
        let sizes = server.state.withLock { $0.bodySizes }
        #expect(sizes.allSatisfy { $0 <= 512 * 1024 } && sizes.count > 1)

        // A server with a lower limit than the client's cap: the 413 halves the part.
        let (other, otherState) = try makeDevice()
        let strict = FakeServer()
        strict.state.withLock { $0.maxBodyBytes = 150_000 }
        for i in 0..<6 {
            try await other.append(.messageRead(ReadChange(ids: (0..<3_500).map { "m-\(i)-\($0)" }, read: true)))
        }
        let otherClient = try SyncClient(ledger: other, configuration: configuration(state: otherState), transport: strict)
        let otherReport = try await otherClient.syncOnce()
        #expect(otherReport.sent == 6)
        #expect(strict.applied[other.metadata.ledgerID]?.count == 6)
        let otherHead = try await other.read({ try $0.head() })
        #expect(try relayCursor(other) == otherHead)
    }

    @Test func oneEventAtTheLimitFitsTheDefaultBody() throws {
        // The worst case: 64 KiB of control characters, each escaped as \u00XX.
        let event = Event(sequence: 1, timestampMicros: Int64.max, origin: Origin(role: "app"), type: String(repeating: "t", count: 128),
                          key: String(repeating: "/", count: 256), payload: [UInt8](repeating: 0x01, count: 65_536))
        let wire = SyncWire.UpEvent(event)
        let encoded = try JSONEncoder().encode(SyncWire.UpRequest(ledger: String(repeating: "\"", count: 128), after: 0, through: 1, events: [wire]))
        #expect(encoded.count <= wire.encodedSizeBound + SyncWire.UpRequest.envelopeSizeBound(ledger: String(repeating: "\"", count: 128)))
        #expect(encoded.count < 1_048_576 / 2)
    }

    @Test func upLagCountsPendingEventsWhileOfflineAndPhasesAreSeparate() async throws {
        let (ledger, state) = try makeDevice()
        let server = FakeServer()
        server.state.withLock { $0.offline = true }
        let client = try SyncClient(ledger: ledger, configuration: configuration(state: state), transport: server)
        let loops = Task { await client.run() }
        try await reads(ledger, 0..<5)
        for await status in client.statusUpdates() where status.upLag == 5 && status.up.phase == .offline { break }
        // Back online, but the up direction is refused (a gap the device did not cause): the
        // down loop's successes do not hide it.
        server.inject(.gap)
        server.state.withLock { $0.offline = false }
        for await status in client.statusUpdates() where status.down.phase == .idle && status.up.phase == .failed {
            #expect(status.phase == .failed)
            #expect(status.error?.needsOperator == true)
            #expect(status.lastError?.contains("lost acknowledged") == true)
            #expect(status.down.error == nil)
            break
        }
        // A gap is not retried (it needs an operator): the up direction stopped, the down one goes on.
        let sends = server.sends
        let received = client.status.changesReceived
        server.publish(type: "message.read", payload: #"{"ids":["x"],"read":true}"#)
        for await status in client.statusUpdates() where status.changesReceived > received { break }
        #expect(server.sends == sends)
        #expect(client.status.up.phase == .failed && client.status.down.phase == .idle)
        loops.cancel()
        await loops.value
        #expect(client.status.up.phase == .failed, "a cancelled run leaves a stopped direction's failure as it was")
        // The next run tries again (the operator fixed the server: here the fault was one-off).
        let again = Task { await client.run() }
        for await status in client.statusUpdates() where status.upLag == 0 && status.up.phase == .idle { break }
        #expect(client.status.up.error == nil)
        again.cancel()
        await again.value
        #expect(client.status.phase == .stopped && client.status.error == nil)
    }

    @Test func syncOnceReportsTheCursorAndLeavesNoLag() async throws {
        let (ledger, state) = try makeDevice()
        let server = FakeServer()
        let client = try SyncClient(ledger: ledger, configuration: configuration(state: state), transport: server)
        try await reads(ledger, 0..<2)
        _ = try await client.syncOnce()
        server.publish(type: "message.read", payload: #"{"ids":["x"],"read":true}"#)
        let report = try await client.syncOnce()
        #expect(report.received == 1)
        let head = try await ledger.read({ try $0.head() })
        #expect(report.upCursor == head)
        #expect(try relayCursor(ledger) == head)
        #expect(client.status.upLag == 0)
        let idle = try await client.syncOnce()
        #expect(idle.sent == 0 && idle.upCursor == head)
    }
}
