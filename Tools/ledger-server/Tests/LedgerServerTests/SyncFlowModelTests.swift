import Foundation
import InboxLedger
import InboxLedgerSync
import struct TestSupport.FlowModel
import struct TestSupport.SeededGenerator
import struct TestSupport.SyncFlowModel
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The flow model of the root's `FlowModelTests`, extended with a server and a second device:
/// a real PostgreSQL, a real `ledger-server` process and two device ledgers of one user, each
/// synced by `sync-device` processes (a `SyncClient`), driven by seeded random steps against
/// `SyncFlowModel` (written from docs/sync.md and docs/semantics.md). After every step each
/// device equals its model; at every quiescent point (both devices synced up and down) the
/// server holds each device's shared events exactly once, its feed and message state equal the
/// model's, and the two devices show the same inbox.
///
/// SYNC_FLOW_SEEDS (3), SYNC_FLOW_STEPS (80) and SYNC_FLOW_SEED (the first seed) size it;
/// `make flows-sync` runs a long one. A failure prints the seed and the last steps.
@Suite(.serialized, .enabled(if: Harness.postgresAvailable, "needs Debian's postgresql (scripts/setup.sh installs it) and root to run it as nobody"))
struct SyncFlowModelTests {
    static let environment = ProcessInfo.processInfo.environment
    static let seeds = Int(environment["SYNC_FLOW_SEEDS"] ?? "") ?? 3
    static let steps = Int(environment["SYNC_FLOW_STEPS"] ?? "") ?? 80
    static let firstSeed = UInt64(environment["SYNC_FLOW_SEED"] ?? "") ?? 2026_1125

    @Test func twoDevicesAndTheServerShowWhatTheModelSays() async throws {
        var totals: [String: Int] = [:]
        var kills = 0, restarts = 0, checks = 0, quiescentChecks = 0
        let started = ContinuousClock.now
        for n in 0..<UInt64(Self.seeds) {
            let seed = Self.firstSeed + n
            print("sync flow: seed \(seed) (SYNC_FLOW_SEED=\(seed) SYNC_FLOW_SEEDS=1 reproduces it)")
            let harness = try await Harness()
            let run: SyncFlowRun
            do {
                run = try await SyncFlowRun(harness: harness, seed: seed)
            } catch {
                await harness.stop()
                throw error
            }
            var failed = false
            do {
                for step in 0..<Self.steps {
                    let what = try await run.step()
                    totals[what, default: 0] += 1
                    checks += 1
                    if let mismatch = try await run.mismatch() {
                        Issue.record("seed \(seed) step \(step) (\(what)): \(mismatch)\nrecent:\n\(run.history.suffix(15).joined(separator: "\n"))")
                        failed = true
                        break
                    }
                    if what == "quiesce" { quiescentChecks += 1 }
                }
                if !failed {
                    try await run.quiesce()
                    quiescentChecks += 1
                    if let mismatch = try await run.mismatch() {
                        Issue.record("seed \(seed) at the end: \(mismatch)\nrecent:\n\(run.history.suffix(15).joined(separator: "\n"))")
                    }
                    for device in run.devices {
                        #expect(try device.ledger.maintenance.verifyProjections() == nil)
                    }
                }
            } catch {
                Issue.record("seed \(seed): \(error)\nrecent:\n\(run.history.suffix(15).joined(separator: "\n"))")
            }
            kills += run.kills
            restarts += run.restarts
            run.stop()
            await harness.stop()
        }
        let seconds = Double((ContinuousClock.now - started).components.seconds)
        print("sync flow model: \(Self.seeds) seeds × \(Self.steps) steps, \(checks) checks, \(quiescentChecks) quiesce points, "
              + "\(kills) device kills, \(restarts) server restarts, \(Int(seconds)) s: "
              + totals.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
    }
}

extension SyncFlowModelTests {
    /// A flow the random steps reach rarely, named: device a removes a message it knows only from
    /// a push, and syncs, before the backend's listing of it reaches the server. The server learns
    /// the removal first; the listing must not bring the message back on the device that never
    /// saw it while the device that removed it keeps it hidden (docs/sync.md, "Convergence").
    @Test func aMessageRemovedBeforeItsListingStaysRemovedOnBothDevices() async throws {
        try await withHarness { h in
            let (_, url) = try await h.startServer()
            let token = try await h.token("gail"), publisher = try await h.token("gail", scope: "publish")
            let a = try deviceLedger(h, "gail-a"), b = try deviceLedger(h, "gail-b")
            func sync(_ device: (ledger: Ledger, path: String, state: String)) async throws {
                let child = try Child(productsDirectory + "/sync-device", [device.path, url.absoluteString, token, device.state, "once"])
                #expect(try await child.exitStatus() == 0, "\(child.text)")
            }
            try await a.ledger.append(.pushReceived(PushReceived(messageID: "m1")), key: "push-m1")
            try await a.ledger.append(.messageRemoved(MessageRemoval(ids: ["m1"])))
            try await sync(a)
            try await publish(url, token: publisher, ids: ["m1", "m2"])
            try await sync(a)
            try await sync(b)
            let listA = try await a.ledger.read({ try $0.widgetList(limit: 10) }), listB = try await b.ledger.read({ try $0.widgetList(limit: 10) })
            #expect(listA.items.map(\.id) == ["m2"])
            #expect(listB.items.map(\.id) == ["m2"])
            #expect(listA.badge == 1 && listB.badge == 1)
            let state = try await serverState(url, token: token)
            #expect(state.messages.first { $0.id == "m1" }?.removed == true)
        }
    }
}

/// One seed's run: the server, two devices (a: host, widget and extension; b: host), the
/// backend's messages and the model.
final class SyncFlowRun {
    struct Device {
        var ledger: Ledger
        var path: String
        var state: String
        var name: String
    }

