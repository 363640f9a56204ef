import Foundation
import Testing
import TestSupport
@testable import InboxLedger

#if canImport(Glibc)
import Glibc
#endif

/// The inbox an app's user sees, against an independent model (`FlowModel`, written from
/// docs/semantics.md): seeded random interleavings of what really happens to an app — the
/// server's listing changing; pushes handled by the notification extension's process (with and
/// without the message, with and without the server's badge, redelivered); full and delta syncs
/// by the host's process; widget taps in the widget's process; the host completing actions
/// (`Consumer.batches`); local archives and reads; the server catching up with them; the host
/// suspended and resumed; any process killed mid-command. After every step the ledger's rows,
/// read states, unread count, announced count, badge and pending actions equal the model's,
/// fed with the events the ledger committed, in order.
///
/// CI runs a quick version; `make flows` the long one (FLOW_SEEDS, FLOW_STEPS;
/// docs/reliability.md, "Flows").
@Suite(.serialized) struct FlowModelTests {
    static let seeds = Int(ProcessInfo.processInfo.environment["FLOW_SEEDS"] ?? "") ?? 3
    static let steps = Int(ProcessInfo.processInfo.environment["FLOW_STEPS"] ?? "") ?? 120

    @Test(.timeLimit(.minutes(30)))
    func theLedgerShowsWhatTheModelSaysThroughRandomFlows() throws {
        var totals: [String: Int] = [:]
        for seed in 0..<Self.seeds {
            let run = try FlowRun(seed: UInt64(2026_1125 + seed))
            defer { run.stop() }
            for step in 0..<Self.steps {
                let what = try run.step()
                totals[what, default: 0] += 1
                try run.drain()
                guard let mismatch = try run.mismatch() else { continue }
                Issue.record("seed \(seed) step \(step) (\(what)): \(mismatch)\nrecent: \(run.history.suffix(12).joined(separator: "\n"))")
                return
            }
            #expect(try run.ledger.maintenance.verifyProjections() == nil)
        }
        print("flow model: \(Self.seeds) seeds × \(Self.steps) steps: \(totals.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))")
        // The generator reaches every kind of step.
        #expect(totals.count >= 14, "\(totals)")
    }
}

/// One process of the app, driven through command files (LedgerTestAgent `flow-actor`).
private final class Actor {
    let role: String
    let path: String
    let control: String
    private(set) var process: RunningProcess
    private(set) var next = 1

    init(role: String, path: String, control: String) throws {
        self.role = role
        self.path = path
        self.control = control
        try FileManager.default.createDirectory(atPath: control, withIntermediateDirectories: true)
        process = try Actor.start(role: role, path: path, control: control, from: 1)
    }

    private static func start(role: String, path: String, control: String, from n: Int) throws -> RunningProcess {
        try Processes.start(Processes.product("LedgerTestAgent"), ["flow-actor", path, role, control, "\(n)"])
    }

    /// Drops command `fields` into the control directory; returns its number.
    private func send(_ fields: [String]) throws -> Int {
        let n = next
        next += 1
        let tmp = control + "/.tmp-\(n)"
        try Data(fields.joined(separator: "\t").utf8).write(to: URL(fileURLWithPath: tmp))
        guard rename(tmp, control + "/cmd-\(n)") == 0 else { throw FlowFailure("rename failed for \(role) command \(n)") }
        return n
    }

    /// Runs a command to its end.
    func run(_ fields: [String]) throws {
        let n = try send(fields)
        guard process.waitForOutput(containing: "done \(n) ") else {
            throw FlowFailure("\(role) did not finish \(fields.first ?? ""): \(process.stdoutSoFar.suffix(300)) \((try? process.wait(timeout: 1).stderr) ?? "")")
        }
    }

    /// Sends a command and kills the process `delay` µs later, wherever it is; then starts it again.
    func runAndKill(_ fields: [String], afterMicroseconds delay: UInt32) throws {
        _ = try send(fields)
        usleep(delay)
        try restart()
    }

    /// Kills the process (SIGKILL) and starts it again with the next command.
    func restart() throws {
        process.kill()
        _ = try process.wait(timeout: hangGuardSeconds)
        process = try Actor.start(role: role, path: path, control: control, from: next)
    }

    func stop() {
        process.kill()
        _ = try? process.wait(timeout: hangGuardSeconds)
    }
}

