import Foundation
import InboxLedger
import InboxLedgerSync
import Testing

/// Custom events down the feed (docs/sync.md, "Down"), against real `ledger-server` processes
/// and PostgreSQL: what device A sends, device B's `GET /v1/down` gets — in order, byte for
/// byte, once, with the envelope; `--custom-types` and `--custom-entries-per-user`; a backend's
/// `events[]`; and users apart.
@Suite(.serialized, .enabled(if: Harness.postgresAvailable, "needs Debian's postgresql (scripts/setup.sh installs it) and root to run it as nobody"))
struct CustomEventServerTests {
    func up(_ url: URL, _ token: String, _ request: SyncWire.UpRequest) async throws -> (status: Int, error: SyncWire.ErrorBody?, answer: SyncWire.UpResponse?) {
        let (status, data) = try await http("POST", url, "/v1/up", token: token, body: try JSONEncoder().encode(request))
        return (status, try? JSONDecoder().decode(SyncWire.ErrorBody.self, from: data), try? JSONDecoder().decode(SyncWire.UpResponse.self, from: data))
    }

    func publishEvents(_ url: URL, _ token: String, _ request: SyncWire.PublishRequest) async throws -> (status: Int, text: String) {
        let (status, data) = try await http("POST", url, "/v1/publish", token: token, body: try JSONEncoder().encode(request))
        return (status, String(decoding: data, as: UTF8.self))
    }

    /// The whole feed of the token's user, as a device reads it (pages of `limit`).
    func wholeFeed(_ url: URL, _ token: String, limit: Int = 1000) async throws -> [SyncWire.Change] {
        var changes: [SyncWire.Change] = []
        while true {
            let (status, data) = try await http("GET", url, "/v1/down?after=\(changes.last?.seq ?? 0)&limit=\(limit)", token: token)
            guard status == 200 else { throw HarnessError(description: "down: \(status) \(String(decoding: data, as: UTF8.self))") }
            let page = try JSONDecoder().decode(SyncWire.DownResponse.self, from: data)
            if page.changes.isEmpty { return changes }
            changes += page.changes
        }
    }