    static let sharedCustom = "com.example.note"
    let harness: Harness
    var server: Child
    let url: URL
    let token: String
    let publishToken: String
    let devices: [Device]
    var model = SyncFlowModel(devices: 2, sharedCustomTypes: [SyncFlowRun.sharedCustom])
    var rng: SeededGenerator
    /// The backend's messages, as it last published them.
    var backend: [String: InboxMessage] = [:]
    /// Pushes recorded on device a: key and event (redelivered with the same key).
    var pushes: [(key: String, event: DomainEvent)] = []
    /// Messages pushed to device a that the backend has not published yet.
    var early: [InboxMessage] = []
    var counter = 0
    var clock: Int64 = 1_795_000_000_000_000
    var history: [String] = []
    var kills = 0
    var restarts = 0
    let upBatch: Int
    let downPage: Int

    init(harness: Harness, seed: UInt64) async throws {
        self.harness = harness
        rng = SeededGenerator(seed: seed)
        (server, url) = try await harness.startServer()
        token = try await harness.token("flow")
        publishToken = try await harness.token("flow", scope: "publish")
        devices = try ["a", "b"].map { name in
            let d = try deviceLedger(harness, "device-" + name)
            return Device(ledger: d.ledger, path: d.path, state: d.state, name: name)
        }
        // Small batches and pages, so that a kill lands between two of them.
        upBatch = Int.random(in: 1...8, using: &rng)
        downPage = Int.random(in: 1...8, using: &rng)
        history.append("seed \(seed): up batch \(upBatch), down page \(downPage)")
    }

    func stop() { server.kill() }

    private func chance(_ percent: Int) -> Bool { Int.random(in: 0..<100, using: &rng) < percent }
    private func pick<T>(_ items: [T]) -> T? { items.isEmpty ? nil : items[Int.random(in: 0..<items.count, using: &rng)] }
    private func fresh(_ prefix: String) -> String { counter += 1; return "\(prefix)\(counter)" }

    // MARK: - Steps