struct FlowFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// The server's listing as the test evolves it, and one run of the three processes.
private final class FlowRun {
    struct ServerMessage { var title: String; var sentAt: Int64; var read: Bool }

    let directory = TemporaryDirectory()
    let ledger: Ledger
    let host: Actor, widget: Actor, extensionProcess: Actor
    var rng: SeededGenerator
    var model = FlowModel()
    var cursor: UInt64 = 0
    var history: [String] = []

    var server: [String: ServerMessage] = [:]
    var changedSinceSync: Set<String> = []
    var removedSinceSync: Set<String> = []
    /// Keys of syncs sent, with what they reset once committed.
    var pendingSyncs: [String: (changed: Set<String>, removed: Set<String>)] = [:]
    var pushes: [(key: String, payload: String)] = []
    var counter = 0
    var clock: Int64 = 1_795_000_000_000_000
    /// The next command to this actor is killed mid-way.
    var killNext: Set<String> = []

    init(seed: UInt64) throws {
        rng = SeededGenerator(seed: seed)
        let path = directory.child("ledger")
        var options = LedgerOptions(role: "observer")
        options.durability = .none
        options.durabilityFloor = .none
        ledger = try Ledger(path: path, options: options)
        host = try Actor(role: "app", path: path, control: directory.child("host"))
        widget = try Actor(role: "widget", path: path, control: directory.child("widget"))
        extensionProcess = try Actor(role: "notification-service", path: path, control: directory.child("extension"))
    }

    func stop() { for actor in [host, widget, extensionProcess] { actor.stop() } }

    private func chance(_ percent: Int) -> Bool { Int.random(in: 0..<100, using: &rng) < percent }
    private func pick<T>(_ items: [T]) -> T? { items.isEmpty ? nil : items[Int.random(in: 0..<items.count, using: &rng)] }
    private func fresh(_ prefix: String) -> String { counter += 1; return "\(prefix)\(counter)" }

    private static func json(_ s: String) -> String { "\"" + s + "\"" }   // ids and titles are plain ASCII
    private static func date(_ micros: Int64) -> String { json(Timestamp(micros: micros).iso8601) }

    private func listing(_ id: String, _ m: ServerMessage) -> String {
        #"{"id":\#(Self.json(id)),"read":\#(m.read),"sentAt":\#(Self.date(m.sentAt)),"title":\#(Self.json(m.title))}"#
    }

    private var serverUnread: Int { server.values.filter { !$0.read }.count }

    /// Runs `fields` on `actor`, or kills it mid-way if a kill was planned for it.
    private func command(_ actor: Actor, _ fields: [String]) throws {
        if killNext.remove(actor.role) != nil {
            try actor.runAndKill(fields, afterMicroseconds: UInt32.random(in: 0...4000, using: &rng))
        } else {
            try actor.run(fields)
        }
    }

    private func append(_ actor: Actor, key: String?, type: String, payload: String) throws {
        try command(actor, ["append", key ?? "-", type, payload])
    }

