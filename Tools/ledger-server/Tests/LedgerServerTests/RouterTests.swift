import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import InboxLedger
import InboxLedgerSync
import Logging
import NIOCore
import Testing
@testable import ledger_server

/// The routes of `buildRouter` against a `MemoryStore`, driven by Hummingbird's router testing
/// (`app.test(.router)`): no PostgreSQL, no process, no port — these run wherever Swift does.
/// What the store does with a batch is checked against PostgreSQL in `StoreParityTests`.
@Suite struct RouterTests {
    /// The development secret the router's authenticator accepts.
    static let secret = "router-tests-secret-0123456789"

    // MARK: - Authentication

    /// Missing, non-bearer, forged and expired tokens are 401 with the protocol's body and a
    /// `WWW-Authenticate` challenge on every `/v1` endpoint; a token of the wrong scope is 403;
    /// `/healthz` needs none; nothing is written.
    @Test func tokensAreCheckedBeforeAnythingIsRead() async throws {
        try await withRouter { r in
            let health = try await r.send(.get, SyncWire.Endpoint.health.rawValue, token: nil)
            #expect(health.status == .ok)
            #expect(try JSONDecoder().decode(SyncWire.Health.self, from: health.body) == SyncWire.Health(ok: true, database: "ok", longPolls: 0, longPollsLeft: 0))

            let batch = try JSONEncoder().encode(SyncWire.UpRequest(ledger: "L", after: 0, through: 1, events: [try read(1, "m1")]))
            let expired = try TokenSigner(secret: Self.secret).sign(Claims(sub: "ann", scope: .device, exp: Int64(Date().timeIntervalSince1970) - 10))
            let forged = try TokenSigner(secret: "another-secret-0123456789").sign(Claims(sub: "ann", scope: .device, exp: Int64(Date().timeIntervalSince1970) + 600))
            let cases: [(String, HTTPFields, String)] = [
                ("no token", [:], "Bearer"),
                ("not a bearer token", [.authorization: "Basic YW5uOnB3"], #"Bearer error="invalid_token""#),
                ("another secret's token", [.authorization: "Bearer \(forged)"], #"Bearer error="invalid_token""#),
                ("an expired token", [.authorization: "Bearer \(expired)"], #"Bearer error="invalid_token""#),
                ("not a token", [.authorization: "Bearer v1.x.y"], #"Bearer error="invalid_token""#),
            ]
            for (what, headers, challenge) in cases {
                for (method, path, body) in [(HTTPRequest.Method.post, "/v1/up", batch), (.get, "/v1/down", nil), (.get, "/v1/state", nil),
                                             (.post, "/v1/publish", Data(#"{"messages":[]}"#.utf8))] {
                    let answer = try await r.send(method, path, headers: headers, body: body)
                    #expect(answer.status == .unauthorized, "\(what) \(path)")
                    #expect(answer.headers[.wwwAuthenticate] == challenge, "\(what) \(path)")
                    #expect(try answer.error().error == SyncWire.ErrorCode.unauthorized.rawValue, "\(what) \(path)")
                }
            }
            let publishToken = try r.token("ann", .publish)
            let wrongScope = try await r.send(.post, "/v1/up", token: publishToken, body: batch)
            #expect(wrongScope.status == .forbidden)
            #expect(try wrongScope.error().message.contains("a publish token cannot call this endpoint (needs device)"))
            let deviceCannotPublish = try await r.send(.post, "/v1/publish", token: try r.token("ann"), body: Data(#"{"messages":[]}"#.utf8))
            #expect(deviceCannotPublish.status == .forbidden)
            try await r.expectNothingStored(for: "ann")
        }
    }

    // MARK: - Bad requests

    /// Each invalid request is `400 bad_request` (or `413 too_large`) with a typed body — the
    /// protocol's code, the status it names, a message that says which field — and writes nothing.
    @Test func aBadRequestIsA400WithATypedBodyAndWritesNothing() async throws {
        try await withRouter(RequestLimits(maxBodyBytes: 4096)) { r in
            let token = try r.token("bea")
            let valid = try read(1, "m1")
            var textAsBytes = valid
            textAsBytes.payloadBase64 = "not base64!"
            var reserved = valid
            reserved.type = "message.frobnicated"
            var spaced = valid
            spaced.type = "bad type"
            var badPayload = valid
            badPayload.payload = #"{"ids":"m1","read":true}"#
            func up(_ request: SyncWire.UpRequest) throws -> Data { try JSONEncoder().encode(request) }
            let cases: [(String, HTTPRequest.Method, String, Data?, HTTPResponse.Status, String)] = [
                ("malformed JSON", .post, "/v1/up", Data(#"{"ledger": "L", "#.utf8), .badRequest, "malformed JSON"),
                ("a missing field", .post, "/v1/up", Data(#"{"ledger":"L","after":0,"events":[]}"#.utf8), .badRequest, "missing field through"),
                ("a wrong type", .post, "/v1/up", Data(#"{"ledger":"L","after":"0","through":1,"events":[]}"#.utf8), .badRequest, "wrong type at after"),
                ("a negative sequence", .post, "/v1/up", Data(#"{"ledger":"L","after":-1,"through":1,"events":[]}"#.utf8), .badRequest, "invalid value"),
                ("after above through", .post, "/v1/up", try up(.init(ledger: "L", after: 3, through: 2, events: [])), .badRequest,
                 "after (3) must not exceed through (2)"),
                ("sequences out of order", .post, "/v1/up", try up(.init(ledger: "L", after: 0, through: 3, events: [try read(2, "m1"), valid])),
                 .badRequest, "events[1].seq: 1 must be above 2"),
                ("an event above through", .post, "/v1/up", try up(.init(ledger: "L", after: 0, through: 0, events: [valid])), .badRequest,
                 "events[0].seq: 1 must be above 0 and at most through (0)"),
                ("both payload fields", .post, "/v1/up", try up(.init(ledger: "L", after: 0, through: 1, events: [textAsBytes])), .badRequest,
                 "events[0]: exactly one of payload or payloadBase64"),
                ("a reserved type name", .post, "/v1/up", try up(.init(ledger: "L", after: 0, through: 1, events: [reserved])), .badRequest,
                 "events[0].type: 'message.frobnicated' is in a namespace reserved"),
                ("a type with a space", .post, "/v1/up", try up(.init(ledger: "L", after: 0, through: 1, events: [spaced])), .badRequest,
                 "events[0].type"),
                ("an invalid built-in payload", .post, "/v1/up", try up(.init(ledger: "L", after: 0, through: 1, events: [badPayload])), .badRequest,
                 "events[0].data.ids (message.read)"),
                ("an empty ledger id", .post, "/v1/up", try up(.init(ledger: "", after: 0, through: 1, events: [])), .badRequest, "ledger: must be"),
                ("declared losses below after", .post, "/v1/up", try up(.init(ledger: "L", after: 2, through: 3, events: [], lostThrough: 1)),
                 .badRequest, "lostThrough (1) must be above after (2)"),
                ("a page size of 0", .get, "/v1/down?limit=0", nil, .badRequest, "limit: expected an integer in 1…1000, got '0'"),
                ("a wait too long", .get, "/v1/down?wait=31", nil, .badRequest, "wait: expected an integer in 0…30"),
                ("a body over the limit", .post, "/v1/up", Data(repeating: 0x20, count: 5000), .contentTooLarge, "the body exceeds 4096 bytes"),
            ]
            for (what, method, path, body, status, fragment) in cases {
                let answer = try await r.send(method, path, token: token, body: body)
                #expect(answer.status == status, "\(what)")
                #expect(answer.headers[.contentType] == "application/json", "\(what)")
                let error = try answer.error()
                let code = try #require(SyncWire.ErrorCode(rawValue: error.error), "\(what): \(error.error)")
                #expect(code.status == status.code, "\(what)")
                #expect(code == (status == .contentTooLarge ? .tooLarge : .badRequest), "\(what)")
                #expect(error.message.contains(fragment), "\(what): \(error.message)")
                #expect(error.acked == nil, "\(what)")
            }
            let nothing = try await r.send(.post, "/v1/publish", token: try r.token("bea", .publish), body: Data(#"{"messages":[]}"#.utf8))
            #expect(nothing.status == .badRequest)
            #expect(try nothing.error().message == "nothing to publish")
            try await r.expectNothingStored(for: "bea")
        }
    }

    // MARK: - Up and down

    /// A batch is acknowledged through `through` (sequences without a shared event included);
    /// its reads, removals and mark-read actions become feed entries carrying the validated
    /// bytes, and its custom events entries with their envelope, which `/v1/down` pages in
    /// order; `/v1/state` shows the message state and the ledger.
    @Test func anUpBatchIsAcknowledgedAndComesDownAsFeedEntries() async throws {
        try await withRouter { r in
            let token = try r.token("cy")
            let note = SyncWire.UpEvent(Event(sequence: 2, timestampMicros: 2, origin: Origin(role: "t"), type: "com.example.note", key: "n-1",
                                              payload: [0xff, 0x00, 0x01]))
            let markRead = try wire(5, .widgetAction(WidgetAction(actionID: "a1", kind: .markRead, target: "m3")))
            let events = [try read(1, "m1"), note, try wire(3, .messageRemoved(MessageRemoval(ids: ["m2"]))), markRead]
            let answer = try await r.up(token, SyncWire.UpRequest(ledger: "cy-phone", after: 0, through: 6, events: events))
            #expect(answer == SyncWire.UpResponse(user: "cy", ledger: "cy-phone", acked: 6, applied: 4, duplicates: 0))

            let page = try await r.down(token, "?after=0")
            #expect(page.user == "cy" && page.head == 4)
            try #require(page.changes.map(\.seq) == [1, 2, 3, 4])
            #expect(page.changes.map(\.type) == ["message.read", "com.example.note", "message.removed", "message.read"])
            #expect(page.changes[0].payload == events[0].payload)
            // The custom event: its bytes (not UTF-8: in base64) and its envelope; the others have none.
            #expect(page.changes[1] == SyncWire.Change(seq: 2, type: "com.example.note", payload: "", payloadBase64: "/wAB",
                                                       origin: SyncWire.ChangeOrigin(ledger: "cy-phone", seq: 2, time: 2, role: "t", key: "n-1")))
            #expect(page.changes.filter { $0.seq != 2 }.allSatisfy { $0.origin == nil && $0.payloadBase64 == nil })
            let generated = try JSONDecoder().decode(ReadChange.self, from: Data(page.changes[3].payload.utf8))
            #expect(generated == ReadChange(ids: ["m3"], read: true))
            let second = try await r.down(token, "?after=1&limit=1")
            #expect(second.head == 4 && second.changes.map(\.seq) == [2])
            let end = try await r.down(token, "?after=4")
            #expect(end.head == 4 && end.changes.isEmpty)

            let state = try await r.state(token, "")
            #expect(state.messages == [.init(id: "m1", read: true, removed: false), .init(id: "m2", read: nil, removed: true),
                                       .init(id: "m3", read: true, removed: false)])
            #expect(state.ledgers == [.init(ledger: "cy-phone", acked: 6)])
            #expect(state.head == 4 && state.deviceEvents == 4)
            let paged = try await r.state(token, "?limit=2")
            #expect(paged.messages.map(\.id) == ["m1", "m2"] && paged.nextAfter == "m2")
            #expect(try await r.state(token, "?after=m2&limit=2").messages.map(\.id) == ["m3"])

            // Within a batch, the last flag of a message wins; a removal stays.
            let flags = [try read(7, "m1", read: false), try read(8, "m2"), try read(9, "m1"), try read(10, "m2", read: false)]
            #expect(try await r.up(token, SyncWire.UpRequest(ledger: "cy-phone", after: 6, through: 10, events: flags)).applied == 4)
            #expect(try await r.state(token, "?limit=2").messages == [.init(id: "m1", read: true, removed: false), .init(id: "m2", read: false, removed: true)])
            #expect(try await r.down(token, "?after=4").changes.map(\.payload) == flags.map(\.payload))
        }
    }

    /// Resending is harmless: the same batch, the same events in the other encoding, an
    /// overlapping later batch and eight concurrent copies each apply every event once; a
    /// different event at an acknowledged sequence (a restored ledger) is applied as reused.
    @Test func aResentBatchIsAcknowledgedAgainAndAppliedOnce() async throws {
        try await withRouter { r in
            let token = try r.token("dee")
            let first = [try read(1, "m1"), try read(2, "m2", read: false), try wire(3, .messageRemoved(MessageRemoval(ids: ["m3"])))]
            let request = SyncWire.UpRequest(ledger: "dee-phone", after: 0, through: 3, events: first)
            #expect(try await r.up(token, request).applied == 3)
            let head = try await r.down(token, "").head
            #expect(head == 3)

            let again = try await r.up(token, request)
            #expect(again == SyncWire.UpResponse(user: "dee", ledger: "dee-phone", acked: 3, applied: 0, duplicates: 3))
            let otherEncoding = first.map { e -> SyncWire.UpEvent in
                var e = e
                e.payloadBase64 = e.payload.map { Data($0.utf8).base64EncodedString() }
                e.payload = nil
                return e
            }
            #expect(try await r.up(token, SyncWire.UpRequest(ledger: "dee-phone", after: 0, through: 3, events: otherEncoding)).duplicates == 3)
            let overlapping = SyncWire.UpRequest(ledger: "dee-phone", after: 0, through: 5, events: first + [try read(4, "m4"), try read(5, "m5")])
            let answer = try await r.up(token, overlapping)
            #expect(answer.acked == 5 && answer.applied == 2 && answer.duplicates == 3)
            #expect(try await r.down(token, "").head == 5)

            let copies = SyncWire.UpRequest(ledger: "dee-phone", after: 5, through: 8, events: [try read(6, "m6"), try read(8, "m8")])
            let applied = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<8 { group.addTask { try await r.up(token, copies).applied } }
                return try await group.reduce(0, +)
            }
            #expect(applied == 2)
            let feed = try await r.down(token, "")
            #expect(feed.head == 7 && feed.changes.count == 7)

            // A restored ledger: sequence 2 again, with another event.
            let restored = SyncWire.UpRequest(ledger: "dee-phone", after: 1, through: 2, events: [try read(2, "m9")])
            let reused = try await r.up(token, restored)
            #expect(reused == SyncWire.UpResponse(user: "dee", ledger: "dee-phone", acked: 8, applied: 1, duplicates: 0, reused: 1))
            // Both histories' events at sequence 2 are duplicates from now on.
            #expect(try await r.up(token, restored).duplicates == 1)
            #expect(try await r.up(token, SyncWire.UpRequest(ledger: "dee-phone", after: 1, through: 2, events: [first[1]])).duplicates == 1)
            let state = try await r.state(token, "")
            #expect(state.ledgers == [.init(ledger: "dee-phone", acked: 8, reused: 1)])
            #expect(state.deviceEvents == 8)
        }
    }

    /// What only the store can refuse: another user's ledger (403), a batch after what is held
    /// (409 with `acked`), a ledger beyond the per-user bound (429, not created); declared losses
    /// are counted once. A refusal writes nothing.
    @Test func refusalsThatNeedTheStoresStateWriteNothing() async throws {
        try await withRouter(RequestLimits(ledgersPerUser: 2)) { r in
            let eve = try r.token("eve"), fay = try r.token("fay")
            #expect(try await r.up(eve, SyncWire.UpRequest(ledger: "eve-1", after: 0, through: 4, events: [try read(4, "m1")])).acked == 4)
            let before = try await r.state(eve, "")

            let theirs = try await r.send(.post, "/v1/up", token: fay,
                                          body: try JSONEncoder().encode(SyncWire.UpRequest(ledger: "eve-1", after: 4, through: 5, events: [try read(5, "x")])))
            #expect(theirs.status == .forbidden)
            #expect(try theirs.error() == SyncWire.ErrorBody(error: "forbidden", message: "ledger eve-1 belongs to another user"))
            let gap = try await r.send(.post, "/v1/up", token: eve,
                                       body: try JSONEncoder().encode(SyncWire.UpRequest(ledger: "eve-1", after: 9, through: 10, events: [try read(10, "x")])))
            #expect(gap.status == .conflict)
            #expect(try gap.error() == SyncWire.ErrorBody(error: "gap", message: "the batch starts after 9 but the server holds this ledger only through 4", acked: 4))
            #expect(try await r.up(eve, SyncWire.UpRequest(ledger: "eve-2", after: 0, through: 1, events: [])).acked == 1)
            let third = try await r.send(.post, "/v1/up", token: eve,
                                         body: try JSONEncoder().encode(SyncWire.UpRequest(ledger: "eve-3", after: 0, through: 1, events: [try read(1, "x")])))
            #expect(third.status == .tooManyRequests)
            #expect(try third.error().error == "too_many")
            var after = try await r.state(eve, "")
            #expect(after.ledgers.map(\.ledger) == ["eve-1", "eve-2"])
            after.ledgers.removeAll { $0.ledger == "eve-2" }
            #expect(after == before)
            try await r.expectNothingStored(for: "fay")

            // Losses above what is held, once.
            let lost = SyncWire.UpRequest(ledger: "eve-1", after: 4, through: 9, events: [try read(8, "m8")], lostThrough: 7)
            let answer = try await r.up(eve, lost)
            #expect(answer == SyncWire.UpResponse(user: "eve", ledger: "eve-1", acked: 9, applied: 1, duplicates: 0, lost: 3))
            #expect(try await r.up(eve, lost) == SyncWire.UpResponse(user: "eve", ledger: "eve-1", acked: 9, applied: 0, duplicates: 1, lost: 0))
            #expect(try await r.state(eve, "").ledgers.first == .init(ledger: "eve-1", acked: 9, lost: 3))
        }
    }

    /// A long poll waits for the feed and wakes when a batch of its user moves it; a user's
    /// polls beyond `--long-polls-per-user` are 429.
    @Test func aLongPollWakesWhenTheFeedMoves() async throws {
        try await withRouter(RequestLimits(longPollsPerUser: 2)) { r in
            let token = try r.token("gil")
            async let first = r.down(token, "?after=0&wait=30")
            async let second = r.down(token, "?after=0&wait=30")
            try await waitFor("two long polls") { r.store.longPolls.openPolls == 2 }
            let third = try await r.send(.get, "/v1/down?after=0&wait=30", token: token)
            #expect(third.status == .tooManyRequests)
            #expect(try third.error().message == "gil already holds 2 long polls open; close one first")
            #expect(try await r.up(token, SyncWire.UpRequest(ledger: "gil-phone", after: 0, through: 1, events: [try read(1, "m1")])).applied == 1)
            let (a, b) = try await (first, second)
            #expect(a.changes.map(\.seq) == [1] && b.changes.map(\.seq) == [1])
            #expect(r.store.longPolls.openPolls == 0)
        }
    }

    /// A publish lists messages with the server's read flags; one a device removed stays
    /// removed (it goes out in the listing's `removed`).
    @Test func aPublishKeepsWhatDevicesRemovedRemoved() async throws {
        try await withRouter { r in
            let device = try r.token("hal"), backend = try r.token("hal", .publish)
            _ = try await r.up(device, SyncWire.UpRequest(ledger: "hal-phone", after: 0, through: 2,
                                                          events: [try read(1, "m1"), try wire(2, .messageRemoved(MessageRemoval(ids: ["m2"])))]))
            let messages = ["m1", "m2", "m3"].map { InboxMessage(id: $0, title: "Message \($0)", sentAt: Timestamp(micros: 1_795_000_000_000_000)) }
            let answer = try await r.send(.post, "/v1/publish", token: backend, body: try JSONEncoder().encode(SyncWire.PublishRequest(messages: messages)))
            #expect(answer.status == .ok)
            #expect(try JSONDecoder().decode(SyncWire.PublishResponse.self, from: answer.body).seq == 3)
            let entry = try #require(try await r.down(device, "?after=2").changes.first)
            #expect(entry.type == "inbox.synced")
            let listing = try JSONDecoder().decode(InboxSync.self, from: Data(entry.payload.utf8))
            #expect(listing.messages.map(\.id) == ["m1", "m3"])
            #expect(listing.messages.first?.read == true)
            #expect(listing.removed == ["m2"])
            let state = try await r.state(device, "")
            #expect(state.messages == [.init(id: "m1", read: true, removed: false), .init(id: "m2", read: nil, removed: true),
                                       .init(id: "m3", read: nil, removed: false)])
        }
    }

    // MARK: - Custom events

    /// A device's custom events go down the feed in the order the server applies them, among
    /// the entries of its reads, each once: a resend appends nothing, a reused sequence appends
    /// the new event. A role the ledger would refuse is the event's own 400 (with its `seq`).
    @Test func customEventsGoDownTheFeedOnceInOrder() async throws {
        try await withRouter { r in
            let token = try r.token("ida")
            let events = [custom(1, Array(#"{"note":1}"#.utf8), key: "n-1", role: "app"), try read(2, "m1"),
                          custom(3, [0x00, 0xff], role: nil), custom(4, "com.example.other", Array("é".utf8), role: "widget ✓")]
            let request = SyncWire.UpRequest(ledger: "ida-phone", after: 0, through: 4, events: events)
            #expect(try await r.up(token, request).applied == 4)
            #expect(try await r.up(token, request).duplicates == 4)  // resent: nothing more
            var feed = try await r.down(token, "")
            #expect(feed.head == 4)
            #expect(feed.changes == [
                SyncWire.Change(seq: 1, type: "com.example.note", payload: #"{"note":1}"#,
                                origin: SyncWire.ChangeOrigin(ledger: "ida-phone", seq: 1, time: 1, role: "app", key: "n-1")),
                SyncWire.Change(seq: 2, type: "message.read", payload: try #require(events[1].payload)),
                SyncWire.Change(seq: 3, type: "com.example.note", payload: "", payloadBase64: "AP8=",
                                origin: SyncWire.ChangeOrigin(ledger: "ida-phone", seq: 3, time: 3, role: "device")),
                SyncWire.Change(seq: 4, type: "com.example.other", payload: "é",
                                origin: SyncWire.ChangeOrigin(ledger: "ida-phone", seq: 4, time: 4, role: "widget ✓")),
            ])
            // The JSON: a custom entry carries `origin` (and `payloadBase64` for bytes), a built-in one neither.
            let json = try #require(try JSONSerialization.jsonObject(with: try await r.send(.get, "/v1/down", token: token).body) as? [String: Any])
            let changes = try #require(json["changes"] as? [[String: Any]])
            try #require(changes.count == 4)
            #expect(changes[1]["origin"] == nil && changes[1]["payloadBase64"] == nil)
            #expect((changes[2]["origin"] as? [String: Any])?["ledger"] as? String == "ida-phone" && changes[2]["payload"] as? String == "")
            #expect((changes[2]["origin"] as? [String: Any])?["key"] == nil)
            // A restored ledger reusing sequence 3 with another event: a new entry.
            let reused = try await r.up(token, SyncWire.UpRequest(ledger: "ida-phone", after: 2, through: 3, events: [custom(3, Array("new".utf8))]))
            #expect(reused.applied == 1 && reused.reused == 1)
            feed = try await r.down(token, "?after=4")
            #expect(feed.changes.map(\.seq) == [5] && feed.changes.first?.payload == "new" && feed.changes.first?.origin?.seq == 3)
            // Roles the ledger refuses: the event's own 400, its sequence in the body; nothing written.
            let before = try await r.state(token, "")
            for (role, fragment) in [("", "1–64 bytes"), (String(repeating: "r", count: 65), "1–64 bytes"), ("a\u{0}b", "U+0000"),
                                     ("line\u{2028}", "U+2028"), ("tab\t", "U+0009")] {
                let answer = try await r.send(.post, "/v1/up", token: token, body: try JSONEncoder().encode(
                    SyncWire.UpRequest(ledger: "ida-phone", after: 4, through: 6, events: [try read(5, "m2"), custom(6, [], role: role)])))
                #expect(answer.status == .badRequest, "\(role.debugDescription)")
                let error = try answer.error()
                #expect(error.seq == 6 && error.message.contains("events[1].role") && error.message.contains(fragment), "\(error.message)")
            }
            #expect(try await r.state(token, "") == before)
            #expect(try await r.down(token, "").head == 5)
        }
    }

    /// `--custom-types`: a custom type outside the list is refused for its content — `400` with
    /// its `seq`, nothing of the batch written — and the batch sent again without it, declaring
    /// it refused, goes through; built-in types are not concerned. A publish of such a type is a
    /// 400 naming the field.
    @Test func aCustomTypeTheServerDoesNotAcceptIsRefusedWithItsSequence() async throws {
        try await withRouter(RequestLimits(customTypes: .only(["com.example.note"]))) { r in
            let token = try r.token("jo"), backend = try r.token("jo", .publish)
            let events = [custom(1, Array("a".utf8)), try read(2, "m1"), custom(3, "com.example.secret", Array("s".utf8))]
            let refused = try await r.send(.post, "/v1/up", token: token,
                                           body: try JSONEncoder().encode(SyncWire.UpRequest(ledger: "jo-1", after: 0, through: 3, events: events)))
            #expect(refused.status == .badRequest)
            let error = try refused.error()
            #expect(error.seq == 3)
            #expect(error.message == "events[2].type: 'com.example.secret' is not a custom type this server accepts (ledger-server --custom-types com.example.note)")
            try await r.expectNothingStored(for: "jo")
            let answer = try await r.up(token, SyncWire.UpRequest(ledger: "jo-1", after: 0, through: 3, events: Array(events.prefix(2)), refused: [3]))
            #expect(answer.applied == 2 && answer.refused == 1)
            #expect(try await r.down(token, "").changes.map(\.type) == ["com.example.note", "message.read"])
            let publish = try await r.send(.post, "/v1/publish", token: backend, body: try JSONEncoder().encode(
                SyncWire.PublishRequest(messages: [], events: [published("com.example.note", []), published("com.example.secret", [])])))
            #expect(publish.status == .badRequest)
            #expect(try publish.error().message.hasPrefix("events[1].type: 'com.example.secret' is not a custom type this server accepts"))
            #expect(try publish.error().seq == nil)
            #expect(try await r.down(token, "").head == 2)
        }
        // No custom type at all.
        try await withRouter(RequestLimits(customTypes: .only([]))) { r in
            let answer = try await r.send(.post, "/v1/up", token: try r.token("jo"),
                                          body: try JSONEncoder().encode(SyncWire.UpRequest(ledger: "jo-1", after: 0, through: 1, events: [custom(1, [])])))
            #expect(answer.status == .badRequest)
            #expect(try answer.error().message.contains("--custom-types none"))
        }
        #expect(throws: ConfigurationError.self) { try CustomTypes(parsing: "com.example.note, message.read") }
        #expect(throws: ConfigurationError.self) { try CustomTypes(parsing: "inbox.mine") }
        #expect(throws: ConfigurationError.self) { try CustomTypes(parsing: "*,com.example.note") }
        #expect(try CustomTypes(parsing: " * ") == .all)
        #expect(try CustomTypes(parsing: "com.a, com.b,") == .only(["com.a", "com.b"]))
        #expect(try CustomTypes(parsing: "") == .only([]))
    }

    /// `--custom-entries-per-user`: a batch or a publish whose custom events would take the user
    /// beyond the bound is `429 too_many` and writes nothing (the ledger is not acknowledged); a
    /// duplicate or a built-in event is not counted; other users are not concerned.
    @Test func customFeedEntriesAreBoundedPerUser() async throws {
        try await withRouter(RequestLimits(customEntriesPerUser: 3)) { r in
            let token = try r.token("kim"), backend = try r.token("kim", .publish)
            let first = SyncWire.UpRequest(ledger: "kim-1", after: 0, through: 2, events: [custom(1, []), custom(2, [])])
            #expect(try await r.up(token, first).applied == 2)
            #expect(try await r.up(token, first).duplicates == 2)  // a resend counts nothing
            let before = try await r.state(token, "")
            let over = try await r.send(.post, "/v1/up", token: token, body: try JSONEncoder().encode(
                SyncWire.UpRequest(ledger: "kim-1", after: 2, through: 4, events: [try read(3, "m1"), custom(4, [])])))
            #expect(over.status == .ok)  // one more: at the bound
            let beyond = try await r.send(.post, "/v1/up", token: token, body: try JSONEncoder().encode(
                SyncWire.UpRequest(ledger: "kim-1", after: 4, through: 6, events: [try read(5, "m2"), custom(6, [])])))
            #expect(beyond.status == .tooManyRequests)
            #expect(try beyond.error() == SyncWire.ErrorBody(
                error: "too_many", message: "user kim already holds 3 of at most 3 custom feed entries; the 1 this request adds are refused (ledger-server --custom-entries-per-user)"))
            var after = try await r.state(token, "")
            #expect(after.ledgers == [.init(ledger: "kim-1", acked: 4)] && after.head == before.head + 2)
            let published = try await r.send(.post, "/v1/publish", token: backend, body: try JSONEncoder().encode(
                SyncWire.PublishRequest(messages: [InboxMessage(id: "m9", title: "Nine", sentAt: Timestamp(micros: 1))], events: [published(Array("t".utf8))])))
            #expect(published.status == .tooManyRequests)
            after = try await r.state(token, "")
            #expect(after.head == before.head + 2 && after.messages.map(\.id) == ["m1"])  // not the listing either
            // Built-in events and listings go on.
            #expect(try await r.up(token, SyncWire.UpRequest(ledger: "kim-1", after: 4, through: 5, events: [try read(5, "m2")])).applied == 1)
            #expect(try await r.send(.post, "/v1/publish", token: backend, body: try JSONEncoder().encode(
                SyncWire.PublishRequest(messages: [InboxMessage(id: "m9", title: "Nine", sentAt: Timestamp(micros: 1))]))).status == .ok)
            // Another user has a bound of their own.
            #expect(try await r.up(try r.token("lea"), SyncWire.UpRequest(ledger: "lea-1", after: 0, through: 3,
                                                                              events: [custom(1, []), custom(2, []), custom(3, [])])).applied == 3)
        }
    }

    /// `POST /v1/publish` with `events[]`: custom events after the listing (or alone), each with
    /// the origin `{role: server, seq: its position, time: the server's clock, key}`; the answer's
    /// `seq` is the last position; every refusal names its field; a device token is 403.
    @Test func publishedCustomEventsFollowTheListing() async throws {
        try await withRouter { r in
            let device = try r.token("max"), backend = try r.token("max", .publish)
            let message = InboxMessage(id: "m1", title: "One", sentAt: Timestamp(micros: 1_795_000_000_000_000))
            func publish(_ request: SyncWire.PublishRequest, token: String? = nil) async throws -> RouterFixture.Answer {
                try await r.send(.post, "/v1/publish", token: token ?? backend, body: try JSONEncoder().encode(request))
            }
            let start = API<MemoryStore>.nowMicros()
            let both = try await publish(SyncWire.PublishRequest(messages: [message], events: [
                published(Array(#"{"task":1}"#.utf8), key: "task-1"), published([0xff, 0xfe, 0x00], base64: true)]))
            #expect(both.status == .ok)
            #expect(try JSONDecoder().decode(SyncWire.PublishResponse.self, from: both.body).seq == 3)
            let alone = try await publish(SyncWire.PublishRequest(messages: [], events: [published(Array("x".utf8))]))
            #expect(try JSONDecoder().decode(SyncWire.PublishResponse.self, from: alone.body).seq == 4)
            let feed = try await r.down(device, "")
            try #require(feed.changes.map(\.type) == ["inbox.synced", "com.example.task", "com.example.task", "com.example.task"])
            #expect(feed.changes[0].origin == nil)
            #expect(feed.changes.dropFirst().map { $0.origin.map { [$0.ledger ?? "-", String($0.seq), $0.role, $0.key ?? "-"] } } ==
                    [["-", "2", "server", "task-1"], ["-", "3", "server", "-"], ["-", "4", "server", "-"]])
            #expect(feed.changes[2].payloadBytes == [0xff, 0xfe, 0x00] && feed.changes[2].payload.isEmpty)
            #expect(feed.changes[1].payload == #"{"task":1}"# && feed.changes[1].payloadBase64 == nil)
            let times = feed.changes.dropFirst().compactMap(\.origin?.time)
            #expect(times.count == 3 && times.allSatisfy { $0 >= start && $0 <= API<MemoryStore>.nowMicros() })

            // Refusals, each naming its field; nothing written.
            var both64 = published(Array("p".utf8))
            both64.payloadBase64 = "cA=="
            var badBase64 = published([])
            badBase64.payload = nil
            badBase64.payloadBase64 = "%%%"
            let cases: [(SyncWire.PublishEvent, String)] = [
                (published("message.read", Array(#"{"ids":["m1"],"read":true}"#.utf8)), "events[0].type: 'message.read' is a built-in type"),
                (published("inbox.mine", []), "events[0].type: 'inbox.mine' is in a namespace reserved"),
                (published("has space", []), "events[0].type: 1–128 bytes of printable ASCII"),
                (published(Array("p".utf8), key: "k\u{0}"), "events[0].key"),
                (published(Array("p".utf8), key: "e\u{301}"), "events[0].key"),
                (published(Array("p".utf8), key: String(repeating: "k", count: 257)), "events[0].key: 1–256 bytes"),
                (both64, "events[0]: exactly one of payload or payloadBase64"),
                (badBase64, "events[0]: exactly one of payload or payloadBase64 (valid base64)"),
                (published(Array(repeating: 0x61, count: 65_537)), "events[0]: payload over 65536 bytes"),
            ]
            for (event, fragment) in cases {
                let answer = try await publish(SyncWire.PublishRequest(messages: [message], events: [event]))
                #expect(answer.status == .badRequest, "\(fragment)")
                let message = try answer.error().message
                #expect(message.contains(fragment), "\(message)")
            }
            let many = try await publish(SyncWire.PublishRequest(messages: [], events: Array(repeating: published([]), count: 1001)))
            #expect(many.status == .badRequest)
            #expect(try many.error().message == "events: at most 1000 per request, got 1001")
            let nothing = try await publish(SyncWire.PublishRequest(messages: [], events: []))
            #expect(nothing.status == .badRequest)
            #expect(try nothing.error().message == "nothing to publish")
            let forbidden = try await publish(SyncWire.PublishRequest(messages: [], events: [published([])]), token: device)
            #expect(forbidden.status == .forbidden)
            #expect(try await r.down(device, "").head == 4)
        }
    }
}

// MARK: - The fixture

/// The router over a fresh ``MemoryStore`` and a client that sends it requests.
struct RouterFixture: Sendable {
    /// The store behind the router.
    let store: MemoryStore
    /// Hummingbird's router-testing client.
    let client: any TestClientProtocol

    /// One answer: status, headers, body.
    struct Answer {
        /// The status.
        var status: HTTPResponse.Status
        /// The headers.
        var headers: HTTPFields
        /// The body.
        var body: Data

        /// The body as the protocol's error body.
        func error() throws -> SyncWire.ErrorBody { try JSONDecoder().decode(SyncWire.ErrorBody.self, from: body) }
    }

    /// A development token of `user`, valid for ten minutes.
    func token(_ user: String, _ scope: Claims.Scope = .device) throws -> String {
        try TokenSigner(secret: RouterTests.secret).sign(Claims(sub: user, scope: scope, exp: Int64(Date().timeIntervalSince1970) + 600))
    }

    /// Sends one request, with `token` as its bearer token when there is one.
    func send(_ method: HTTPRequest.Method, _ path: String, token: String?, body: Data? = nil) async throws -> Answer {
        try await send(method, path, headers: token.map { [.authorization: "Bearer \($0)"] } ?? [:], body: body)
    }

    /// Sends one request with `headers`.
    func send(_ method: HTTPRequest.Method, _ path: String, headers: HTTPFields, body: Data? = nil) async throws -> Answer {
        let response = try await client.executeRequest(uri: path, method: method, headers: headers, body: body.map { ByteBuffer(data: $0) })
        return Answer(status: response.status, headers: response.headers, body: Data(buffer: response.body))
    }

    /// `POST /v1/up`, which must answer 200.
    func up(_ token: String, _ request: SyncWire.UpRequest) async throws -> SyncWire.UpResponse {
        try await ok(.post, "/v1/up", token, try JSONEncoder().encode(request))
    }

    /// `GET /v1/down` + `query`, which must answer 200.
    func down(_ token: String, _ query: String) async throws -> SyncWire.DownResponse { try await ok(.get, "/v1/down" + query, token) }

    /// `GET /v1/state` + `query`, which must answer 200.
    func state(_ token: String, _ query: String) async throws -> SyncWire.ServerState { try await ok(.get, "/v1/state" + query, token) }

    /// A request that must answer 200, decoded.
    func ok<T: Decodable>(_ method: HTTPRequest.Method, _ path: String, _ token: String, _ body: Data? = nil) async throws -> T {
        let answer = try await send(method, path, token: token, body: body)
        guard answer.status == .ok else { throw HarnessError(description: "\(method) \(path): \(answer.status) \(String(decoding: answer.body, as: UTF8.self))") }
        return try JSONDecoder().decode(T.self, from: answer.body)
    }

    /// `user` has no ledger, no feed and no message in the store.
    func expectNothingStored(for user: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let state = try await store.state(user: user, after: nil, limit: 10)
        #expect(state.head == 0 && state.ledgers.isEmpty && state.messages.isEmpty && state.deviceEvents == 0, sourceLocation: sourceLocation)
    }
}

/// Runs `body` against the routes of `buildRouter` over a fresh ``MemoryStore``.
func withRouter(_ limits: RequestLimits = RequestLimits(), _ body: @Sendable (RouterFixture) async throws -> Void) async throws {
    var logger = Logger(label: "router-tests")
    logger.logLevel = .warning  // not the refused tokens' info lines; a 500's cause is an error
    let store = MemoryStore()
    let verifier = try await IdentityVerifier(configuration: IdentityConfiguration(developmentSecret: RouterTests.secret), logger: logger)
    let router = buildRouter(store, authenticator: TokenAuthenticator(verifier: verifier), limits: limits, logger: logger)
    try await Application(router: router, logger: logger).test(.router) { client in
        try await body(RouterFixture(store: store, client: client))
    }
}

/// `event` as a device sends it: sequence `seq`, committed at `seq` µs, its payload as text.
func wire(_ seq: UInt64, _ event: DomainEvent) throws -> SyncWire.UpEvent {
    SyncWire.UpEvent(Event(sequence: seq, timestampMicros: Int64(seq), origin: Origin(role: "t"), type: event.type, key: nil,
                           payload: try event.newEvent().payload))
}

/// `message.read` of `id` at `seq`.
func read(_ seq: UInt64, _ id: String, read: Bool = true) throws -> SyncWire.UpEvent {
    try wire(seq, .messageRead(ReadChange(ids: [id], read: read)))
}

/// A custom event as a device sends it: sequence `seq`, committed at `seq` µs, appended by a
/// process of `role` (nil: an older client that sends none); its payload as text when it is
/// UTF-8, else in base64 (as `SyncWire.UpEvent` sends it).
func custom(_ seq: UInt64, _ type: String, _ payload: [UInt8], key: String? = nil, role: String? = "t") -> SyncWire.UpEvent {
    var event = SyncWire.UpEvent(Event(sequence: seq, timestampMicros: Int64(seq), origin: Origin(role: role ?? "t"), type: type, key: key, payload: payload))
    event.role = role
    return event
}

/// A `com.example.note` as a device sends it (``custom(_:_:_:key:role:)``).
func custom(_ seq: UInt64, _ payload: [UInt8], key: String? = nil, role: String? = "t") -> SyncWire.UpEvent {
    custom(seq, "com.example.note", payload, key: key, role: role)
}

/// A custom event of `type` the backend publishes, its payload as text, or in base64 when `base64`.
func published(_ type: String, _ payload: [UInt8], key: String? = nil, base64: Bool = false) -> SyncWire.PublishEvent {
    var event = SyncWire.PublishEvent(type: type, payload: String(decoding: payload, as: UTF8.self), key: key)
    if base64 {
        event.payload = nil
        event.payloadBase64 = Data(payload).base64EncodedString()
    }
    return event
}

/// A `com.example.task` the backend publishes (``published(_:_:key:base64:)``).
func published(_ payload: [UInt8], key: String? = nil, base64: Bool = false) -> SyncWire.PublishEvent {
    published("com.example.task", payload, key: key, base64: base64)
}
