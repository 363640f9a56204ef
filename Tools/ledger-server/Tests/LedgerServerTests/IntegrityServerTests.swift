import Foundation
import InboxLedger
import InboxLedgerSync
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Issue 31's failures against a real server and PostgreSQL: poison feed entries, restored
/// ledgers, bad input, statuses on every path, outages, clients that left.
@Suite(.serialized, .enabled(if: Harness.postgresAvailable, "needs Debian's postgresql (scripts/setup.sh installs it) and root to run it as nobody"))
struct IntegrityServerTests {
    func client(_ ledger: Ledger, _ state: String, _ url: URL, _ token: String) throws -> SyncClient {
        var c = SyncConfiguration(server: url, token: token, stateFile: state, sharedCustomTypes: ["com.example.note"])
        c.initialBackoff = .milliseconds(10)
        c.maxBackoff = .milliseconds(100)
        return try SyncClient(ledger: ledger, configuration: c)
    }

    static func wire(_ seq: UInt64, _ event: DomainEvent, base64: Bool, key: String? = nil) throws -> SyncWire.UpEvent {
        let bytes = try event.newEvent().payload
        var wire = SyncWire.UpEvent(Event(sequence: seq, timestampMicros: 1_795_000_000_000_000 + Int64(seq), origin: Origin(role: "t"),
                                          type: event.type, key: key, payload: bytes))
        if base64 {
            wire.payload = nil
            wire.payloadBase64 = Data(bytes).base64EncodedString()
        }
        return wire
    }

    func up(_ url: URL, _ token: String, _ request: SyncWire.UpRequest) async throws -> (status: Int, text: String) {
        let (status, data) = try await http("POST", url, "/v1/up", token: token, body: try JSONEncoder().encode(request))
        return (status, String(decoding: data, as: UTF8.self))
    }