    /// One random step; returns its kind.
    func step() throws -> String {
        let roll = Int.random(in: 0..<100, using: &rng)
        let what: String
        switch roll {
        case 0..<14:
            what = "server-add"
            let id = fresh("m")
            clock += Int64.random(in: 1...600_000_000, using: &rng)
            server[id] = ServerMessage(title: "t\(counter)", sentAt: clock, read: false)
            changedSinceSync.insert(id)
            if chance(60) { try push(id) }
        case 14..<19:
            what = "server-remove"
            if let id = pick(Array(server.keys)) {
                server[id] = nil
                changedSinceSync.remove(id)
                removedSinceSync.insert(id)
            }
        case 19..<24:
            what = "server-read-or-edit"
            if let id = pick(Array(server.keys)) {
                if chance(50) { server[id]?.read.toggle() } else { server[id]?.title = "t\(fresh("e"))" }
                changedSinceSync.insert(id)
            }
        case 24..<30:
            what = "server-catches-up"
            // The app told the server of a local change (its own API, or sync).
            if let id = pick(Array(model.removedHere)), server[id] != nil {
                server[id] = nil
                changedSinceSync.remove(id)
                removedSinceSync.insert(id)
            } else if let change = pick(Array(model.unsettledReads)), server[change.key] != nil {
                server[change.key]?.read = change.value
                changedSinceSync.insert(change.key)
            }
        case 30..<38:
            what = "push-redelivered"
            if let old = pick(pushes) { try append(extensionProcess, key: old.key, type: "push.received", payload: old.payload) }
        case 38..<48:
            what = "sync-full"
            let body = server.sorted { $0.key < $1.key }.map { listing($0.key, $0.value) }.joined(separator: ",")
            try sync(#"{"messages":[\#(body)],"mode":"full"}"#)
        case 48..<58:
            what = "sync-delta"
            let body = changedSinceSync.sorted().compactMap { id in server[id].map { listing(id, $0) } }.joined(separator: ",")
            let removed = removedSinceSync.sorted().map(Self.json).joined(separator: ",")
            try sync(#"{"messages":[\#(body)],"mode":"delta"\#(removed.isEmpty ? "" : #","removed":[\#(removed)]"#)}"#)
        case 58..<66:
            what = "widget-tap"
            let id = fresh("w")
            if chance(60), let target = pick(model.orderedIDs) {
                try append(widget, key: "tap-\(id)", type: "widget.action", payload: #"{"actionID":"\#(id)","kind":"markRead","target":"\#(target)"}"#)
            } else {
                try append(widget, key: "tap-\(id)", type: "widget.action", payload: #"{"actionID":"\#(id)","kind":"custom","name":"snooze"}"#)
            }
        case 66..<74:
            what = "host-completes"
            try command(host, ["complete", "\(Int.random(in: 1...5, using: &rng))"])
        case 74..<80:
            what = "local-archive"
            let candidates = model.orderedIDs + Array(model.announced.keys)
            if let id = pick(candidates) {
                try append(host, key: fresh("archive-"), type: "message.removed", payload: #"{"ids":["\#(id)"]}"#)
            }
        case 80..<87:
            what = "local-read"
            let candidates = model.orderedIDs + Array(model.announced.keys)
            if let id = pick(candidates) {
                let actor = chance(50) ? host : widget
                try append(actor, key: fresh("read-"), type: "message.read", payload: #"{"ids":["\#(id)"],"read":\#(chance(70))}"#)
            }
        case 87..<90:
            what = "badge-delta"
            try append(host, key: fresh("badge-"), type: "badge.adjusted", payload: #"{"delta":\#(Int.random(in: -2...2, using: &rng))}"#)
        case 90..<95:
            what = "host-suspended"
            try host.run(["suspend", "\(Int.random(in: 0...15, using: &rng))"])
        default:
            what = "kill"
            let actor = pick([host, widget, extensionProcess]) ?? host
            if chance(50) { killNext.insert(actor.role) } else { try actor.restart() }
        }
        history.append(what)
        return what
    }

    /// The extension's push for server message `id`: with or without the message and badge.
    private func push(_ id: String) throws {
        guard let m = server[id] else { return }
        var fields = [#""messageID":\#(Self.json(id))"#]
        if chance(50) { fields.insert(#""message":\#(listing(id, m))"#, at: 0) }
        if chance(30) { fields.insert(#""badge":\#(serverUnread)"#, at: 0) }
        let payload = "{" + fields.joined(separator: ",") + "}"
        let key = "push-\(fresh("p"))"
        pushes.append((key, payload))
        try append(extensionProcess, key: key, type: "push.received", payload: payload)
    }

    private func sync(_ payload: String) throws {
        let key = fresh("sync-")
        pendingSyncs[key] = (changedSinceSync, removedSinceSync)
        try append(host, key: key, type: "inbox.synced", payload: payload)
    }

    /// Feeds the model every event committed since the last step (whichever process, killed or not).
    func drain() throws {
        while true {
            let events = try ledger.read({ try $0.events(after: cursor, limit: 500) })
            if events.isEmpty { return }
            for event in events {
                model.apply(try DomainEvent.decode(type: event.type, payload: event.payload))
                if let key = event.key, let reset = pendingSyncs.removeValue(forKey: key) {
                    // That sync reached the device: what it carried is no longer "since the sync".
                    changedSinceSync.subtract(reset.changed)
                    removedSinceSync.subtract(reset.removed)
                }
                cursor = event.sequence
            }
        }
    }

    /// What differs between the ledger and the model, if anything.
    func mismatch() throws -> String? {
        model.mismatch(list: try ledger.read({ try $0.widgetList(limit: 10_000) }), pending: try ledger.read({ try $0.pendingActions(limit: 10_000) }).map(\.actionID))
    }
}
