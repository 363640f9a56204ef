import Foundation
import InboxLedger
import InboxLedgerSync
import Testing

/// A device's local activity: reads, unreads, removals, widget mark-reads, custom events the
/// app shares, and custom events it does not share.
func localActivity(_ ledger: Ledger, count: Int, ids: [String], seed: UInt64) throws {
    var rng = seed
    func next(_ n: Int) -> Int {
        rng = rng &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return Int((rng >> 33) % UInt64(n))
    }
    var events: [NewEvent] = []
    for i in 0..<count {
        let id = ids[next(ids.count)]
        switch next(10) {
        case 0...3: events.append(try DomainEvent.messageRead(ReadChange(ids: [id], read: next(3) != 0)).newEvent())
        // Removals among the first quarter only, so that rows remain to compare.
        case 4: events.append(try DomainEvent.messageRemoved(MessageRemoval(ids: [ids[next(max(1, ids.count / 4))]])).newEvent())
        case 5: events.append(try DomainEvent.widgetAction(WidgetAction(actionID: "w-\(seed)-\(i)", kind: .markRead, target: id)).newEvent())
        case 6, 7: events.append(NewEvent(type: "com.example.note", payload: Array(#"{"n":\#(i)}"#.utf8)))
        default: events.append(NewEvent(type: "com.example.local", payload: Array(#"{"n":\#(i)}"#.utf8)))  // not shared
        }
        if events.count == 50 {
            try ledger.append(contentsOf: events)
            events = []
        }
    }
    if !events.isEmpty { try ledger.append(contentsOf: events) }
}

/// The feed entries a ledger's shared events make (docs/sync.md, "Up"): reads, removals,
/// mark-reads and custom events.
func feedEntries(of events: [Event]) -> Int {
    events.filter { e in
        switch try? DomainEvent.decode(type: e.type, payload: e.payload) {
        case .messageRead, .messageRemoved, .custom: true
        case .widgetAction(let a): a.kind == .markRead
        default: false
        }
    }.count
}

@Suite(.serialized, .enabled(if: Harness.postgresAvailable, "needs Debian's postgresql (scripts/setup.sh installs it) and root to run it as nobody"))
struct SyncServerTests {
    @Test func securityUsersTokensAndBadInput() async throws {
        try await withHarness { h in
            let (_, url) = try await h.startServer(extra: ["--max-body", "65536"])
            let alice = try await h.token("alice"), bob = try await h.token("bob")
            let alicePublish = try await h.token("alice", scope: "publish")
            let read = SyncWire.UpEvent(Event(sequence: 1, timestampMicros: 1, origin: Origin(role: "t"), type: "message.read", key: nil,
                                              payload: Array(#"{"ids":["m1"],"read":true}"#.utf8)))
            let body = try JSONEncoder().encode(SyncWire.UpRequest(ledger: "ledger-A", after: 0, through: 1, events: [read]))
            #expect(try await http("POST", url, "/v1/up", token: alice, body: body).status == 200)
            let before = try await serverState(url, token: alice)
            #expect(before.deviceEvents == 1 && before.head == 1 && before.ledgers.first?.acked == 1)

            // Refused tokens: 401 and a JSON reason, on every endpoint.
            let otherSecret = try await h.token("alice", secret: "another-secret-0123456789")
            let expired = try await h.token("alice", ttl: -10)
            // A signature character changed (not the last one: its low bits are base64 padding,
            // which decoders ignore, so changing only those leaves the same signature).
            var tamperedChars = Array(alice)
            let flip = tamperedChars.count - 10
            tamperedChars[flip] = tamperedChars[flip] == "A" ? "B" : "A"
            let tampered = String(tamperedChars)
            let claimsOfBob = bob.split(separator: ".")[1]
            let spliced = alice.split(separator: ".").enumerated().map { $0.offset == 1 ? claimsOfBob : $0.element }.joined(separator: ".")
            for token in [nil, "", "garbage", "v1.x.y", otherSecret, expired, tampered, spliced] {
                for (method, path) in [("POST", "/v1/up"), ("GET", "/v1/down"), ("GET", "/v1/state")] {
                    let (status, data) = try await http(method, url, path, token: token, body: method == "POST" ? body : nil)
                    #expect(status == 401, "\(path) with \(token ?? "no token"): \(status)")
                    #expect((try? JSONDecoder().decode(SyncWire.ErrorBody.self, from: data))?.error == "unauthorized")
                }
            }
            // Bob can neither write to Alice's ledger nor read her feed or state.
            let bobWrite = try await http("POST", url, "/v1/up", token: bob, body: body)
            #expect(bobWrite.status == 403)
            let bobFeed = try JSONDecoder().decode(SyncWire.DownResponse.self, from: try await http("GET", url, "/v1/down", token: bob).body)
            #expect(bobFeed.user == "bob" && bobFeed.changes.isEmpty && bobFeed.head == 0)
            let bobState = try await serverState(url, token: bob)
            #expect(bobState.messages.isEmpty && bobState.ledgers.isEmpty && bobState.deviceEvents == 0)
            // Scopes.
            #expect(try await http("POST", url, "/v1/up", token: alicePublish, body: body).status == 403)
            #expect(try await http("POST", url, "/v1/publish", token: alice, body: Data(#"{"messages":[]}"#.utf8)).status == 403)

            // Bad bodies: 4xx with a message, nothing written.
            func up(_ json: String) async throws -> (Int, SyncWire.ErrorBody?) {
                let (status, data) = try await http("POST", url, "/v1/up", token: alice, body: Data(json.utf8))
                return (status, try? JSONDecoder().decode(SyncWire.ErrorBody.self, from: data))
            }
            let huge = #"{"ledger":"ledger-A","after":1,"through":2,"events":[{"seq":2,"type":"com.example.note","time":1,"payload":""# + String(repeating: "x", count: 70_000) + #""}]}"#
            let cases: [(String, Int)] = [
                (huge, 413),
                (#"{"ledger":"ledger-A","after":1,"#, 400),
                (#"[1,2,3]"#, 400),
                (#"{"ledger":"ledger-A","after":1,"through":2}"#, 400),
                (#"{"ledger":"ledger-A","after":3,"through":2,"events":[]}"#, 400),
                (#"{"ledger":"ledger-A","after":1,"through":3,"events":[{"seq":3,"type":"message.read","time":1,"payload":"{}"},{"seq":2,"type":"message.read","time":1,"payload":"{}"}]}"#, 400),
                (#"{"ledger":"ledger-A","after":1,"through":3,"events":[{"seq":2,"type":"com.example.note","time":1,"payload":"{}"},{"seq":3,"type":"message.read","time":1,"payload":"{\"ids\":[]}"}]}"#, 400),
                (#"{"ledger":"ledger-A","after":1,"through":2,"events":[{"seq":2,"type":"has space","time":1,"payload":"{}"}]}"#, 400),
                (#"{"ledger":"ledger-A","after":1,"through":2,"events":[{"seq":2,"type":"com.example.note","time":1,"payloadBase64":"%%%"}]}"#, 400),
                (#"{"ledger":"","after":0,"through":0,"events":[]}"#, 400),
            ]
            for (json, expected) in cases {
                let (status, error) = try await up(json)
                #expect(status == expected, "\(json.prefix(120)): \(status) \(error?.message ?? "")")
                #expect(error?.message.isEmpty == false)
            }
            let (downStatus, _) = try await http("GET", url, "/v1/down?after=-1", token: alice)
            #expect(downStatus == 400)
            let (publishStatus, _) = try await http("POST", url, "/v1/publish", token: alicePublish,
                                                    body: Data(#"{"messages":[{"id":"m1","title":"x","sentAt":"yesterday"}]}"#.utf8))
            #expect(publishStatus == 400)
            #expect(try await serverState(url, token: alice) == before)
        }
    }

    @Test func duplicateAndReorderedDeliveries() async throws {
        try await withHarness { h in
            let (_, url) = try await h.startServer()
            let token = try await h.token("carol")
            func event(_ seq: UInt64, _ id: String) -> SyncWire.UpEvent {
                SyncWire.UpEvent(Event(sequence: seq, timestampMicros: 1, origin: Origin(role: "t"), type: "message.read", key: nil,
                                       payload: Array(#"{"ids":["\#(id)"],"read":true}"#.utf8)))
            }
            let first = try JSONEncoder().encode(SyncWire.UpRequest(ledger: "L", after: 0, through: 3, events: [event(1, "a"), event(3, "b")]))
            let second = try JSONEncoder().encode(SyncWire.UpRequest(ledger: "L", after: 3, through: 5, events: [event(4, "c"), event(5, "d")]))
            func send(_ body: Data) async throws -> (Int, Data) { try await http("POST", url, "/v1/up", token: token, body: body) }

            // The second batch first: a gap, nothing written.
            let (gapStatus, gapBody) = try await send(second)
            #expect(gapStatus == 409)
            #expect(try JSONDecoder().decode(SyncWire.ErrorBody.self, from: gapBody).acked == 0)
            #expect(try await serverState(url, token: token).deviceEvents == 0)
            // In order, each resent: applied once.
            for (body, applied, duplicates, acked) in [(first, 2, 0, 3), (first, 0, 2, 3), (second, 2, 0, 5), (first, 0, 2, 5), (second, 0, 2, 5)] {
                let (status, data) = try await send(body)
                #expect(status == 200)
                let answer = try JSONDecoder().decode(SyncWire.UpResponse.self, from: data)
                #expect(answer.applied == applied && answer.duplicates == duplicates && answer.acked == UInt64(acked))
            }
            // Concurrent duplicates of one batch: still once.
            let third = try JSONEncoder().encode(SyncWire.UpRequest(ledger: "L", after: 5, through: 6, events: [event(6, "e")]))
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<8 { group.addTask { try await send(third).0 } }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses.allSatisfy { $0 == 200 })
            let state = try await serverState(url, token: token)
            #expect(state.deviceEvents == 5 && state.head == 5 && state.ledgers == [.init(ledger: "L", acked: 6)])
        }
    }

    @Test func aDeviceKilledAfterTheAnswerBeforeItsCommitResendsOnce() async throws {
        try await withHarness { h in
            let (_, url) = try await h.startServer()
            let token = try await h.token("dave")
            let device = try deviceLedger(h, "dave-1")
            try localActivity(device.ledger, count: 450, ids: (0..<20).map { "m\($0)" }, seed: 1)
            let agent = productsDirectory + "/sync-device"
            // Killed right after the server's second answer: its cursor holds only the first batch.
            let killed = try Child(agent, [device.path, url.absoluteString, token, device.state, "once"],
                                   environment: ["SYNC_DEVICE_EXIT_AFTER_ANSWER": "2", "SYNC_DEVICE_BATCH": "100"])
            #expect(try await killed.exitStatus() == 9)
            #expect(try await device.ledger.consumers.consumer(named: "sync-relay").cursor() == 100)
            #expect(try await serverState(url, token: token).ledgers.first?.acked == 200)
            // The next run resends the second batch (duplicates) and the rest.
            let again = try Child(agent, [device.path, url.absoluteString, token, device.state, "once"], environment: ["SYNC_DEVICE_BATCH": "100"])
            #expect(try await again.exitStatus() == 0, "\(again.text)")
            #expect(again.text.contains("duplicates=") && !again.text.contains("duplicates=0"))
            let shared = try sharedEvents(device.ledger)
            let state = try await serverState(url, token: token)
            #expect(state.deviceEvents == shared.count)
            #expect(state.head == UInt64(feedEntries(of: shared)))
            // syncOnce sends once more after the feed brought entries: acknowledged through the head
            // (the 450 local events and the feed's own keyed events after them).
            let head = try await device.ledger.read({ try $0.head() })
            #expect(head > 450)
            #expect(state.ledgers.first?.acked == head)
        }
    }

    @Test func serverKilledWhileSendingTwoServersOneDatabaseAndConvergence() async throws {
        try await withHarness { h in
            let (first, url1) = try await h.startServer()
            let (_, url2) = try await h.startServer()
            let token = try await h.token("erin")
            let ids = (0..<40).map { "m\($0)" }
            try await publish(url1, token: try await h.token("erin", scope: "publish"), ids: ids)
            let a = try deviceLedger(h, "erin-a"), b = try deviceLedger(h, "erin-b")
            try localActivity(a.ledger, count: 3000, ids: ids, seed: 2)
            try localActivity(b.ledger, count: 400, ids: ids, seed: 3)
            let agent = productsDirectory + "/sync-device"
            // A through server 1, losing every third answer after the commit; B through server 2,
            // suspended and resumed 40 times (Ledger.suspend(): every lock and reader slot released).
            let deviceA = try Child(agent, [a.path, url1.absoluteString, token, a.state, "watch"],
                                    environment: ["SYNC_DEVICE_LOSE_ANSWER_EVERY": "3", "SYNC_DEVICE_BATCH": "100"])
            let deviceB = try Child(agent, [b.path, url2.absoluteString, token, b.state, "watch"],
                                    environment: ["SYNC_DEVICE_SUSPEND_CYCLES": "40"])
            defer { deviceA.kill(); deviceB.kill() }
            // Server 1 is killed (SIGKILL) once A's first batch is acknowledged, while A keeps
            // sending; a new process takes its port and A's retries carry on.
            // (The relay's cursor in the ledger, not A's printed status: statusUpdates() coalesces
            // counters to 4 a second, so a status naming the first batch's cursor may never print.)
            try await waitFor("A's first batch to be acknowledged") {
                try (a.ledger.consumers.list().first { $0.name == "sync-relay" }?.cursor ?? 0) >= 100
            }
            first.kill()
            let port = url1.port ?? 0
            try await h.startServer(port: port)

            let sharedA = try sharedEvents(a.ledger), sharedB = try sharedEvents(b.ledger)
            let expectedHead = UInt64(1 + feedEntries(of: sharedA) + feedEntries(of: sharedB))
            try await waitFor("both devices to apply the whole feed") {
                downCursor(a.state) == expectedHead && downCursor(b.state) == expectedHead
            }
            try await waitFor("both relays to be acknowledged") {
                try a.ledger.consumers.list().first { $0.name == "sync-relay" }?.lag == 0
                    && b.ledger.consumers.list().first { $0.name == "sync-relay" }?.lag == 0
            }
            try await deviceB.waitForLine(containing: "suspend cycles done 40")
            let state = try await serverState(url2, token: token)
            #expect(state.deviceEvents == sharedA.count + sharedB.count)
            #expect(state.head == expectedHead)
            #expect(Set(state.ledgers.map(\.ledger)) == [a.ledger.metadata.ledgerID, b.ledger.metadata.ledgerID])
            // Same rows, read state and badge on both devices, and what the server holds.
            let listA = try await a.ledger.read({ try $0.widgetList(limit: 100) }), listB = try await b.ledger.read({ try $0.widgetList(limit: 100) })
            #expect(listA.items == listB.items)
            #expect(listA.unreadCount == listB.unreadCount)
            #expect(!listA.items.isEmpty)
            let serverRead = Dictionary(uniqueKeysWithValues: state.messages.map { ($0.id, $0) })
            for item in listA.items {
                #expect(serverRead[item.id]?.removed == false)
                #expect((serverRead[item.id]?.read ?? false) == item.read, "\(item.id)")
            }
            #expect(listA.items.count == state.messages.filter { !$0.removed }.count)
            #expect(listA.badge == listB.badge && listA.badge == listA.unreadCount)
        }
    }
}