    func step() async throws -> String {
        let d = chance(60) ? 0 : 1
        let flow = model.devices[d].flow
        let candidates = flow.orderedIDs + flow.announced.keys.sorted()
        let roll = Int.random(in: 0..<100, using: &rng)
        let what: String
        switch roll {
        case 0..<10:
            what = "publish-new"
            var messages: [InboxMessage] = []
            for _ in 0..<Int.random(in: 1...2, using: &rng) {
                clock += Int64.random(in: 1...600_000_000, using: &rng)
                let id = fresh("m")
                messages.append(InboxMessage(id: id, title: "t\(counter)", sentAt: Timestamp(micros: clock)))
            }
            // The push may reach device a before the backend's listing reaches the server: then
            // the message waits in `early` and is published with the next new ones (or at a
            // quiescent point).
            let pushEarly = chance(25)
            if !pushEarly {
                try await publish(early + messages)
                early = []
            }
            // Device a's extension gets the push before a's next sync brings the listing.
            if pushEarly || chance(60), let m = messages.first {
                let push = PushReceived(messageID: m.id, message: chance(50) ? m : nil, badge: chance(30) ? Int.random(in: 0...6, using: &rng) : nil)
                let key = "push-\(m.id)"
                pushes.append((key, .pushReceived(push)))
                try await recordByProcess(role: "notification-service", .pushReceived(push), key: key)
            }
            if pushEarly { early += messages }
        case 10..<14:
            what = "publish-edit"
            if let id = pick(backend.keys.sorted()), var m = backend[id] {
                m.title = "t\(fresh("e"))"
                try await publish([m])
            }
        case 14..<17:
            what = "publish-remove"
            if let id = pick(backend.keys.sorted()) { try await publish([], removed: [id]) }
        case 17..<20:
            what = "push-redelivered"
            if let old = pick(pushes) { try await recordByProcess(role: "notification-service", old.event, key: old.key) }
        case 20..<32:
            what = "read"
            if let id = pick(candidates) {
                try local(d, .messageRead(ReadChange(ids: [id], read: chance(70))), key: chance(50) ? fresh("read-") : nil)
            }
        case 32..<37:
            what = "remove"
            if let id = pick(candidates) { try local(d, .messageRemoved(MessageRemoval(ids: [id]))) }
        case 37..<44:
            what = "widget-tap"
            let id = fresh("w")
            let tap: DomainEvent = if chance(70), let target = pick(flow.orderedIDs) {
                .widgetAction(WidgetAction(actionID: id, kind: .markRead, target: target))
            } else {
                .widgetAction(WidgetAction(actionID: id, kind: .custom, name: "snooze"))
            }
            // Device a's widget is a process of its own; device b's taps come from its app.
            if d == 0 { try await recordByProcess(role: "widget", tap, key: "tap-\(id)") } else { try local(d, tap, key: "tap-\(id)") }
        case 44..<48:
            what = "complete"
            if let id = pick(flow.pending) { try local(d, .actionCompleted(ActionCompletion(actionID: id, outcome: .done))) }
        case 48..<51:
            what = "custom"
            let type = chance(60) ? Self.sharedCustom : "com.example.local"
            try local(d, .custom(type: type, payload: Array(#"{"n":\#(counter)}"#.utf8)))
        case 51..<71:
            what = "sync"
            try await sync(d)
        case 71..<79:
            what = "sync-killed"
            try await killedSync(d)
        case 79..<83:
            what = "server-restart"
            try await restartServer(during: chance(50) ? d : nil)
        case 83..<86:
            what = "down-cursor-rewound"
            try rewindDownCursor(d)
        case 86..<91:
            what = "duplicate-up"
            try await duplicateUp(d)
        default:
            what = "quiesce"
            try await quiesce()
        }
        history.append("\(what) on \(devices[d].name)")
        return what
    }

    /// A local event on device `d` (its app, widget or extension), in the ledger and the model.
    private func local(_ d: Int, _ event: DomainEvent, key: String? = nil) throws {
        let receipt = try devices[d].ledger.append(AppendRequest(event, key: key))
        let expectedNew = model.local(d, event, key: key)
        if receipt.isReplay == expectedNew {
            throw HarnessError(description: "\(event.type) key \(key ?? "-") on \(devices[d].name): replayed \(receipt.isReplay), model \(!expectedNew)")
        }
        history.append("  \(devices[d].name): \(event)")
    }

    /// A keyed event recorded on device a by a process of its own (the widget, the extension),
    /// sometimes SIGKILLed at a random instant and run again with the same key, as a redelivery:
    /// recorded once either way.
    private func recordByProcess(role: String, _ event: DomainEvent, key: String) async throws {
        let new = try event.newEvent(key: key)
        func start() throws -> Child {
            try Child(productsDirectory + "/sync-device",
                      [devices[0].path, "append", role, new.type, key, String(decoding: new.payload, as: UTF8.self)])
        }
        var killed = false
        var finished: Child?  // a first attempt the kill came too late for
        if chance(25) {
            let child = try start()
            try await Task.sleep(for: .microseconds(Int.random(in: 0...30_000, using: &rng)))
            child.kill()
            if try await child.finished() == 0 { finished = child } else { killed = true; kills += 1 }
        }
        let child = try start()
        guard try await child.finished() == 0 else { throw HarnessError(description: "\(role) append: \(child.text)") }
        let expectedNew = model.local(0, event, key: key)
        // The attempt that recorded it says replay=false exactly when the model calls it new; a
        // second attempt after a finished one is a replay; after a kill, either.
        let deciding = finished ?? child
        if !killed, deciding.text.contains("replay=true") == expectedNew || (finished != nil && !child.text.contains("replay=true")) {
            throw HarnessError(description: "\(event.type) key \(key) by the \(role): \(deciding.text) then \(child.text), model new \(expectedNew)")
        }
        history.append("  a's \(role)\(killed ? " (killed once)" : ""): \(event)")
    }

    private func publish(_ messages: [InboxMessage], removed: [String] = []) async throws {
        let body = try JSONEncoder().encode(SyncWire.PublishRequest(messages: messages, removed: removed.isEmpty ? nil : removed))
        let (status, data) = try await http("POST", url, "/v1/publish", token: publishToken, body: body)
        guard status == 200 else { throw HarnessError(description: "publish: \(status) \(String(decoding: data, as: UTF8.self))") }
        for m in messages { backend[m.id] = m }
        for id in removed { backend[id] = nil }
        model.publish(messages, removed: removed)
        history.append("  published \(messages.map(\.id)) removed \(removed)")
    }

    private func deviceProcess(_ d: Int, _ environment: [String: String] = [:]) throws -> Child {
        let device = devices[d]
        return try Child(productsDirectory + "/sync-device", [device.path, url.absoluteString, token, device.state, "once"],
                         environment: ["SYNC_DEVICE_BATCH": "\(upBatch)", "SYNC_DEVICE_DOWN_PAGE": "\(downPage)"].merging(environment) { $1 })
    }

    /// One `syncOnce` in a process of its own, to the end.
    private func sync(_ d: Int) async throws {
        let child = try deviceProcess(d)
        let status = try await child.exitStatus()
        guard status == 0 else { throw HarnessError(description: "sync of \(devices[d].name) exited \(status): \(child.text)") }
        model.sync(d)
    }

    /// A sync killed part way — after the n-th answer before its commit, or by SIGKILL at a
    /// random instant — then the next launch's sync. Together they must act as one sync.
    private func killedSync(_ d: Int) async throws {
        let child: Child
        if chance(50) {
            child = try deviceProcess(d, ["SYNC_DEVICE_EXIT_AFTER_ANSWER": "\(Int.random(in: 1...3, using: &rng))"])
        } else {
            child = try deviceProcess(d)
            try await Task.sleep(for: .microseconds(Int.random(in: 0...60_000, using: &rng)))
            child.kill()
        }
        let status = try await child.exitStatus()
        if status != 0 { kills += 1 }
        history.append("  \(devices[d].name) sync ended with \(status)")
        try await sync(d)
    }

    /// The server killed (SIGKILL) and started again on its port, maybe while device `d` syncs.
    private func restartServer(during d: Int?) async throws {
        var child: Child?
        if let d {
            child = try deviceProcess(d)
            try await Task.sleep(for: .microseconds(Int.random(in: 0...60_000, using: &rng)))
        }
        server.kill()
        restarts += 1
        if let child {
            let status = try await child.exitStatus()
            history.append("  server killed; \(devices[d ?? 0].name)'s sync ended with \(status)")
        }
        (server, _) = try await harness.startServer(port: url.port ?? 0)
        if let d { try await sync(d) }
    }

    /// The down cursor lost or behind (a crash between the append and the cursor write, a
    /// restored backup): the next sync replays those entries, each a no-op by its key.
    private func rewindDownCursor(_ d: Int) throws {
        let path = devices[d].state
        guard let data = FileManager.default.contents(atPath: path),
              var object = try JSONSerialization.jsonObject(with: data) as? [String: Any],
              let cursor = (object["downCursor"] as? NSNumber)?.intValue else { return }
        if chance(30) {
            try FileManager.default.removeItem(atPath: path)
            history.append("  \(devices[d].name): state file deleted (cursor \(cursor))")
        } else {
            let rewound = Int.random(in: 0...cursor, using: &rng)
            object["downCursor"] = rewound
            try JSONSerialization.data(withJSONObject: object).write(to: URL(fileURLWithPath: path), options: .atomic)
            history.append("  \(devices[d].name): down cursor \(cursor) → \(rewound)")
        }
    }

    /// A proxy's retry or a late request: an acknowledged batch sent again is all duplicates; a
    /// batch that starts beyond what the server holds is a gap. Neither writes anything.
    private func duplicateUp(_ d: Int) async throws {
        let ledger = devices[d].ledger
        let before = try await serverState(url, token: token)
        let acked = before.ledgers.first { $0.ledger == ledger.metadata.ledgerID }?.acked ?? 0
        let body: SyncWire.UpRequest
        let late = chance(30)
        if late {
            body = SyncWire.UpRequest(ledger: ledger.metadata.ledgerID, after: acked + 1, through: acked + 2, events: [])
        } else {
            guard acked > 0 else { return }
            let through = UInt64.random(in: 1...acked, using: &rng)
            let after = UInt64.random(in: 0..<through, using: &rng)
            let events = try await ledger.read({ try $0.events(after: after, limit: Int(through - after)) }).filter { e in
                !(e.key?.hasPrefix(SyncWire.downKeyPrefix) ?? false) && model.sharedTypes.contains(e.type)
            }
            body = SyncWire.UpRequest(ledger: ledger.metadata.ledgerID, after: after, through: through, events: events.map(SyncWire.UpEvent.init))
        }
        let (status, data) = try await http("POST", url, "/v1/up", token: token, body: try JSONEncoder().encode(body))
        if late {
            guard status == 409 else { throw HarnessError(description: "a late batch got \(status), not 409: \(String(decoding: data, as: UTF8.self))") }
        } else {
            guard status == 200 else { throw HarnessError(description: "a resent batch got \(status): \(String(decoding: data, as: UTF8.self))") }
            let answer = try JSONDecoder().decode(SyncWire.UpResponse.self, from: data)
            guard answer.applied == 0, answer.duplicates == body.events.count, answer.acked == acked else {
                throw HarnessError(description: "a resent batch \(body.after)…\(body.through) was applied: \(answer)")
            }
        }
        let after = try await serverState(url, token: token)
        guard after == before else { throw HarnessError(description: "a duplicate delivery changed the server: \(before) → \(after)") }
        history.append("  \(devices[d].name): \(late ? "late batch" : "resent \(body.after)…\(body.through)")")
    }

    /// Every pushed message published, then both devices synced until nothing is left to send
    /// or apply: a, b, then a again (b's changes reach a; a has nothing new for b).
    func quiesce() async throws {
        if !early.isEmpty {
            try await publish(early)
            early = []
        }
        try await sync(0)
        try await sync(1)
        try await sync(0)
        guard model.quiescent else { throw HarnessError(description: "the model is not quiescent after a, b, a") }
    }

    // MARK: - Checks

    /// What differs between the devices, the server and the model, if anything.
    func mismatch() async throws -> String? {
        for (d, device) in devices.enumerated() {
            if let m = try await deviceMismatch(device, model.devices[d].flow) { return "device \(device.name): \(m)" }
        }
        // Quiescent: both devices synced up and down, and every pushed message published.
        guard model.quiescent, early.isEmpty else { return nil }
        if let server = try await serverMismatch() { return server }
        return try await convergenceMismatch()
    }

    private func deviceMismatch(_ device: Device, _ flow: FlowModel) async throws -> String? {
        let list = try await device.ledger.read({ try $0.widgetList(limit: 10_000) })
        return flow.mismatch(list: list, pending: try await device.ledger.read({ try $0.pendingActions(limit: 10_000) }).map(\.actionID))
    }

    /// The server holds each shared event once, its feed is the model's, entry for entry, and
    /// each device's relay is acknowledged to where its cursor stands. The custom events the
    /// devices shared are in the feed too, once each with its envelope (docs/sync.md, "Down"),
    /// compared with the devices' own events: the model's feed is compared without them.
    private func serverMismatch() async throws -> String? {
        let state = try await serverState(url, token: token)
        let shared = model.devices.map(\.sharedCount).reduce(0, +)
        if state.deviceEvents != shared { return "server holds \(state.deviceEvents) device events, the devices shared \(shared)" }
        var feed: [DomainEvent] = [], customs: [SyncWire.Change] = []
        var head: UInt64 = 0
        while true {
            let (status, data) = try await http("GET", url, "/v1/down?after=\(head)&limit=1000", token: token)
            guard status == 200 else { return "down: \(status)" }
            let page = try JSONDecoder().decode(SyncWire.DownResponse.self, from: data)
            if page.changes.isEmpty { break }
            for change in page.changes {
                guard change.seq == head + 1 else { return "feed entry \(change.seq) after \(head)" }
                head = change.seq
                if change.origin != nil {
                    customs.append(change)
                } else {
                    feed.append(try DomainEvent.decode(type: change.type, payload: Array(change.payload.utf8)))
                }
            }
        }
        if state.head != head { return "feed head \(state.head), entries through \(head)" }
        let expected = model.feed.filter { if case .custom = $0 { false } else { true } }
        if feed.count != expected.count { return "\(feed.count) built-in feed entries, model \(expected.count)" }
        for (i, (entry, expected)) in zip(feed, expected).enumerated() where entry != expected {
            return "built-in feed entry \(i + 1): \(entry), model \(expected)"
        }
        // One custom entry per shared custom event of the devices, each with the event's envelope.
        var sent: [String: Event] = [:]
        for device in devices {
            let events = try await device.ledger.read({ try $0.events(after: 0, limit: 100_000) }).filter { e in
                e.type == Self.sharedCustom && !(e.key?.hasPrefix(SyncWire.downKeyPrefix) ?? false)
            }
            for e in events { sent["\(device.ledger.metadata.ledgerID)/\(e.sequence)"] = e }
        }
        if customs.count != sent.count { return "\(customs.count) custom feed entries, the devices shared \(sent.count) custom events" }
        for change in customs {
            guard let origin = change.origin, let event = sent.removeValue(forKey: "\(origin.ledger ?? "-")/\(origin.seq)") else {
                return "custom feed entry \(change.seq) (\(String(describing: change.origin))) is none of the devices' events, or a second one"
            }
            if change.type != event.type || change.payloadBytes != event.payload || origin.time != event.timestampMicros
                || origin.role != event.origin.role || origin.key != event.key {
                return "custom feed entry \(change.seq): \(change), the device's event \(event)"
            }
        }
        let messages = state.messages.map { "\($0.id) read \($0.read.map(String.init) ?? "-") removed \($0.removed)" }
        let expectedMessages = model.serverMessages.sorted { $0.key < $1.key }
            .map { "\($0.key) read \($0.value.read.map(String.init) ?? "-") removed \($0.value.removed)" }
        if messages != expectedMessages { return "server messages \(messages), model \(expectedMessages)" }
        for device in devices {
            // The relay's cursor is where the server acknowledged it, and nothing shared follows it
            // (what follows came down from the feed).
            let cursor = try device.ledger.consumers.list().first { $0.name == "sync-relay" }?.cursor ?? 0
            let acked = state.ledgers.first { $0.ledger == device.ledger.metadata.ledgerID }?.acked ?? 0
            if cursor != acked { return "device \(device.name): relay cursor \(cursor), server acked \(acked)" }
            let unsent = try await device.ledger.read({ try $0.events(after: cursor, limit: 100_000) }).filter { e in
                !(e.key?.hasPrefix(SyncWire.downKeyPrefix) ?? false) && model.sharedTypes.contains(e.type)
            }
            if !unsent.isEmpty { return "device \(device.name): \(unsent.count) shared events after the relay's cursor \(cursor)" }
        }
        return nil
    }

    /// Both devices show the same inbox (rows, read state, unread), and the same badge when no
    /// push of device a is still counted on its own (docs/sync.md, "Convergence").
    private func convergenceMismatch() async throws -> String? {
        let a = try await devices[0].ledger.read({ try $0.widgetList(limit: 10_000) }), b = try await devices[1].ledger.read({ try $0.widgetList(limit: 10_000) })
        if a.items != b.items {
            return "devices diverge: a \(a.items.map { "\($0.id)\($0.read ? "(read)" : "")" }), b \(b.items.map { "\($0.id)\($0.read ? "(read)" : "")" })"
        }
        if a.unreadCount != b.unreadCount { return "devices diverge: unread a \(a.unreadCount), b \(b.unreadCount)" }
        // Each row is a message the server holds as listed and not removed, read as the server says.
        let server = Dictionary(uniqueKeysWithValues: try await serverState(url, token: token).messages.map { ($0.id, $0) })
        for item in a.items {
            guard let m = server[item.id], !m.removed else { return "device row \(item.id) is removed or unknown on the server: \(String(describing: server[item.id]))" }
            if (m.read ?? false) != item.read { return "\(item.id): read \(item.read) on the devices, \(m.read.map(String.init) ?? "-") on the server" }
        }
        // And every message the server holds as not removed is a row (every pushed id was
        // published by now, so the server knows only listed messages).
        let shown = Set(server.values.filter { !$0.removed }.map(\.id))
        if shown != Set(a.items.map(\.id)) {
            return "the server shows \(shown.sorted()), the devices \(a.items.map(\.id).sorted())"
        }
        let flowA = model.devices[0].flow
        if flowA.announcedCount == 0, flowA.serverAdjustment == 0, a.badge != b.badge {
            return "devices diverge: badge a \(a.badge), b \(b.badge)"
        }
        return nil
    }
}
