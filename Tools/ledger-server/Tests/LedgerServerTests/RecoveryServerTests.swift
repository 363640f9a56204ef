import Foundation
import InboxLedger
import InboxLedgerSync
import Testing

/// The outside trial's findings (issue 23) against a real server and PostgreSQL.
@Suite(.serialized) struct RecoveryServerTests {
    func client(_ ledger: Ledger, _ state: String, _ url: URL, _ token: String, maxBatchBytes: Int? = nil) throws -> SyncClient {
        var c = SyncConfiguration(server: url, token: token, stateFile: state, sharedCustomTypes: ["com.example.note"])
        c.initialBackoff = .milliseconds(10)
        c.maxBackoff = .milliseconds(100)
        if let maxBatchBytes { c.maxBatchBytes = maxBatchBytes }
        return try SyncClient(ledger: ledger, configuration: c)
    }

    /// An event the server refuses for its content never blocks the events after it (issue 40):
    /// an app that raised `maxEventBytes` shares a 100 KiB note the server refuses (its payloads
    /// are at most 64 KiB); the client skips it, declares it, and sends the next ones. Both
    /// sides count it once, whatever the resends.
    @Test func anEventTheServerRefusesIsSkippedDeclaredAndCountedOnBothSides() async throws {
        try await withHarness { h in
            let (_, url) = try await h.startServer()
            let token = try await h.token("rita")
            var options = LedgerOptions(role: "test")
            options.maxEventBytes = 256 << 10
            let path = h.directory + "/R"
            let ledger = try Ledger(path: path, options: options)
            let note = { (text: String) in NewEvent(type: "com.example.note", payload: Array(#"{"text":"\#(text)"}"#.utf8)) }
            try ledger.append(note("before"))
            try ledger.append(note(String(repeating: "x", count: 100 << 10)))  // sequence 2: over the server's 64 KiB
            try ledger.append(note("after"))
            try await ledger.append(.messageRead(ReadChange(ids: ["m1"], read: true)))
            let sync = try client(ledger, path + ".sync-state", url, token)
            let report = try await sync.syncOnce()
            #expect(report.sent == 3 && report.eventsRefused == 1, "\(report)")
            #expect(sync.status.eventsRefused == 1 && sync.status.error == nil)
            let state = try await serverState(url, token: token)
            #expect(state.deviceEvents == 3)
            #expect(state.ledgers.first?.refused == 1 && (state.ledgers.first?.acked ?? 0) >= 4)
            // Resent from the start (a lost acknowledgement): declared again, counted once.
            let again = SyncWire.UpRequest(ledger: ledger.metadata.ledgerID, after: 0, through: 4, events: [], refused: [2])
            let (status, _) = try await http("POST", url, "/v1/up", token: token, body: try JSONEncoder().encode(again))
            #expect(status == 200)
            #expect(try await serverState(url, token: token).ledgers.first?.refused == 1)
            // What the server answers: 400 naming the event's sequence.
            let refusedEvent = try #require(try await ledger.read { try $0.events(after: 1, limit: 1) }.first)
            let alone = SyncWire.UpRequest(ledger: "R2", after: 0, through: 2, events: [SyncWire.UpEvent(refusedEvent)])
            let (code, body) = try await http("POST", url, "/v1/up", token: token, body: try JSONEncoder().encode(alone))
            #expect(code == 400)
            #expect(try JSONDecoder().decode(SyncWire.ErrorBody.self, from: body).seq == 2)
        }
    }

    @Test func trimmedBeforeSentIsDeclaredLostAndRecorded() async throws {
        try await withHarness { h in
            let (_, url) = try await h.startServer()
            let token = try await h.token("dora")
            let device = try deviceLedger(h, "D")
            let sync = try client(device.ledger, device.state, url, token)
            for i in 0..<3 { try device.ledger.append(NewEvent(type: "com.example.note", payload: Array(#"{"n":\#(i)}"#.utf8))) }
            _ = try await sync.syncOnce()
            for i in 3..<33 { try await device.ledger.append(.messageRead(ReadChange(ids: ["m\(i)"], read: true))) }
            var policy = CompactionPolicy()
            policy.retainedTail = 1
            policy.consumerLeaseSeconds = 0
            _ = try Compactor(ledger: device.ledger, policy: policy).runOnce()

            let report = try await sync.syncOnce()
            #expect(report.eventsLost == 29 && report.sent == 1)
            let head = try await device.ledger.read({ try $0.head() })
            let state = try await serverState(url, token: token)
            #expect(state.ledgers == [.init(ledger: device.ledger.metadata.ledgerID, acked: head, lost: 29)])
            // And it goes on: a new read arrives.
            try await device.ledger.append(.messageRead(ReadChange(ids: ["later"], read: true)))
            let later = try await sync.syncOnce()
            #expect(later.sent == 1 && later.eventsLost == 0)
            #expect(try await serverState(url, token: token).ledgers.first?.lost == 29)

            // A batch starting beyond what the server holds, not declared: still a hard gap.
            let body = try JSONEncoder().encode(SyncWire.UpRequest(ledger: device.ledger.metadata.ledgerID, after: head + 10, through: head + 11, events: []))
            #expect(try await http("POST", url, "/v1/up", token: token, body: body).status == 409)
            // A declaration that does not start at `after` is refused.
            let bad = try JSONEncoder().encode(SyncWire.UpRequest(ledger: "X", after: 5, through: 6, events: [], lostThrough: 5))
            #expect(try await http("POST", url, "/v1/up", token: token, body: bad).status == 400)
        }
    }

    @Test func bigBuiltInEventsAreSentInPartsAndA413Halves() async throws {
        try await withHarness { h in
            let (_, url) = try await h.startServer(extra: ["--max-body", "300000"])
            let token = try await h.token("gus")
            let device = try deviceLedger(h, "G")
            for i in 0..<20 {
                try await device.ledger.append(.messageRead(ReadChange(ids: (0..<3_500).map { "m-\(i)-\($0)" }, read: true)))
            }
            // The client's cap above the server's limit: parts are refused (413) and halved.
            let sync = try client(device.ledger, device.state, url, token, maxBatchBytes: 1_000_000)
            let report = try await sync.syncOnce()
            #expect(report.sent == 20)
            #expect(try await serverState(url, token: token).deviceEvents == 20)
        }
    }

    /// A removed message republished by the backend (an edit) stays removed everywhere, settled
    /// (docs/sync.md, "Listings"); to show it again the backend publishes it under a new id.
    @Test func aRemovedMessageRepublishedStaysRemovedAndANewIDShows() async throws {
        try await withHarness { h in
            let (_, url) = try await h.startServer()
            let token = try await h.token("rita")
            let backend = try await h.token("rita", scope: "publish")
            try await publish(url, token: backend, ids: ["m1", "m2"])
            let a = try deviceLedger(h, "A"), b = try deviceLedger(h, "B")
            let syncA = try client(a.ledger, a.state, url, token), syncB = try client(b.ledger, b.state, url, token)
            _ = try await syncA.syncOnce()
            _ = try await syncB.syncOnce()
            try await a.ledger.append(.messageRemoved(MessageRemoval(ids: ["m2"])))
            _ = try await syncA.syncOnce()
            _ = try await syncB.syncOnce()
            #expect(try await b.ledger.read({ try $0.widgetList(limit: 10) }).items.map(\.id) == ["m1"])
            #expect(try await serverState(url, token: token).messages.first { $0.id == "m2" }?.removed == true)

            try await publish(url, token: backend, ids: ["m2", "m2-restored"])
            _ = try await syncA.syncOnce()
            _ = try await syncB.syncOnce()
            let c = try deviceLedger(h, "C")
            _ = try await client(c.ledger, c.state, url, token).syncOnce()
            for device in [a, b, c] {
                #expect(Set(try await device.ledger.read({ try $0.widgetList(limit: 10) }).items.map(\.id)) == ["m1", "m2-restored"])
                #expect(try await device.ledger.read({ try $0.localChanges() }).isEmpty)
            }
            #expect(try await serverState(url, token: token).messages.first { $0.id == "m2" }?.removed == true)
        }
    }

    @Test func smallerFindings() async throws {
        try await withHarness { h in
            let (_, url) = try await h.startServer()
            let token = try await h.token("sam")
            // A read of an id never listed: the device event is kept, and the server keeps the flag
            // (a listing of it later carries it).
            let body = try JSONEncoder().encode(SyncWire.UpRequest(ledger: "S", after: 0, through: 1, events: [
                SyncWire.UpEvent(Event(sequence: 1, timestampMicros: 1, origin: Origin(role: "t"), type: "message.read", key: nil,
                                       payload: Array(#"{"ids":["never-listed"],"read":true}"#.utf8)))]))
            #expect(try await http("POST", url, "/v1/up", token: token, body: body).status == 200)
            let state = try await serverState(url, token: token)
            #expect(state.messages.map(\.id) == ["never-listed"] && state.deviceEvents == 1)
            // Error messages that say what is wrong.
            let negative = try await http("POST", url, "/v1/up", token: token, body: Data(#"{"ledger":"S","after":-1,"through":1,"events":[]}"#.utf8))
            #expect(negative.status == 400)
            #expect(String(decoding: negative.body, as: UTF8.self).contains("invalid value"))
            let huge = try await http("POST", url, "/v1/up", token: token, body: Data(#"{"ledger":"S","after":0,"through":18446744073709551615,"events":[]}"#.utf8))
            #expect(huge.status == 400)
            #expect(String(decoding: huge.body, as: UTF8.self).contains("through: 18446744073709551615 is above"))
            // /v1/state writes `read` even when the server has no flag.
            try await publish(url, token: try await h.token("sam", scope: "publish"), ids: ["p1"])
            let raw = try await http("GET", url, "/v1/state", token: token)
            #expect(String(decoding: raw.body, as: UTF8.self).contains(#""read":null"#))
            // `token --ttl -10` (a negative value after a space) is accepted.
            let child = try Child(productsDirectory + "/ledger-server", ["token", "--user", "sam", "--ttl", "-10", "--secret", Harness.secret])
            #expect(try await child.exitStatus() == 0)
            let expired = child.text.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(try await http("GET", url, "/v1/state", token: expired).status == 401)
        }
    }
}
