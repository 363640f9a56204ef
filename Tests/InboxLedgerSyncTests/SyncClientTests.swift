import Foundation
import InboxLedger
import InboxLedgerSync
import Testing

@Suite struct SyncClientTests {
    @Test func sendsOnlySharedEventsOnceAndCommitsAfterTheAnswer() async throws {
        let (ledger, state) = try makeDevice()
        let server = FakeServer()
        let client = try SyncClient(ledger: ledger, configuration: configuration(state: state, custom: ["com.example.note"]), transport: server)
        try await ledger.append(.inboxSynced(InboxSync(mode: .full, messages: [InboxMessage(id: "m1", title: "a", sentAt: Timestamp(micros: 1))])))
        try await ledger.append(.messageRead(ReadChange(ids: ["m1"], read: true)))
        try ledger.append(NewEvent(type: "com.example.note", payload: Array(#"{"n":1}"#.utf8)))
        try ledger.append(NewEvent(type: "com.example.private", payload: [0xff, 0x00]))
        try await ledger.append(.messageRemoved(MessageRemoval(ids: ["m1"])))

        let report = try await client.syncOnce()
        #expect(report.sent == 3)
        // The feed brought the read and the removal back as keyed events (7 in all): syncOnce
        // moves the relay past them too, so no lag is left.
        #expect(report.received == 2)
        #expect(report.upCursor == 7)
        #expect(try relayCursor(ledger) == 7)
        let sent = server.applied[ledger.metadata.ledgerID] ?? []
        #expect(sent.map(\.seq) == [2, 3, 5])
        #expect(sent.map(\.type) == ["message.read", "com.example.note", "message.removed"])
        #expect(sent[1].payload == #"{"n":1}"#)
    }

    /// An event the server refuses for its content never blocks the ones after it (issue 40):
    /// skipped, declared in the request, counted once in the report, the status and on the
    /// server — in `once` and in `continuous` mode.
    @Test func anEventTheServerRefusesIsSkippedDeclaredAndCounted() async throws {
        let (ledger, state) = try makeDevice()
        let server = FakeServer()
        server.state.withLock { $0.refuseContaining = "poison" }
        let client = try SyncClient(ledger: ledger, configuration: configuration(state: state, custom: ["com.example.note"]), transport: server)
        for text in ["a", "poison", "b", "poison again", "c"] {
            try ledger.append(NewEvent(type: "com.example.note", payload: Array(#"{"text":"\#(text)"}"#.utf8)))
        }
        let report = try await client.syncOnce()
        #expect(report.sent == 3 && report.eventsRefused == 2, "\(report)")
        #expect(server.applied[ledger.metadata.ledgerID]?.map(\.seq) == [1, 3, 5])
        #expect(server.state.withLock { $0.refused[ledger.metadata.ledgerID] } == 2)
        #expect(client.status.eventsRefused == 2 && client.status.error == nil && client.status.phase != .failed)
        // Each refused shared event is settled without a position (6, 7: the app projections drop it).
        let settled = try await ledger.read { try $0.events(after: 5, limit: 10) }
        #expect(settled.map(\.type) == [DomainEvent.sharedSettledType, DomainEvent.sharedSettledType])
        #expect(settled.map(\.key) == [SyncWire.refusedKey(seq: 2), SyncWire.refusedKey(seq: 4)])
        #expect(try relayCursor(ledger) == 7)
        // Continuous: the next refused event is skipped as well, the one after it sent.
        try ledger.append(NewEvent(type: "com.example.note", payload: Array(#"{"text":"poison 3"}"#.utf8)))
        try ledger.append(NewEvent(type: "com.example.note", payload: Array(#"{"text":"d"}"#.utf8)))
        let running = Task { await client.run() }
        for await status in client.statusUpdates() where status.eventsRefused == 3 && status.upLag == 0 && status.up.phase == .idle { break }
        running.cancel()
        await running.value
        #expect(server.applied[ledger.metadata.ledgerID]?.map(\.seq) == [1, 3, 5, 9])
        #expect(server.state.withLock { $0.refused[ledger.metadata.ledgerID] } == 3)
        #expect(client.status.error == nil)
    }

    @Test func anAnswerLostAfterTheServerCommittedIsResentAndAppliedOnce() async throws {
        let (ledger, state) = try makeDevice()
        let server = FakeServer()
        let client = try SyncClient(ledger: ledger, configuration: configuration(state: state), transport: server)
        try await ledger.append(.messageRead(ReadChange(ids: ["m1"], read: true)))
        server.inject(.loseAnswer)
        await #expect(throws: SyncError.offline("connection reset after the commit")) { try await client.syncOnce() }
        // Not acknowledged as far as the device knows: the cursor did not move.
        #expect(try relayCursor(ledger) == 0)
        let report = try await client.syncOnce()
        #expect(report.duplicates == 1)
        #expect(server.applied[ledger.metadata.ledgerID]?.count == 1)
        #expect(try relayCursor(ledger) == 2)  // past the read the feed brought back
    }

    @Test func aClientThatDiedBeforeCommittingResendsAsDuplicates() async throws {
        let (ledger, state) = try makeDevice()
        let server = FakeServer()
        try await ledger.append(.messageRead(ReadChange(ids: ["m1"], read: true)))
        // What a device killed between the server's answer and its commit leaves: the server
        // holds the batch, the cursor is where it was.
        let batch = try relayBatch(ledger)
        _ = try await server.send(SyncWire.UpRequest(ledger: ledger.metadata.ledgerID, after: batch.after, through: batch.through,
                                                     events: batch.events.map(SyncWire.UpEvent.init)))
        let client = try SyncClient(ledger: ledger, configuration: configuration(state: state), transport: server)
        let report = try await client.syncOnce()
        #expect(report.sent == 1 && report.duplicates == 1)
        #expect(server.applied[ledger.metadata.ledgerID]?.count == 1)
    }

    @Test func aGapIsReportedAndNothingIsCommitted() async throws {
        let (ledger, state) = try makeDevice()
        let server = FakeServer()
        let client = try SyncClient(ledger: ledger, configuration: configuration(state: state), transport: server)
        try await ledger.append(.messageRead(ReadChange(ids: ["m1"], read: true)))
        server.inject(.gap)
        await #expect(throws: SyncError.gap(serverAcked: 0, deviceCursor: 0)) { try await client.syncOnce() }
        #expect(try relayCursor(ledger) == 0)
        #expect(client.status.phase == .failed)
    }

    @Test func theFeedIsAppendedKeyedAndAReplayChangesNothing() async throws {
        let (ledger, state) = try makeDevice()
        let server = FakeServer()
        server.publish(type: "inbox.synced", payload: try listing(["m1", "m2"]))
        server.publish(type: "message.read", payload: #"{"ids":["m1"],"read":true}"#)
        server.publish(type: "message.removed", payload: #"{"ids":["m2"]}"#)
        let client = try SyncClient(ledger: ledger, configuration: configuration(state: state), transport: server)
        let report = try await client.syncOnce()
        #expect(report.received == 3 && report.downCursor == 3)
        let list = try await ledger.read({ try $0.widgetList(limit: 10) })
        #expect(list.items.map(\.id) == ["m1"])
        #expect(list.items.first?.read == true)
        let head = try await ledger.read({ try $0.head() })
        #expect(try await ledger.read({ try $0.events(after: 0) }).map(\.key) == ["sync-down-alice-1", "sync-down-alice-2", "sync-down-alice-3"])

        // The state file lost: the whole feed again, every entry a replay.
        try FileManager.default.removeItem(atPath: state)
        let again = try SyncClient(ledger: ledger, configuration: configuration(state: state), transport: server)
        let replay = try await again.syncOnce()
        #expect(replay.received == 3)
        #expect(try await ledger.read({ try $0.head() }) == head)
        // What came down is never sent back up.
        #expect(server.applied[ledger.metadata.ledgerID]?.isEmpty ?? true)
    }

    @Test func twoDevicesConvergeThroughTheFeed() async throws {
        let server = FakeServer()
        server.publish(type: "inbox.synced", payload: try listing(["m1", "m2", "m3"]))
        let (a, stateA) = try makeDevice()
        let (b, stateB) = try makeDevice()
        let clientA = try SyncClient(ledger: a, configuration: configuration(state: stateA), transport: server)
        let clientB = try SyncClient(ledger: b, configuration: configuration(state: stateB), transport: server)
        _ = try await clientA.syncOnce()
        _ = try await clientB.syncOnce()
        try await a.append(.messageRead(ReadChange(ids: ["m1"], read: true)))
        try await b.append(.messageRemoved(MessageRemoval(ids: ["m3"])))
        try await b.append(.widgetAction(WidgetAction(actionID: "w1", kind: .markRead, target: "m2")))
        for _ in 0..<2 {
            _ = try await clientA.syncOnce()
            _ = try await clientB.syncOnce()
        }
        let listA = try await a.read({ try $0.widgetList(limit: 10) }), listB = try await b.read({ try $0.widgetList(limit: 10) })
        #expect(listA.items.map(\.id) == ["m2", "m1"] || listA.items.map(\.id) == ["m1", "m2"])
        #expect(listA.items == listB.items)
        #expect(listA.unreadCount == listB.unreadCount && listA.badge == listB.badge)
        #expect(listA.items.first { $0.id == "m1" }?.read == true)
    }

    @Test func runRetriesThroughAnOutageAndReportsProgress() async throws {
        let (ledger, state) = try makeDevice()
        let server = FakeServer()
        let client = try SyncClient(ledger: ledger, configuration: configuration(state: state), transport: server)
        server.inject(.refuse, .refuse, .refuse)
        let loops = Task { await client.run() }
        for i in 0..<20 { try await ledger.append(.messageRead(ReadChange(ids: ["m\(i)"], read: true))) }
        var sawOffline = false
        for await status in client.statusUpdates() {
            if status.phase == .offline { sawOffline = true }
            // At or past 20: the feed echoes the reads back as keyed events, which the relay passes
            // over without sending; its cursor may step past 20 in one batch.
            if status.eventsSent == 20 { break }  // every read acknowledged (the feed brings them back as keyed, unshared events)
        }
        loops.cancel()
        await loops.value
        #expect(sawOffline || server.sends > 1)
        #expect(server.applied[ledger.metadata.ledgerID]?.count == 20)
        #expect(client.status.eventsSent == 20)
    }
}
