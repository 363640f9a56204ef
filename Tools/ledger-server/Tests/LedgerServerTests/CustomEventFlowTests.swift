import Foundation
@_spi(LedgerSync) import InboxLedger
import InboxLedgerSync
import struct TestSupport.NoteEdited
import struct TestSupport.SeededGenerator
import struct TestSupport.SharedNotes
import struct TestSupport.TaskAdded
import struct TestSupport.TaskDone
import struct TestSupport.TaskList
import struct TestSupport.TaskRemoved
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Custom events on every device (docs/semantics.md, "Custom events on every device"; docs/apps.md,
/// "The notes and the tasks on every device"), the root's `ConvergenceTests` against a real
/// PostgreSQL, a real `ledger-server` process and real `sync-device` processes: three devices of
/// one user (roles `app`, `widget`, `intents`) and one of another user edit the same notes and
/// tasks offline, in this process and in processes of their own, and sync in a random order;
/// syncs are SIGKILLed at random instants or stop after an up answer, the server is SIGKILLed
/// and started again, down cursors go back. Once every device has synced until a round changes
/// nothing:
/// - every device's `SharedNotes` and `TaskList` equal the fold of its user's feed, in the
///   feed's order, by a model written here from the docs (each entry with its origin's time and
///   role);
/// - every device holds each of its user's custom events exactly once — another device's with
///   its origin's envelope, its own marked shared and settled by exactly one
///   `inbox.shared-settled` at its feed position — and nothing else;
/// - the feeds hold each device's events once, and the two users never see each other's;
/// - each device's cursors stand at the server's head and acknowledgement, and `verify` finds it
///   healthy.
///
/// CUSTOM_FLOW_SEEDS (4), CUSTOM_FLOW_STEPS (60) and CUSTOM_FLOW_SEED (the first seed) size it.
/// A failure prints the seed and the last steps.
@Suite(.serialized, .enabled(if: Harness.postgresAvailable, "needs Debian's postgresql (scripts/setup.sh installs it) and root to run it as nobody"))
struct CustomEventFlowTests {
    static let environment = ProcessInfo.processInfo.environment
    static let seeds = Int(environment["CUSTOM_FLOW_SEEDS"] ?? "") ?? 4
    static let steps = Int(environment["CUSTOM_FLOW_STEPS"] ?? "") ?? 60
    static let firstSeed = UInt64(environment["CUSTOM_FLOW_SEED"] ?? "") ?? 2026_1129

    @Test func devicesEditingOfflineEndWithTheFoldOfTheirUsersFeed() async throws {
        var totals: [String: Int] = [:]
        var kills = 0, restarts = 0, entries = 0, rounds = 0
        let started = ContinuousClock.now
        for n in 0..<UInt64(Self.seeds) {
            let seed = Self.firstSeed + n
            print("custom event flow: seed \(seed) (CUSTOM_FLOW_SEED=\(seed) CUSTOM_FLOW_SEEDS=1 reproduces it)")
            let harness = try await Harness()
            let run: CustomEventFlowRun
            do {
                run = try await CustomEventFlowRun(harness: harness, seed: seed)
            } catch {
                await harness.stop()
                throw error
            }
            do {
                for _ in 0..<Self.steps {
                    let what = try await run.step()
                    totals[what, default: 0] += 1
                }
                rounds += try await run.quiesce()
                let (problems, checked) = try await run.mismatches()
                entries += checked
                for problem in problems {
                    Issue.record("seed \(seed): \(problem)\nrecent:\n\(run.history.suffix(25).joined(separator: "\n"))")
                }
            } catch {
                Issue.record("seed \(seed): \(error)\nrecent:\n\(run.history.suffix(25).joined(separator: "\n"))")
            }
            kills += run.kills
            restarts += run.restarts
            run.stop()
            await harness.stop()
        }
        let seconds = Double((ContinuousClock.now - started).components.seconds)
        print("custom event flow: \(Self.seeds) seeds × \(Self.steps) steps, \(entries) custom feed entries checked on every device, "
              + "\(rounds) quiescence rounds, \(kills) sync kills, \(restarts) server restarts, \(Int(seconds)) s: "
              + totals.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
    }
}

/// One seed's run: the server, alice's three devices and bob's one, each a ledger opened here
/// with the notes and the tasks registered, synced by `sync-device` processes.
final class CustomEventFlowRun {
    static let sharedTypes: Set<String> = [NoteEdited.eventType, TaskAdded.eventType, TaskDone.eventType, TaskRemoved.eventType]
    // Both users edit the same ids: an event of one user on the other's devices would show.
    static let noteIDs = ["n1", "n2", "n3"]
    static let taskIDs = ["t1", "t2", "t3", "t4"]

    struct Device {
        let name: String
        let user: String
        let role: String
        let token: String
        let ledger: Ledger
        let path: String
        let state: String
        var id: String { ledger.metadata.ledgerID }
    }

    /// One edit of the notes or the tasks.
    enum Edit: CustomStringConvertible {
        case note(NoteEdited)
        case added(TaskAdded)
        case done(TaskDone)
        case removed(TaskRemoved)

        var type: String {
            switch self {
            case .note: NoteEdited.eventType
            case .added: TaskAdded.eventType
            case .done: TaskDone.eventType
            case .removed: TaskRemoved.eventType
            }
        }

        /// The payload, its keys sorted: the same bytes at every attempt (an idempotency key
        /// compares the content).
        func json() throws -> String {
            let encoder = JSONEncoder()
            encoder.outputFormatting = .sortedKeys
            let data: Data
            switch self {
            case .note(let e): data = try encoder.encode(e)
            case .added(let e): data = try encoder.encode(e)
            case .done(let e): data = try encoder.encode(e)
            case .removed(let e): data = try encoder.encode(e)
            }
            return String(decoding: data, as: UTF8.self)
        }

        func append(to ledger: Ledger) async throws -> UInt64 {
            switch self {
            case .note(let e): return try await ledger.append(e)
            case .added(let e): return try await ledger.append(e)
            case .done(let e): return try await ledger.append(e)
            case .removed(let e): return try await ledger.append(e)
            }
        }

        var description: String {
            switch self {
            case .note(let e): "note \(e.noteID) '\(e.text)'"
            case .added(let e): "task \(e.id) added '\(e.title)' day \(e.day)"
            case .done(let e): "task \(e.id) done"
            case .removed(let e): "task \(e.id) removed"
            }
        }
    }

    let harness: Harness
    var server: Child
    let url: URL
    let devices: [Device]
    var rng: SeededGenerator
    let upBatch: Int
    let downPage: Int
    var counter = 0
    /// The sequences of the edits appended in this process, per device.
    var appended: [[UInt64]]
    var history: [String] = []
    var kills = 0
    var restarts = 0

    init(harness: Harness, seed: UInt64) async throws {
        self.harness = harness
        rng = SeededGenerator(seed: seed)
        (server, url) = try await harness.startServer()
        let alice = try await harness.token("alice"), bob = try await harness.token("bob")
        devices = try [("alice", "app", alice), ("alice", "widget", alice), ("alice", "intents", alice), ("bob", "app", bob)].map { user, role, token in
            let path = harness.directory + "/\(user)-\(role)"
            var options = LedgerOptions(role: role)
            options.projections = [SharedNotes.self, TaskList.self]
            return Device(name: "\(user)-\(role)", user: user, role: role, token: token, ledger: try Ledger(path: path, options: options),
                          path: path, state: path + ".sync-state")
        }
        appended = devices.map { _ in [] }
        // Small batches and pages, so that a kill lands between two of them.
        upBatch = Int.random(in: 1...8, using: &rng)
        downPage = Int.random(in: 1...8, using: &rng)
        history.append("seed \(seed): up batch \(upBatch), down page \(downPage)")
        // Each device's first sync records the shared types before its first edit (an event
        // appended before stays the device's own, docs/semantics.md).
        for d in devices.indices {
            try await sync(d)
            let recorded = try devices[d].ledger.sharedEventTypes()
            guard recorded == Self.sharedTypes else {
                throw HarnessError(description: "\(devices[d].name) records the shared types \(recorded.sorted()), not \(Self.sharedTypes.sorted())")
            }
        }
    }

    func stop() { server.kill() }

    private func chance(_ percent: Int) -> Bool { Int.random(in: 0..<100, using: &rng) < percent }
    private func pick(_ items: [String]) -> String { items[Int.random(in: 0..<items.count, using: &rng)] }

    // MARK: - Steps

    func step() async throws -> String {
        // Alice's devices most of the time, bob's now and then.
        let d = chance(80) ? Int.random(in: 0..<3, using: &rng) : 3
        let what = switch Int.random(in: 0..<100, using: &rng) {
        case 0..<36: "edit"
        case 36..<44: "edit-by-process"
        case 44..<66: "sync"
        case 66..<82: "sync-killed"
        case 82..<90: "server-restart"
        default: "down-cursor-rewound"
        }
        history.append("\(what) on \(devices[d].name)")
        switch what {
        case "edit": try await edit(d)
        case "edit-by-process": try await editByProcess(d)
        case "sync": try await sync(d, editMeanwhile: chance(30))
        case "sync-killed": try await killedSync(d)
        case "server-restart": try await restartServer(during: chance(50) ? d : nil)
        default: try rewindDownCursor(d)
        }
        return what
    }

    private func randomEdit(_ d: Int) -> Edit {
        counter += 1
        let task = pick(Self.taskIDs)
        switch Int.random(in: 0..<100, using: &rng) {
        case 0..<40: return .note(NoteEdited(noteID: pick(Self.noteIDs), text: "edit \(counter) on \(devices[d].name)"))
        case 40..<65: return .added(TaskAdded(id: task, title: "task \(counter) of \(devices[d].user)", day: Int64.random(in: 0..<5, using: &rng)))
        case 65..<85: return .done(TaskDone(id: task))
        default: return .removed(TaskRemoved(id: task))
        }
    }

    /// An edit in this process (the device's app, with its role). Alone (no sync running), it
    /// shows at once, on top of what the feed placed.
    private func edit(_ d: Int, alone: Bool = true) async throws {
        let edit = randomEdit(d)
        let before = try await shown(d, edit)
        let sequence = try await edit.append(to: devices[d].ledger)
        appended[d].append(sequence)
        history.append("  \(devices[d].name) #\(sequence): \(edit)")
        if alone { try await expectShown(d, edit, before: before, role: devices[d].role) }
    }

    /// The note or the task `edit` changes, as device `d` shows it.
    private func shown(_ d: Int, _ edit: Edit) async throws -> (note: SharedNotes.Row?, task: TaskList.Row?) {
        switch edit {
        case .note(let e): (try await devices[d].ledger.read { try $0.projection(SharedNotes.self).row(e.noteID) }, nil)
        case .added(let e): (nil, try await devices[d].ledger.read { try $0.projection(TaskList.self).row(e.id) })
        case .done(let e): (nil, try await devices[d].ledger.read { try $0.projection(TaskList.self).row(e.id) })
        case .removed(let e): (nil, try await devices[d].ledger.read { try $0.projection(TaskList.self).row(e.id) })
        }
    }

    /// Your own edit shows at once (docs/apps.md): the row is the edit's, whatever the feed placed.
    private func expectShown(_ d: Int, _ edit: Edit, before: (note: SharedNotes.Row?, task: TaskList.Row?), role: String) async throws {
        let after = try await shown(d, edit)
        let expected: String? = switch edit {
        case .note(let e): after.note?.text == e.text && after.note?.editedBy == role ? nil : "the note \(e.noteID) '\(e.text)' by \(role)"
        case .added(let e): after.task == TaskList.Row(title: e.title, day: e.day, done: false) ? nil : "the task \(e.id) open, '\(e.title)' day \(e.day)"
        case .done(let e): after.task == before.task.map { TaskList.Row(title: $0.title, day: $0.day, done: true) } ? nil : "the task \(e.id) done (it was \(String(describing: before.task)))"
        case .removed(let e): after.task == nil ? nil : "no task \(e.id)"
        }
        if let expected {
            throw HarnessError(description: "\(devices[d].name) does not show its own edit at once: expected \(expected), shows \(String(describing: after.note)) \(String(describing: after.task))")
        }
    }

    /// An edit by a process of its own that does not register the projections (an extension),
    /// keyed; sometimes SIGKILLed at a random instant and run again with the same key, as a
    /// redelivery: recorded once either way.
    private func editByProcess(_ d: Int) async throws {
        let edit = randomEdit(d)
        let key = "edit-\(counter)", payload = try edit.json()
        func start() throws -> Child {
            try Child(productsDirectory + "/sync-device", [devices[d].path, "append", "extension", edit.type, key, payload])
        }
        var killed = false, first = ""
        if chance(25) {
            let child = try start()
            try await Task.sleep(for: .microseconds(Int.random(in: 0...30_000, using: &rng)))
            child.kill()
            if try await child.finished() != 0 {
                killed = true
                kills += 1
            }
            first = "; a first attempt said '\(child.text)'"
        }
        let before = try await shown(d, edit)
        let child = try start()
        guard try await child.finished() == 0 else {
            throw HarnessError(description: "the extension's append of \(payload) key \(key) on \(devices[d].name): \(child.text)\(first)")
        }
        history.append("  \(devices[d].name)'s extension\(killed ? " (killed once)" : "") key \(key): \(edit)")
        try await expectShown(d, edit, before: before, role: "extension")
    }

    private func deviceProcess(_ d: Int, _ environment: [String: String] = [:]) throws -> Child {
        let device = devices[d]
        return try Child(productsDirectory + "/sync-device", [device.path, url.absoluteString, device.token, device.state, "once"],
                         environment: ["SYNC_DEVICE_SHARED_TYPES": Self.sharedTypes.sorted().joined(separator: ","),
                                       "SYNC_DEVICE_BATCH": "\(upBatch)", "SYNC_DEVICE_DOWN_PAGE": "\(downPage)"].merging(environment) { $1 })
    }

    /// One `syncOnce` in a process of its own, to the end; maybe an edit in this process while it runs.
    private func sync(_ d: Int, editMeanwhile: Bool = false) async throws {
        let child = try deviceProcess(d)
        if editMeanwhile {
            try await Task.sleep(for: .microseconds(Int.random(in: 0...40_000, using: &rng)))
            try await edit(d, alone: false)
        }
        let status = try await child.exitStatus()
        guard status == 0 else { throw HarnessError(description: "sync of \(devices[d].name) exited \(status): \(child.text)") }
    }

    /// A sync that does not finish: it exits after its n-th up answer, before committing the
    /// relay's cursor, or is SIGKILLed at a random instant; maybe an edit in this process
    /// meanwhile. What it left is the next sync's to finish.
    private func killedSync(_ d: Int) async throws {
        let child: Child
        let afterAnswer = chance(40)
        if afterAnswer {
            child = try deviceProcess(d, ["SYNC_DEVICE_EXIT_AFTER_ANSWER": "\(Int.random(in: 1...3, using: &rng))"])
        } else {
            child = try deviceProcess(d)
        }
        let editMeanwhile = chance(30)
        if editMeanwhile { try await edit(d, alone: false) }
        if !afterAnswer {
            try await Task.sleep(for: .microseconds(Int.random(in: 0...120_000, using: &rng)))
            child.kill()
        }
        let status = try await child.exitStatus()
        if status != 0 { kills += 1 }
        history.append("  \(devices[d].name)'s sync ended with \(status)")
    }

    /// The server SIGKILLed and started again on its port, maybe while device `d` syncs.
    private func restartServer(during d: Int?) async throws {
        var child: Child?
        if let d {
            child = try deviceProcess(d)
            try await Task.sleep(for: .microseconds(Int.random(in: 0...80_000, using: &rng)))
        }
        server.kill()
        restarts += 1
        if let child, let d {
            let status = try await child.exitStatus()
            history.append("  server killed; \(devices[d].name)'s sync ended with \(status)")
        }
        (server, _) = try await harness.startServer(port: url.port ?? 0)
    }

    /// The down cursor behind or lost (a crash between the append and the cursor's write, a
    /// restored backup): the next sync fetches those entries again, each a no-op by its key.
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

    /// Every device synced, round after round, until two rounds in a row change nothing (no
    /// device's log, relay cursor or down cursor, no feed). Returns the rounds run.
    func quiesce() async throws -> Int {
        history.append("quiesce")
        var unchanged = 0, rounds = 0
        while unchanged < 2 {
            guard rounds < 12 else { throw HarnessError(description: "still changing after \(rounds) rounds of syncs: \(try await progress())") }
            let before = try await progress()
            for d in devices.indices { try await sync(d) }
            rounds += 1
            unchanged = try await progress() == before ? unchanged + 1 : 0
        }
        return rounds
    }

    /// What a round of syncs may change: each device's head and cursors, each user's feed head.
    private func progress() async throws -> [String] {
        var all: [String] = []
        for device in devices {
            let head = try await device.ledger.read { try $0.head() }
            let relay = try device.ledger.consumers.list().first { $0.name == "sync-relay" }?.cursor ?? 0
            all.append("\(device.name) head \(head) relay \(relay) down \(downCursor(device.state))")
        }
        for device in devices where device.role == "app" {
            all.append("\(device.user) feed head \(try await serverState(url, token: device.token).head)")
        }
        return all
    }

    // MARK: - Checks

    /// The whole feed of a token's user, as a device reads it.
    private func feedEntries(_ token: String, user: String) async throws -> [SyncWire.Change] {
        var changes: [SyncWire.Change] = []
        while true {
            let (status, data) = try await http("GET", url, "/v1/down?after=\(changes.last?.seq ?? 0)&limit=1000", token: token)
            guard status == 200 else { throw HarnessError(description: "down: \(status) \(String(decoding: data, as: UTF8.self))") }
            let page = try JSONDecoder().decode(SyncWire.DownResponse.self, from: data)
            guard page.user == user else { throw HarnessError(description: "\(user)'s token reads the feed of \(page.user)") }
            if page.changes.isEmpty { return changes }
            changes += page.changes
        }
    }

    /// Everything that differs from the docs' rule, after `quiesce`; and how many custom feed
    /// entries were compared.
    func mismatches() async throws -> (problems: [String], entries: Int) {
        var problems: [String] = []
        var checked = 0
        let userOfLedger = Dictionary(uniqueKeysWithValues: devices.map { ($0.id, $0.user) })
        for user in ["alice", "bob"] {
            guard let token = devices.first(where: { $0.user == user })?.token else { continue }
            let feed = try await feedEntries(token, user: user)
            let state = try await serverState(url, token: token)
            if feed.map(\.seq) != Array(stride(from: UInt64(1), through: UInt64(feed.count), by: 1)) {
                problems.append("\(user)'s feed is not dense from 1: \(feed.map(\.seq))")
            }
            if state.head != UInt64(feed.count) { problems.append("\(user)'s feed head \(state.head), \(feed.count) entries") }
            // Each custom entry once, from one of this user's ledgers, of a shared type.
            var entries: [String: SyncWire.Change] = [:]
            var customs: [SyncWire.Change] = []
            for change in feed {
                guard let origin = change.origin else {
                    if Self.sharedTypes.contains(change.type) { problems.append("\(user)'s feed entry \(change.seq) (\(change.type)) has no origin") }
                    continue
                }
                customs.append(change)
                guard let ledger = origin.ledger else {
                    problems.append("\(user)'s feed entry \(change.seq) has no origin ledger (nothing was published): \(change)")
                    continue
                }
                if userOfLedger[ledger] != user {
                    problems.append("\(user)'s feed entry \(change.seq) comes from \(userOfLedger[ledger].map { "\($0)'s" } ?? "an unknown") ledger \(ledger)")
                }
                if !Self.sharedTypes.contains(change.type) { problems.append("\(user)'s feed entry \(change.seq) has the type \(change.type)") }
                if let first = entries["\(ledger)/\(origin.seq)"] {
                    problems.append("\(user)'s feed holds \(ledger)/\(origin.seq) twice: entries \(first.seq) and \(change.seq)")
                }
                entries["\(ledger)/\(origin.seq)"] = change
            }
            if state.deviceEvents != customs.count {
                problems.append("the server holds \(state.deviceEvents) device events of \(user), its feed \(customs.count) custom entries")
            }
            checked += customs.count
            let model = try FeedFold(customs)
            for (d, device) in devices.enumerated() where device.user == user {
                let acked = state.ledgers.first { $0.ledger == device.id }?.acked ?? 0
                problems += try await deviceMismatches(d, feed: feed, entries: entries, model: model, acked: acked, userOfLedger: userOfLedger)
                    .map { "\(device.name): \($0)" }
            }
        }
        return (problems, checked)
    }

    /// One device against its user's feed: its projections, its log, its cursors, `verify`.
    private func deviceMismatches(_ d: Int, feed: [SyncWire.Change], entries: [String: SyncWire.Change], model: FeedFold, acked: UInt64,
                                  userOfLedger: [String: String]) async throws -> [String] {
        let device = devices[d]
        var problems: [String] = []
        // The projections: the model's fold of the feed.
        let (notes, tasks, head) = try await device.ledger.read { snapshot in
            (try snapshot.projection(SharedNotes.self).contents(), try snapshot.projection(TaskList.self).contents(), try snapshot.head())
        }
        if notes.behind != 0 || tasks.behind != 0 || notes.head != head || tasks.head != head {
            problems.append("the projections reflect the log through \(notes.head)+\(notes.behind) and \(tasks.head)+\(tasks.behind), its head is \(head)")
        }
        let noteRows = Dictionary(notes.rows.map { ($0.key, $0.row) }) { first, _ in first }
        if noteRows != model.notes || notes.rowCount != model.notes.count {
            problems.append("notes \(noteRows.sorted { $0.key < $1.key }), the feed's fold \(model.notes.sorted { $0.key < $1.key })")
        }
        let taskRows = Dictionary(tasks.rows.map { ($0.key, $0.row) }) { first, _ in first }
        if taskRows != model.tasks || tasks.rowCount != model.tasks.count {
            problems.append("tasks \(taskRows.sorted { $0.key < $1.key }), the feed's fold \(model.tasks.sorted { $0.key < $1.key })")
        }
        if tasks.document != model.document { problems.append("task counts \(tasks.document), the feed's fold \(model.document)") }

        // The log: each of the user's custom events once, with its envelope; each own one settled once.
        var log: [Event] = []
        while true {
            let after = log.last?.sequence ?? 0
            let page = try await device.ledger.read { try $0.events(after: after, limit: 1000) }
            if page.isEmpty { break }
            log += page
        }
        var held: [String: UInt64] = [:]   // origin → sequence here
        var own: [UInt64: SyncWire.Change] = [:]   // own shared event → its feed entry
        var settlements: [UInt64: [UInt64?]] = [:]
        for event in log {
            if event.type == DomainEvent.sharedSettledType {
                guard case .sharedSettled(let settlement) = try DomainEvent.decode(type: event.type, payload: event.payload) else { continue }
                settlements[settlement.sequence, default: []].append(settlement.position)
                continue
            }
            guard Self.sharedTypes.contains(event.type) else { continue }
            let origin: String
            let entry: SyncWire.Change?
            switch event.source {
            case .local:
                problems.append("its own \(event.type) #\(event.sequence) is local, not shared (appended after the first sync recorded the types)")
                continue
            case .shared:
                origin = "\(device.id)/\(event.sequence)"
                entry = entries[origin]
                if let entry { own[event.sequence] = entry }
                if let entry, entry.origin?.key != event.key {
                    problems.append("its #\(event.sequence) has the key \(event.key ?? "-"), its feed entry \(entry.seq) \(entry.origin?.key ?? "-")")
                }
            case .feed(let feedOrigin):
                origin = "\(feedOrigin.ledger ?? "-")/\(feedOrigin.sequence)"
                if feedOrigin.ledger == device.id { problems.append("its own event \(origin) came back down as another device's (#\(event.sequence))") }
                if let ledger = feedOrigin.ledger, let other = userOfLedger[ledger], other != device.user {
                    problems.append("#\(event.sequence) is \(other)'s event \(origin)")
                }
                entry = entries[origin]
                if let entry, entry.seq != feedOrigin.position || entry.origin?.key != feedOrigin.key {
                    problems.append("#\(event.sequence) from \(origin) says feed position \(feedOrigin.position) key \(feedOrigin.key ?? "-"), the feed \(entry.seq) key \(entry.origin?.key ?? "-")")
                }
            }
            if let first = held[origin] { problems.append("\(origin) is held twice: #\(first) and #\(event.sequence)") }
            held[origin] = event.sequence
            guard let entry, let entryOrigin = entry.origin else {
                problems.append("#\(event.sequence) (\(origin), \(event.type)) is in no feed entry of \(device.user)")
                continue
            }
            if entry.type != event.type || entry.payloadBytes != event.payload || entryOrigin.time != event.timestampMicros || entryOrigin.role != event.origin.role {
                problems.append("#\(event.sequence) \(event.type) at \(event.timestampMicros) by \(event.origin.role) \(String(decoding: event.payload, as: UTF8.self)), "
                                + "its feed entry \(entry)")
            }
        }
        let missing = entries.keys.filter { held[$0] == nil }.sorted()
        if !missing.isEmpty { problems.append("misses \(missing.count) of its user's custom events: \(missing.prefix(10))") }
        for (sequence, entry) in own.sorted(by: { $0.key < $1.key }) where settlements[sequence] != [entry.seq] {
            problems.append("its #\(sequence) (feed entry \(entry.seq)) is settled \(settlements[sequence].map { "\($0)" } ?? "never")")
        }
        for sequence in settlements.keys.sorted() where own[sequence] == nil {
            problems.append("a settlement of #\(sequence), which is no own shared event in the feed: \(settlements[sequence] ?? [])")
        }
        for sequence in appended[d] where entries["\(device.id)/\(sequence)"] == nil {
            problems.append("its edit #\(sequence) is not in the feed")
        }
        // Cursors at the server's head and acknowledgement; healthy.
        if downCursor(device.state) != UInt64(feed.count) { problems.append("down cursor \(downCursor(device.state)), the feed's head \(feed.count)") }
        let relay = try device.ledger.consumers.list().first { $0.name == "sync-relay" }?.cursor ?? 0
        if relay != acked { problems.append("relay cursor \(relay), the server acknowledged \(acked)") }
        let report = try device.ledger.maintenance.verify()
        if !report.isHealthy { problems.append("verify: \(report)") }
        return problems
    }
}

/// The docs' fold of a user's feed, written apart from the projections: each custom entry in
/// feed order, with its origin's time and role. A note is its last edit; a task added again is
/// open with its new title and day, done once, removed; the counts are the rows'.
struct FeedFold {
    var notes: [String: SharedNotes.Row] = [:]
    var tasks: [String: TaskList.Row] = [:]

    var document: TaskList.Document {
        TaskList.Document(open: tasks.values.count { !$0.done }, done: tasks.values.count { $0.done })
    }

    init(_ entries: [SyncWire.Change]) throws {
        for entry in entries {
            guard let origin = entry.origin, let bytes = entry.payloadBytes else {
                throw HarnessError(description: "feed entry \(entry.seq): no origin or no payload")
            }
            let payload = Data(bytes)
            switch entry.type {
            case NoteEdited.eventType:
                let edit = try JSONDecoder().decode(NoteEdited.self, from: payload)
                notes[edit.noteID] = SharedNotes.Row(text: edit.text, editedAt: Timestamp(micros: origin.time), editedBy: origin.role)
            case TaskAdded.eventType:
                let added = try JSONDecoder().decode(TaskAdded.self, from: payload)
                tasks[added.id] = TaskList.Row(title: added.title, day: added.day, done: false)
            case TaskDone.eventType:
                tasks[try JSONDecoder().decode(TaskDone.self, from: payload).id]?.done = true
            case TaskRemoved.eventType:
                tasks[try JSONDecoder().decode(TaskRemoved.self, from: payload).id] = nil
            default:
                throw HarnessError(description: "feed entry \(entry.seq): the type \(entry.type)")
            }
        }
    }
}