    /// Item 1: every event type in every encoding the protocol allows (payload as JSON text
    /// and as payloadBase64, custom payloads that are not UTF-8 or hold U+0000), then two new
    /// devices sync: each applies the whole feed.
    @Test func everyTypeInEveryEncodingReachesTwoDevices() async throws {
        try await withHarness { h in
            let (_, url) = try await h.startServer()
            let token = try await h.token("una")
            try await publish(url, token: try await h.token("una", scope: "publish"), ids: ["m1", "m2", "m3", "m4"])
            let message = InboxMessage(id: "m9", title: "Nine", sentAt: Timestamp(micros: 1_795_000_000_000_000))
            let events: [DomainEvent] = [
                .messageRead(ReadChange(ids: ["m1"], read: true)),
                .messageRemoved(MessageRemoval(ids: ["m2"])),
                .widgetAction(WidgetAction(actionID: "w1", kind: .markRead, target: "m3")),
                .widgetAction(WidgetAction(actionID: "w2", kind: .custom, name: "snooze")),
                .actionCompleted(ActionCompletion(actionID: "w1", outcome: .done)),
                .badgeAdjusted(.delta(1)),
                .pushReceived(PushReceived(messageID: "m9", message: message)),
                .inboxSynced(InboxSync(mode: .delta, messages: [message])),
                .custom(type: "com.example.note", payload: Array(#"{"n":1}"#.utf8)),
            ]
            // Every built-in type a device sends: not `inbox.shared-settled`, the sync client's own
            // record of where the feed placed a shared event, which no relay sends (docs/events.md).
            #expect(Set(events.compactMap { BuiltInEventType(rawValue: $0.type) }) == Set(BuiltInEventType.allCases).subtracting([.sharedSettled]))
            var wire: [SyncWire.UpEvent] = []
            for base64 in [false, true] {
                for event in events { wire.append(try Self.wire(UInt64(wire.count + 1), event, base64: base64)) }
            }
            // The read and removal again (later in the feed), and custom bytes no text column holds.
            wire.append(try Self.wire(UInt64(wire.count + 1), .messageRead(ReadChange(ids: ["m4"], read: true)), base64: true))
            var binary = try Self.wire(UInt64(wire.count + 1), .custom(type: "com.example.note", payload: [0xff, 0x00, 0x01]), base64: true)
            binary.payloadBase64 = Data([0xff, 0x00, 0x01]).base64EncodedString()
            wire.append(binary)
            var nul = try Self.wire(UInt64(wire.count + 1), .custom(type: "com.example.note", payload: []), base64: false)
            nul.payload = "a\u{0}b"
            wire.append(nul)
            let through = UInt64(wire.count)
            let answer = try await up(url, token, SyncWire.UpRequest(ledger: "una-phone", after: 0, through: through, events: wire))
            #expect(answer.status == 200, "\(answer.text)")
            // Resent as the other encoding: the same events, duplicates.
            let swapped = wire.map { e -> SyncWire.UpEvent in
                var e = e
                if let text = e.payload, !text.utf8.contains(0) {
                    e.payload = nil
                    e.payloadBase64 = Data(text.utf8).base64EncodedString()
                } else if let b = e.payloadBase64, let bytes = Data(base64Encoded: b), let text = String(data: bytes, encoding: .utf8), !text.utf8.contains(0) {
                    e.payloadBase64 = nil
                    e.payload = text
                }
                return e
            }
            let again = try await up(url, token, SyncWire.UpRequest(ledger: "una-phone", after: 0, through: through, events: swapped))
            #expect(again.status == 200 && again.text.contains(#""applied":0"#), "\(again.text)")

            let a = try deviceLedger(h, "A"), b = try deviceLedger(h, "B")
            for device in [a, b] {
                let report = try await client(device.ledger, device.state, url, token).syncOnce()
                let state = try await serverState(url, token: token)
                #expect(report.downCursor == state.head)
                let list = try await device.ledger.read({ try $0.widgetList(limit: 10) })
                #expect(list.items.map(\.id).sorted() == ["m1", "m3", "m4"])
                #expect(list.items.allSatisfy { $0.read })
            }
            let state = try await serverState(url, token: token)
            #expect(state.deviceEvents == wire.count)
            // Two reads, a removal and a mark-read per encoding, one more read, one listing, and
            // the custom events: one per encoding, the bytes and the U+0000 (docs/sync.md, "Down").
            #expect(state.head == 1 + 2 * 3 + 1 + 2 + 2)
        }
    }

    /// Item 1, the operator's side: a feed entry damaged in the database stops every device at
    /// it, naming it; replaced as docs/operations.md says, every device carries on, skipping nothing.
    @Test func aDamagedFeedEntryStopsDevicesUntilAnOperatorReplacesIt() async throws {
        try await withHarness { h in
            let (_, url) = try await h.startServer()
            let token = try await h.token("ada"), backend = try await h.token("ada", scope: "publish")
            try await publish(url, token: backend, ids: ["m1", "m2"])
            let a = try deviceLedger(h, "A")
            let sync = try client(a.ledger, a.state, url, token)
            try await a.ledger.append(.messageRead(ReadChange(ids: ["m1"], read: true)))
            _ = try await sync.syncOnce()
            try await publish(url, token: backend, ids: ["m3"])
            try await h.psql("UPDATE feed SET payload = '' WHERE user_id = 'ada' AND seq = 2")  // damage an entry
            let b = try deviceLedger(h, "B")
            let syncB = try client(b.ledger, b.state, url, token)
            await #expect {
                _ = try await syncB.syncOnce()
            } throws: { error in
                "\(error)".contains("feed entry 2 of ada (message.read) cannot be applied")
            }
            #expect(try await b.ledger.read({ try $0.widgetList(limit: 10) }).items.isEmpty)
            try await h.psql(#"UPDATE feed SET type = 'inbox.synced', payload = '{"mode":"delta","messages":[]}' WHERE user_id = 'ada' AND seq = 2"#)
            let report = try await syncB.syncOnce()
            #expect(report.downCursor == 3)
            #expect(try await b.ledger.read({ try $0.widgetList(limit: 10) }).items.map(\.id).sorted() == ["m1", "m2", "m3"])
        }
    }

    /// Item 7: migrations are checked — a database migrated by a newer release, or one whose
    /// migration differs, is refused at start, naming the migration; an older schema is named.
    @Test func migrationsAreCheckedAtStart() async throws {
        try await withHarness { h in
            try await h.startServer()
            #expect(try await h.psql("SELECT count(*) FROM schema_migrations WHERE name IS NOT NULL AND checksum IS NOT NULL") == "7")
            func start() async throws -> Child {
                let child = try Child(productsDirectory + "/ledger-server",
                                      ["serve", "--port", "0", "--database-url", h.databaseURL, "--secret", Harness.secret])
                _ = try await child.finished()
                return child
            }
            try await h.psql("INSERT INTO schema_migrations (version, name, checksum) VALUES (99, 'from the future', 'x')")
            let newer = try await start()
            #expect(newer.text.contains("schema migration 99 (from the future), which this ledger-server does not know"), "\(newer.text)")
            try await h.psql("DELETE FROM schema_migrations WHERE version = 99")
            try await h.psql("UPDATE schema_migrations SET checksum = 'edited' WHERE version = 2")
            let edited = try await start()
            #expect(edited.text.contains("schema migration 2 (ledger_up) differs"), "\(edited.text)")
            // A schema of the release before named migrations: names and checksums recorded.
            try await h.psql("UPDATE schema_migrations SET name = NULL, checksum = NULL WHERE version <= 3")
            try await h.startServer()
            #expect(try await h.psql("SELECT string_agg(name, ',' ORDER BY version) FROM schema_migrations") == "tables,ledger_up,ledgers.lost,content-dedup, ledger_feed_append, ledger_up_v2,ledger_up_v3 (one jsonb batch), ledgers.refused,custom events in the feed: feed.origin_*, users.custom_entries, ledger_up_v4,ledger_feed_append_v3 (the feed entries as one array), ledger_up_v5")
        }
    }

    /// Item 2: backup → more writes → restore → more writes; every event written after the
    /// restore reaches the server and the other device exactly once.
    @Test func aRestoredDeviceIsRecognisedAndLosesNothing() async throws {
        try await withHarness { h in
            let (_, url) = try await h.startServer()
            let token = try await h.token("vera")
            try await publish(url, token: try await h.token("vera", scope: "publish"), ids: (1...12).map { "m\($0)" })
            let agent = productsDirectory + "/sync-device"
            let path = h.directory + "/vera-phone", state = path + ".sync-state"
            func sync(_ ledger: String, _ state: String) async throws -> String {
                let run = try Child(agent, [ledger, url.absoluteString, token, state, "once"])
                #expect(try await run.finished() == 0, "\(run.text)")
                return run.text
            }
            func read(_ ids: ClosedRange<Int>) async throws {
                for i in ids {
                    let run = try Child(agent, [path, "append", "app", "message.read", "-", #"{"ids":["m\#(i)"],"read":true}"#])
                    #expect(try await run.finished() == 0, "\(run.text)")
                }
            }
            try await read(1...2)
            _ = try await sync(path, state)
            // The backup: a copy of the closed ledger's directory.
            let backup = h.directory + "/vera-backup"
            try FileManager.default.copyItem(atPath: path, toPath: backup)
            try await read(3...5)
            _ = try await sync(path, state)
            // The restore (the state file, outside the directory, is not restored), then more writes.
            try FileManager.default.removeItem(atPath: path)
            try FileManager.default.copyItem(atPath: backup, toPath: path)
            try await read(6...9)
            let after = try await sync(path, state)
            #expect(!after.contains("sent=0"), "\(after)")

            let server = try await serverState(url, token: token)
            let read = Set(server.messages.filter { $0.read == true }.map(\.id))
            #expect(read == Set((1...9).map { "m\($0)" }))
            #expect(server.deviceEvents == 9)
            #expect(server.ledgers.first?.reused == 4)
            // The other device, and the restored one: the same inbox.
            let other = try deviceLedger(h, "vera-tablet")
            _ = try await client(other.ledger, other.state, url, token).syncOnce()
            #expect(Set(try await other.ledger.read({ try $0.widgetList(limit: 20) }).items.filter(\.read).map(\.id)) == read)
            _ = try await sync(path, state)
            let restored = try Ledger(path: path, options: LedgerOptions(role: "test"))
            #expect(try await restored.read({ try $0.widgetList(limit: 20) }).items == (try await other.ledger.read({ try $0.widgetList(limit: 20) }).items))
            // Once each: a resend of the restored history is all duplicates.
            _ = try await sync(path, state)
            #expect(try await serverState(url, token: token).deviceEvents == 9)
        }
    }

    /// Item 3: text PostgreSQL cannot store, identifiers not in NFC, reserved type names: 400
    /// naming the field, nothing written — on the up and the publish path.
    @Test func badTextIsA400AndWritesNothing() async throws {
        try await withHarness { h in
            let (_, url) = try await h.startServer()
            let token = try await h.token("walt"), backend = try await h.token("walt", scope: "publish")
            try await publish(url, token: backend, ids: ["m1"])
            let before = try await serverState(url, token: token)
            let nfd = "e\u{301}"
            func read(_ id: String) -> DomainEvent { .messageRead(ReadChange(ids: [id], read: true)) }
            let cases: [(String, SyncWire.UpRequest, String)] = [
                ("NUL in the ledger id", SyncWire.UpRequest(ledger: "w\u{0}", after: 0, through: 1, events: [try Self.wire(1, read("m1"), base64: false)]), "ledger"),
                ("non-NFC ledger id", SyncWire.UpRequest(ledger: "w" + nfd, after: 0, through: 1, events: [try Self.wire(1, read("m1"), base64: false)]), "ledger"),
                ("NUL in a key", SyncWire.UpRequest(ledger: "W", after: 0, through: 1, events: [try Self.wire(1, read("m1"), base64: false, key: "k\u{0}")]), "events[0].key"),
                ("NUL in a read id", SyncWire.UpRequest(ledger: "W", after: 0, through: 1, events: [try Self.wire(1, read("m\u{0}"), base64: false)]), "events[0].data.ids[0]"),
                ("non-NFC read id", SyncWire.UpRequest(ledger: "W", after: 0, through: 1, events: [try Self.wire(1, read(nfd), base64: true)]), "events[0].data.ids[0]"),
                ("NUL in a removal", SyncWire.UpRequest(ledger: "W", after: 0, through: 1, events: [try Self.wire(1, .messageRemoved(MessageRemoval(ids: ["x\u{0}"])), base64: false)]), "events[0].data.ids[0]"),
                ("NUL in a mark-read target", SyncWire.UpRequest(ledger: "W", after: 0, through: 1, events: [try Self.wire(1, .widgetAction(WidgetAction(actionID: "a", kind: .markRead, target: "t\u{0}")), base64: false)]), "events[0].data.target"),
            ]
            for (what, request, field) in cases {
                let answer = try await up(url, token, request)
                #expect(answer.status == 400, "\(what): \(answer.status) \(answer.text)")
                #expect(answer.text.contains(field), "\(what): \(answer.text)")
            }
            // Reserved names as custom types (what no ledger appends).
            for type in ["message.archived", "Inbox.x", "badge"] {
                var event = try Self.wire(1, .custom(type: "com.example.note", payload: Array("{}".utf8)), base64: false)
                event.type = type
                let answer = try await up(url, token, SyncWire.UpRequest(ledger: "W", after: 0, through: 1, events: [event]))
                #expect(answer.status == 400 && answer.text.contains("reserved"), "\(type): \(answer.text)")
            }
            // A lone surrogate is not JSON text at all.
            let surrogate = try await http("POST", url, "/v1/up", token: token,
                                            body: Data(#"{"ledger":"W","after":0,"through":1,"events":[{"seq":1,"type":"message.read","time":1,"payload":"{\"ids\":[\"\ud800\"],\"read\":true}"}]}"#.utf8))
            #expect(surrogate.status == 400)
            // Publish: ids and removals.
            for (body, field) in [
                (SyncWire.PublishRequest(messages: [InboxMessage(id: "p\u{0}", title: "x", sentAt: Timestamp(micros: 1))]), "messages[0].id"),
                (SyncWire.PublishRequest(messages: [InboxMessage(id: nfd, title: "x", sentAt: Timestamp(micros: 1))]), "messages[0].id"),
                (SyncWire.PublishRequest(messages: [], removed: ["r\u{0}"]), "removed[0]"),
            ] {
                let (status, data) = try await http("POST", url, "/v1/publish", token: backend, body: try JSONEncoder().encode(body))
                #expect(status == 400 && String(decoding: data, as: UTF8.self).contains(field), "\(field): \(String(decoding: data, as: UTF8.self))")
            }
            // A title with U+0000 is fine: it travels escaped inside the listing's JSON.
            let title = SyncWire.PublishRequest(messages: [InboxMessage(id: "p2", title: "a\u{0}b", sentAt: Timestamp(micros: 1))])
            #expect(try await http("POST", url, "/v1/publish", token: backend, body: try JSONEncoder().encode(title)).status == 200)
            var after = try await serverState(url, token: token)
            #expect(after.messages.map(\.id) == ["m1", "p2"])
            after.messages.removeAll { $0.id == "p2" }
            after.head -= 1
            #expect(after == before)
        }
    }

    /// Item 4: the documented status of every refusal, through the one-statement path and the
    /// declared-loss path (`lostThrough`), and of publish.
    @Test func everyRefusalHasItsStatusOnEveryPath() async throws {
        try await withHarness { h in
            let (_, url) = try await h.startServer()
            let xena = try await h.token("xena"), yuri = try await h.token("yuri")
            let read = try Self.wire(3, .messageRead(ReadChange(ids: ["m1"], read: true)), base64: false)
            // Xena's ledger, acknowledged through 2.
            #expect(try await up(url, xena, SyncWire.UpRequest(ledger: "X", after: 0, through: 2, events: [])).status == 200)
            struct Case { var what: String; var token: String; var ledger: String; var after: UInt64; var status: Int; var code: String }
            let cases = [
                Case(what: "another user's ledger", token: yuri, ledger: "X", after: 2, status: 403, code: "forbidden"),
                Case(what: "a gap", token: xena, ledger: "X", after: 5, status: 409, code: "gap"),
                Case(what: "NUL in the ledger id", token: xena, ledger: "X\u{0}", after: 0, status: 400, code: "bad_request"),
            ]
            for c in cases {
                for declared in [false, true] {
                    var event = read
                    event.seq = c.after + 3
                    let request = SyncWire.UpRequest(ledger: c.ledger, after: c.after, through: c.after + 3, events: [event],
                                                     lostThrough: declared ? c.after + 1 : nil)
                    let (status, data) = try await http("POST", url, "/v1/up", token: c.token, body: try JSONEncoder().encode(request))
                    let body = try? JSONDecoder().decode(SyncWire.ErrorBody.self, from: data)
                    #expect(status == c.status && body?.error == c.code, "\(c.what), lostThrough \(declared): \(status) \(String(decoding: data, as: UTF8.self))")
                    if c.code == "gap" { #expect(body?.acked == 2) }
                }
            }
            let state = try await serverState(url, token: xena)
            #expect(state.ledgers == [.init(ledger: "X", acked: 2)] && state.deviceEvents == 0)
            // Publish: scope, nothing, an invalid listing.
            let backend = try await h.token("xena", scope: "publish")
            for (token, body, status) in [(xena, #"{"messages":[]}"#, 403), (backend, #"{"messages":[]}"#, 400),
                                          (backend, #"{"messages":[{"id":"m1","title":"x","sentAt":"soon"}]}"#, 400),
                                          (backend, #"{"messages":[{"id":"m1","title":"x","sentAt":"2026-11-22T08:00:00Z"}],"removed":["m1"]}"#, 400)] {
                #expect(try await http("POST", url, "/v1/publish", token: token, body: Data(body.utf8)).status == status, "\(body)")
            }
        }
    }

    /// Item 4: a server started before PostgreSQL says it waits and gives up in words; during an
    /// outage requests answer 503 and /healthz says why; afterwards everything works again.
    @Test func startupWaitsForPostgreSQLAndAnOutageIs503() async throws {
        try await withHarness { h in
            // Nothing listens on this port (a stopped cluster's, taken from a fresh socket).
            let unused = try freePort()
            let early = try Child(productsDirectory + "/ledger-server",
                                  ["serve", "--port", "0", "--database-url", "postgres://ledger@127.0.0.1:\(unused)/ledger",
                                   "--secret", Harness.secret, "--database-wait", "2"])
            #expect(try await early.finished() != 0)
            #expect(early.text.contains("waiting for PostgreSQL at 127.0.0.1:\(unused)"), "\(early.text)")
            #expect(early.text.contains("gave up waiting for PostgreSQL at 127.0.0.1:\(unused)"), "\(early.text)")

            let (_, url) = try await h.startServer()
            let token = try await h.token("yves")
            #expect(try await http("GET", url, "/healthz", token: nil).status == 200)
            try await h.stopDatabase()
            try await waitForAsync("/healthz to report the database") {
                try await http("GET", url, "/healthz", token: nil).status == 503
            }
            let health = try JSONDecoder().decode(SyncWire.Health.self, from: try await http("GET", url, "/healthz", token: nil).body)
            #expect(!health.ok && health.database.contains("unreachable at 127.0.0.1:\(h.databasePort)"), "\(health)")
            let body = try JSONEncoder().encode(SyncWire.UpRequest(ledger: "Y", after: 0, through: 1, events: []))
            for (method, path) in [("POST", "/v1/up"), ("GET", "/v1/down?wait=5"), ("GET", "/v1/state")] {
                let (status, data) = try await http(method, url, path, token: token, body: method == "POST" ? body : nil)
                let error = try? JSONDecoder().decode(SyncWire.ErrorBody.self, from: data)
                #expect(status == 503 && error?.error == "unavailable", "\(path): \(status) \(String(decoding: data, as: UTF8.self))")
                #expect(error?.message.contains("PostgreSQL at 127.0.0.1:\(h.databasePort)") == true)
            }
            try await h.restartDatabase()
            try await waitForAsync("the server to see PostgreSQL again") {
                try await http("POST", url, "/v1/up", token: token, body: body).status == 200
            }
            #expect(try await http("GET", url, "/healthz", token: nil).status == 200)
        }
    }

    /// Item 5: long polls of clients that left end at once (not at their deadline); a
    /// connection that trickles its headers is closed; per-user long polls are bounded.
    @Test func nothingIsHeldForClientsThatLeft() async throws {
        try await withHarness { h in
            let (_, url) = try await h.startServer(extra: ["--idle-timeout", "2", "--long-polls-per-user", "40"])
            let token = try await h.token("zoe")
            let port = UInt16(url.port ?? 0)
            var polls: [RawConnection] = []
            for _ in 0..<30 {
                let c = try RawConnection(port: port)
                try c.send("GET /v1/down?after=0&wait=30 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\n\r\n")
                polls.append(c)
            }
            try await waitForAsync("30 long polls open") { try await healthNow(url).longPolls == 30 }
            for c in polls { c.close() }
            try await waitForAsync("30 long polls ended by their clients leaving") {
                let health = try await healthNow(url)
                return health.longPollsLeft == 30 && health.longPolls == 0
            }
            // A client that sends a header byte per second is cut off after the idle timeout.
            let slow = try RawConnection(port: port)
            var cutOff = false
            for byte in "GET /v1/state HTTP/1.1\r\nHost: x\r\nX-Padding: abcdefghij\r\n".utf8 {
                if (try? slow.send(String(UnicodeScalar(byte)))) == nil || slow.peerClosed() {
                    cutOff = true
                    break
                }
                try await Task.sleep(for: .seconds(1))  // the trickle's pace, not a wait for an event
            }
            #expect(cutOff, "a trickled header kept its connection past the idle timeout")
            slow.close()
            // The per-user bound on long polls: 429 beyond it.
            let many = try await h.startServer(extra: ["--long-polls-per-user", "2"]).url
            var held: [RawConnection] = []
            for _ in 0..<2 {
                let c = try RawConnection(port: UInt16(many.port ?? 0))
                try c.send("GET /v1/down?after=0&wait=30 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\n\r\n")
                held.append(c)
            }
            try await waitForAsync("2 long polls open") { try await healthNow(many).longPolls == 2 }
            let (status, _) = try await http("GET", many, "/v1/down?wait=30", token: token)
            #expect(status == 429)
            for c in held { c.close() }
            // The per-user bound on ledgers: the third ledger of a user limited to two is 429,
            // and is not created; the first two go on.
            let few = try await h.startServer(extra: ["--ledgers-per-user", "2"]).url
            for (ledger, status) in [("Z1", 200), ("Z2", 200), ("Z3", 429), ("Z1", 200)] {
                let answer = try await up(few, token, SyncWire.UpRequest(ledger: ledger, after: 0, through: 1, events: []))
                #expect(answer.status == status, "\(ledger): \(answer.text)")
            }
            #expect(try await serverState(few, token: token).ledgers.map(\.ledger) == ["Z1", "Z2"])
            // `/v1/state` answers a bounded page of messages and a cursor to the next one: every
            // message once, in byte order, whatever the page size; a bad limit or cursor is a 400.
            let ids = (0..<23).map { "m\($0)" } + ["Äpfel", "Z", "a\u{0301}x".precomposedStringWithCanonicalMapping]
            try await publish(few, token: try await h.token("zoe", scope: "publish"), ids: ids)
            let whole = try await serverState(few, token: token)
            #expect(whole.messages.map(\.id) == ids.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) })
            for size in [1, 4, 25, 26, 1000] {
                #expect(try await serverState(few, token: token, pageSize: size).messages == whole.messages, "page size \(size)")
            }
            let (first, body) = try await http("GET", few, "/v1/state?limit=4", token: token)
            let page = try JSONDecoder().decode(SyncWire.ServerState.self, from: body)
            #expect(first == 200 && page.messages.count == 4 && page.nextAfter == page.messages.last?.id)
            for bad in ["limit=0", "limit=10001", "limit=x", "after=a%00b"] {
                #expect(try await http("GET", few, "/v1/state?" + bad, token: token).status == 400, "\(bad)")
            }
        }
    }
}

/// `/healthz` now.
func healthNow(_ url: URL) async throws -> SyncWire.Health {
    try JSONDecoder().decode(SyncWire.Health.self, from: try await http("GET", url, "/healthz", token: nil).body)
}

/// A free loopback port (bound, read, closed).
func freePort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { Glibc.close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) { p in
        p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
    }
    guard bound else { throw HarnessError(description: "bind: \(errno)") }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// A raw TCP connection to the server, for requests URLSession cannot make (half-sent, abandoned).
final class RawConnection: Sendable {
    let fd: Int32

    init(port: UInt16) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = port.bigEndian
        let rc = withUnsafePointer(to: &address) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else {
            Glibc.close(fd)
            throw HarnessError(description: "connect: \(errno)")
        }
    }

    func send(_ text: String) throws {
        let bytes = Array(text.utf8)
        guard Glibc.send(fd, bytes, bytes.count, Int32(MSG_NOSIGNAL)) == bytes.count else { throw HarnessError(description: "send: \(errno)") }
    }

    /// Whether the server closed its side (a read without waiting sees the end).
    func peerClosed() -> Bool {
        var byte: UInt8 = 0
        let n = recv(fd, &byte, 1, Int32(MSG_DONTWAIT) | Int32(MSG_PEEK))
        return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
    }

    func close() { Glibc.close(fd) }
}