    /// Device A's custom events — text, bytes that are not UTF-8, U+0000, an empty payload,
    /// keys, roles, none — interleaved with reads and a removal: device B's `GET /v1/down` gets
    /// them in the order the server applied them, each payload byte for byte, with its
    /// envelope; a resend appends nothing; a restored ledger's event at a reused sequence is a
    /// new entry; a real device ledger's events (through `SyncClient`) carry its role.
    @Test func customEventsOfOneDeviceReachAnotherInOrder() async throws {
        try await withHarness { h in
            let (_, url) = try await h.startServer()
            let deviceA = try await h.token("nora"), deviceB = try await h.token("nora")
            try await publish(url, token: try await h.token("nora", scope: "publish"), ids: ["m1", "m2"])
            var rng = SystemRandomNumberGenerator()
            let random = (0..<300).map { _ in UInt8.random(in: 0...255, using: &rng) }
            let payloads: [[UInt8]] = [Array(#"{"note":"first"}"#.utf8), [0xff, 0x00, 0x80], Array("a\u{0}b".utf8), [], random,
                                       Array("ünïcödé ✓ 😀".utf8), Array(repeating: 0x7a, count: 65_536)]
            var events: [SyncWire.UpEvent] = []
            var seq: UInt64 = 0
            for (i, payload) in payloads.enumerated() {
                seq += 1
                events.append(custom(seq, i % 2 == 0 ? "com.example.note" : "com.example.other", payload, key: i % 3 == 0 ? "k-\(i)" : nil,
                                     role: [nil, "app", "widget", "notification-service"][i % 4]))
                if i == 2 {
                    seq += 1
                    events.append(try read(seq, "m1"))
                }
                if i == 4 {
                    seq += 1
                    events.append(try wire(seq, .messageRemoved(MessageRemoval(ids: ["m2"]))))
                }
            }
            let request = SyncWire.UpRequest(ledger: "nora-a", after: 0, through: seq + 1, events: events)
            let first = try await up(url, deviceA, request)
            #expect(first.status == 200 && first.answer?.applied == events.count, "\(String(describing: first.error))")
            let feed = try await wholeFeed(url, deviceB, limit: 3)
            #expect(feed.map(\.seq) == Array(1...UInt64(1 + events.count)))
            #expect(feed.first?.type == "inbox.synced" && feed.first?.origin == nil)
            let entries = Array(feed.dropFirst())
            #expect(entries.map(\.type) == events.map(\.type))
            #expect(entries.map(\.payloadBytes) == events.map(\.payloadBytes), "payloads byte for byte")
            for (entry, event) in zip(entries, events) {
                if BuiltInEventType(rawValue: event.type) != nil {
                    #expect(entry.origin == nil && entry.payloadBase64 == nil, "\(entry.seq)")
                } else {
                    #expect(entry.origin == SyncWire.ChangeOrigin(ledger: "nora-a", seq: event.seq, time: event.time, role: event.role ?? "device",
                                                                  key: event.key), "\(entry.seq)")
                    let isText = event.payload.map { !$0.utf8.contains(0) } ?? false
                    #expect((entry.payloadBase64 != nil) == !isText && (isText || entry.payload.isEmpty), "\(entry.seq)")
                }
            }
            // Sent again: duplicates, nothing appended.
            let again = try await up(url, deviceA, request)
            #expect(again.answer?.applied == 0 && again.answer?.duplicates == events.count)
            #expect(try await serverState(url, token: deviceB).head == UInt64(feed.count))
            // A restored ledger: sequence 2 again with another event, then the old one resent.
            let reused = custom(2, "com.example.other", Array("after the restore".utf8), role: "app")
            let restored = try await up(url, deviceA, SyncWire.UpRequest(ledger: "nora-a", after: 1, through: 2, events: [reused]))
            #expect(restored.answer?.applied == 1 && restored.answer?.reused == 1)
            #expect(try await up(url, deviceA, SyncWire.UpRequest(ledger: "nora-a", after: 1, through: 2, events: [events[1]])).answer?.duplicates == 1)
            let tail = try await wholeFeed(url, deviceB).dropFirst(feed.count)
            #expect(tail.map(\.payload) == ["after the restore"] && tail.first?.origin?.seq == 2 && tail.first?.seq == UInt64(feed.count + 1))

            // A real ledger through SyncClient: its events' roles and keys. (Another user: a
            // ledger with the default maxEventBytes cannot append the 64 KiB payload above with
            // its own envelope, docs/sync.md "Limits".)
            let deviceC = try await h.token("nora-c")
            let a = try deviceLedger(h, "A")
            _ = try a.ledger.append(NewEvent(type: "com.example.note", payload: Array(#"{"from":"ledger"}"#.utf8), key: "note-ledger"))
            var configuration = SyncConfiguration(server: url, token: deviceC, stateFile: a.state, sharedCustomTypes: ["com.example.note"])
            configuration.initialBackoff = .milliseconds(10)
            _ = try await SyncClient(ledger: a.ledger, configuration: configuration).syncOnce()
            let last = try #require(try await wholeFeed(url, deviceC).last(where: { $0.origin?.ledger == a.ledger.metadata.ledgerID }))
            #expect(last.payload == #"{"from":"ledger"}"# && last.origin?.role == "test" && last.origin?.key == "note-ledger" && last.origin?.seq == 1)
        }
    }

    /// `--custom-types`: an event of another custom type is `400` with its `seq`, nothing of the
    /// batch written; the batch without it, declaring it refused, goes through; a publish of it
    /// is a 400 naming the field; an invalid list stops the start; an invalid role is the
    /// event's 400 too.
    @Test func customTypesOutsideTheListAreRefused() async throws {
        try await withHarness { h in
            let bad = try Child(productsDirectory + "/ledger-server", ["serve", "--port", "0", "--database-url", h.databaseURL, "--secret", Harness.secret,
                                                                       "--custom-types", "com.example.note,message.archived"])
            #expect(try await bad.finished() != 0)
            #expect(bad.text.contains("--custom-types: 'message.archived' is in a namespace reserved"), "\(bad.text)")
            let (_, url) = try await h.startServer(extra: ["--custom-types", "com.example.note, com.example.task"])
            let token = try await h.token("olga"), backend = try await h.token("olga", scope: "publish")
            let events = [custom(1, Array("ok".utf8)), try read(2, "m1"), custom(3, "com.example.secret", Array("no".utf8)), custom(4, Array("ok".utf8))]
            let refused = try await up(url, token, SyncWire.UpRequest(ledger: "olga-1", after: 0, through: 4, events: events))
            #expect(refused.status == 400 && refused.error?.seq == 3 && refused.error?.error == "bad_request")
            #expect(refused.error?.message.contains("events[2].type: 'com.example.secret' is not a custom type this server accepts") == true)
            let empty = try await serverState(url, token: token)
            #expect(empty.head == 0 && empty.deviceEvents == 0 && empty.ledgers.isEmpty)
            let resent = try await up(url, token, SyncWire.UpRequest(ledger: "olga-1", after: 0, through: 4,
                                                                     events: [events[0], events[1], events[3]], refused: [3]))
            #expect(resent.status == 200 && resent.answer?.refused == 1 && resent.answer?.applied == 3)
            #expect(try await wholeFeed(url, token).map(\.origin?.seq) == [1, nil, 4])
            // An invalid role: the event's own 400.
            let role = try await up(url, token, SyncWire.UpRequest(ledger: "olga-1", after: 4, through: 5, events: [custom(5, [], role: "a\u{0}b")]))
            #expect(role.status == 400 && role.error?.seq == 5 && role.error?.message.contains("events[0].role") == true)
            // Publish: the field named, nothing written; an accepted type goes.
            let publishRefused = try await publishEvents(url, backend, SyncWire.PublishRequest(messages: [], events: [published("com.example.task", []), published("com.example.secret", [])]))
            #expect(publishRefused.status == 400 && publishRefused.text.contains("events[1].type: 'com.example.secret' is not a custom type"), "\(publishRefused.text)")
            #expect(try await publishEvents(url, backend, SyncWire.PublishRequest(messages: [], events: [published("com.example.task", [])])).status == 200)
            let state = try await serverState(url, token: token)
            #expect(state.head == 4 && state.deviceEvents == 3 && state.ledgers.first?.refused == 1)
        }
    }

    /// `--custom-entries-per-user`: beyond it a batch is `429 too_many` (retryable) and writes
    /// nothing — not its reads, not its acknowledgement; the same for a publish and its listing;
    /// a resend and built-in events are not counted; other users have bounds of their own.
    @Test func customFeedEntriesAreBoundedPerUser() async throws {
        try await withHarness { h in
            let (_, url) = try await h.startServer(extra: ["--custom-entries-per-user", "3"])
            let token = try await h.token("pia"), backend = try await h.token("pia", scope: "publish")
            let first = SyncWire.UpRequest(ledger: "pia-1", after: 0, through: 2, events: [custom(1, []), custom(2, [])])
            #expect(try await up(url, token, first).status == 200)
            #expect(try await up(url, token, first).answer?.duplicates == 2)
            let before = try await serverState(url, token: token)
            let over = try await up(url, token, SyncWire.UpRequest(ledger: "pia-1", after: 2, through: 4, events: [try read(3, "m1"), custom(4, [])]))
            #expect(over.status == 200)
            let beyond = try await up(url, token, SyncWire.UpRequest(ledger: "pia-1", after: 4, through: 6, events: [try read(5, "m2"), custom(6, [])]))
            #expect(beyond.status == 429 && beyond.error?.error == "too_many")
            #expect(beyond.error?.message == "user pia already holds 3 of at most 3 custom feed entries; the 1 this request adds are refused (ledger-server --custom-entries-per-user)")
            var state = try await serverState(url, token: token)
            #expect(state.head == before.head + 2 && state.ledgers.first?.acked == 4 && state.messages.map(\.id) == ["m1"] && state.deviceEvents == 4)
            let listing = SyncWire.PublishRequest(messages: [InboxMessage(id: "m9", title: "Nine", sentAt: Timestamp(micros: 1))], events: [published([])])
            let refused = try await publishEvents(url, backend, listing)
            #expect(refused.status == 429 && refused.text.contains("too_many"), "\(refused.text)")
            state = try await serverState(url, token: token)
            #expect(state.head == before.head + 2 && !state.messages.contains { $0.id == "m9" })
            #expect(try await up(url, token, SyncWire.UpRequest(ledger: "pia-1", after: 4, through: 5, events: [try read(5, "m2")])).status == 200)
            #expect(try await publishEvents(url, backend, SyncWire.PublishRequest(messages: listing.messages)).status == 200)
            #expect(try await up(url, try await h.token("quin"), SyncWire.UpRequest(ledger: "quin-1", after: 0, through: 3,
                                                                                    events: [custom(1, []), custom(2, []), custom(3, [])])).status == 200)
        }
    }

    /// `POST /v1/publish` with `events[]`: after the listing, or alone; each entry's origin is
    /// `{role: server, seq: its own position, time: the server's clock, key}` and no ledger; the
    /// answer's `seq` is the last position; refusals name their field and write nothing; a
    /// device token is 403.
    @Test func publishedCustomEventsReachTheDevices() async throws {
        try await withHarness { h in
            let (_, url) = try await h.startServer()
            let device = try await h.token("rob"), backend = try await h.token("rob", scope: "publish")
            let message = InboxMessage(id: "m1", title: "One", sentAt: Timestamp(micros: 1_795_000_000_000_000))
            let start = Int64(Date().timeIntervalSince1970 * 1_000_000)
            let both = try await publishEvents(url, backend, SyncWire.PublishRequest(messages: [message], events: [
                published(Array(#"{"task":"web"}"#.utf8), key: "task-web-1"), published([0x00, 0x01, 0xfe], base64: true)]))
            #expect(both.status == 200 && (try? JSONDecoder().decode(SyncWire.PublishResponse.self, from: Data(both.text.utf8)))?.seq == 3, "\(both.text)")
            let alone = try await publishEvents(url, backend, SyncWire.PublishRequest(messages: [], events: [published(Array("solo".utf8))]))
            #expect(alone.status == 200 && (try? JSONDecoder().decode(SyncWire.PublishResponse.self, from: Data(alone.text.utf8)))?.seq == 4)
            let end = Int64(Date().timeIntervalSince1970 * 1_000_000)
            let feed = try await wholeFeed(url, device)
            try #require(feed.map(\.type) == ["inbox.synced", "com.example.task", "com.example.task", "com.example.task"])
            #expect(feed[0].origin == nil)
            for entry in feed.dropFirst() {
                let origin = try #require(entry.origin)
                #expect(origin.ledger == nil && origin.seq == entry.seq && origin.role == "server" && (start...end).contains(origin.time), "\(entry)")
            }
            #expect(feed.map(\.origin?.key) == [nil, "task-web-1", nil, nil])
            #expect(feed[2].payloadBytes == [0x00, 0x01, 0xfe] && feed[2].payload.isEmpty && feed[1].payload == #"{"task":"web"}"#)
            // The JSON a device reads: no `ledger` in a published entry's origin.
            let (_, raw) = try await http("GET", url, "/v1/down?after=3", token: device)
            #expect(String(decoding: raw, as: UTF8.self).contains(#""role":"server""#) && !String(decoding: raw, as: UTF8.self).contains("ledger"))

            let before = try await serverState(url, token: device)
            var both64 = published(Array("p".utf8))
            both64.payloadBase64 = "cA=="
            for (event, field) in [(published("message.removed", Array(#"{"ids":["m1"]}"#.utf8)), "events[0].type"),
                                   (published("Widget.tap", []), "events[0].type"), (published([], key: "k\u{0}"), "events[0].key"),
                                   (both64, "events[0]: exactly one of payload or payloadBase64"),
                                   (published(Array(repeating: 0x61, count: 65_537)), "events[0]: payload over 65536 bytes")] {
                let answer = try await publishEvents(url, backend, SyncWire.PublishRequest(messages: [message], events: [event]))
                #expect(answer.status == 400 && answer.text.contains(field), "\(field): \(answer.text)")
            }
            #expect(try await publishEvents(url, device, SyncWire.PublishRequest(messages: [], events: [published([])])).status == 403)
            #expect(try await http("POST", url, "/v1/publish", token: backend, body: Data(#"{"messages":[],"events":[]}"#.utf8)).status == 400)
            #expect(try await serverState(url, token: device) == before)
        }
    }

    /// Two users' custom entries never meet: each user's feed has only its own devices' and
    /// backend's custom events; another user's token cannot send into a ledger (403) nor read
    /// the feed; a publish token names its own user.
    @Test func usersNeverSeeEachOthersCustomEntries() async throws {
        try await withHarness { h in
            let (_, url) = try await h.startServer()
            let sam = try await h.token("sam"), tia = try await h.token("tia")
            let samBackend = try await h.token("sam", scope: "publish"), tiaBackend = try await h.token("tia", scope: "publish")
            #expect(try await up(url, sam, SyncWire.UpRequest(ledger: "sam-1", after: 0, through: 2,
                                                              events: [custom(1, Array("sam 1".utf8)), custom(2, Array("sam 2".utf8))])).status == 200)
            #expect(try await up(url, tia, SyncWire.UpRequest(ledger: "tia-1", after: 0, through: 1, events: [custom(1, Array("tia 1".utf8))])).status == 200)
            #expect(try await publishEvents(url, samBackend, SyncWire.PublishRequest(messages: [], events: [published(Array("for sam".utf8))])).status == 200)
            #expect(try await publishEvents(url, tiaBackend, SyncWire.PublishRequest(messages: [], events: [published(Array("for tia".utf8))])).status == 200)
            // Tia cannot send into Sam's ledger.
            let intrusion = try await up(url, tia, SyncWire.UpRequest(ledger: "sam-1", after: 2, through: 3, events: [custom(3, Array("tia in sam".utf8))]))
            #expect(intrusion.status == 403)
            let samFeed = try await wholeFeed(url, sam), tiaFeed = try await wholeFeed(url, tia)
            #expect(samFeed.map(\.payload) == ["sam 1", "sam 2", "for sam"])
            #expect(tiaFeed.map(\.payload) == ["tia 1", "for tia"])
            #expect(samFeed.compactMap(\.origin?.ledger) == ["sam-1", "sam-1"] && tiaFeed.compactMap(\.origin?.ledger) == ["tia-1"])
            // Publish tokens: no way to name another user.
            #expect(try await serverState(url, token: sam).head == 3)
            #expect(try await serverState(url, token: tia).head == 2)
            #expect(try await wholeFeed(url, try await h.token("uma")).isEmpty)
        }
    }
}
