import Foundation
@_spi(LedgerSync) import InboxLedger
import InboxLedgerSync
import Testing
import TestSupport

/// Custom events on every device (docs/sync.md, "Custom events on every device";
/// docs/semantics.md): each device's shared events reach the others with their envelope, once,
/// and every device's app projections end equal to the fold of the feed's order, whatever
/// order each device's log holds them in. The model below is written from the docs: it folds
/// the feed's custom entries in feed order, with each entry's origin time and role.
@Suite struct ConvergenceTests {
    static let shared: Set<String> = [NoteEdited.eventType, TaskAdded.eventType, TaskDone.eventType, TaskRemoved.eventType]

    struct Device {
        let ledger: Ledger
        let state: String
        var client: SyncClient

        init(role: String, server: FakeServer) throws {
            var options = LedgerOptions(role: role)
            options.projections = [SharedNotes.self, TaskList.self]
            ledger = try Ledger.temporary(options: options)
            state = NSTemporaryDirectory() + "/sync-state-\(UUID().uuidString)"
            client = try SyncClient(ledger: ledger, configuration: configuration(state: state, custom: ConvergenceTests.shared), transport: server)
        }

        /// A new client over the same ledger and state file: the process started again.
        mutating func restart(server: FakeServer) throws {
            client = try SyncClient(ledger: ledger, configuration: configuration(state: state, custom: ConvergenceTests.shared), transport: server)
        }

        func notes() throws -> [String: SharedNotes.Row] {
            try Dictionary(uniqueKeysWithValues: ledger.read { try $0.projection(SharedNotes.self).rows(limit: 1000) }.map { ($0.key, $0.row) })
        }

        func tasks() throws -> ([String: TaskList.Row], TaskList.Document) {
            try ledger.read { snapshot in
                let contents = try snapshot.projection(TaskList.self).contents(limit: 1000)
                return (Dictionary(uniqueKeysWithValues: contents.rows.map { ($0.key, $0.row) }), contents.document)
            }
        }
    }

    /// The docs' fold of the feed: each custom entry in feed order, its origin's time and role.
    struct Model {
        var notes: [String: SharedNotes.Row] = [:]
        var tasks: [String: TaskList.Row] = [:]
        var open = 0, done = 0

        init(feed: [SyncWire.Change]) throws {
            for change in feed {
                guard let origin = change.origin else { continue }
                let payload = Data(change.payloadBytes ?? [])
                switch change.type {
                case NoteEdited.eventType:
                    let edit = try JSONDecoder().decode(NoteEdited.self, from: payload)
                    notes[edit.noteID] = SharedNotes.Row(text: edit.text, editedAt: Timestamp(micros: origin.time), editedBy: origin.role)
                case TaskAdded.eventType:
                    let added = try JSONDecoder().decode(TaskAdded.self, from: payload)
                    if let old = tasks[added.id] { if old.done { done -= 1 } else { open -= 1 } }
                    tasks[added.id] = TaskList.Row(title: added.title, day: added.day, done: false)
                    open += 1
                case TaskDone.eventType:
                    let id = try JSONDecoder().decode(TaskDone.self, from: payload).id
                    if let row = tasks[id], !row.done {
                        tasks[id]?.done = true
                        open -= 1
                        done += 1
                    }
                case TaskRemoved.eventType:
                    let id = try JSONDecoder().decode(TaskRemoved.self, from: payload).id
                    if let row = tasks.removeValue(forKey: id) { if row.done { done -= 1 } else { open -= 1 } }
                default:
                    continue
                }
            }
        }
    }

    @Test func twoDevicesEditingOneNoteOfflineEndWithTheSameNote() async throws {
        let server = FakeServer(relaysCustomEvents: true)
        let phone = try Device(role: "app", server: server)
        let tablet = try Device(role: "widget", server: server)
        try await phone.ledger.append(NoteEdited(noteID: "n1", text: "from the phone"))
        try await tablet.ledger.append(NoteEdited(noteID: "n1", text: "from the tablet"))
        // Each shows its own edit at once, before any sync.
        #expect(try phone.notes()["n1"]?.text == "from the phone")
        #expect(try tablet.notes()["n1"]?.text == "from the tablet")
        _ = try await phone.client.syncOnce()
        _ = try await tablet.client.syncOnce()   // the tablet's edit is placed after the phone's
        _ = try await phone.client.syncOnce()
        let feed = server.feed
        #expect(feed.map(\.type) == [NoteEdited.eventType, NoteEdited.eventType])
        let expected = try Model(feed: feed).notes
        #expect(expected["n1"]?.text == "from the tablet" && expected["n1"]?.editedBy == "widget")
        #expect(try phone.notes() == expected)
        #expect(try tablet.notes() == expected)
        // The phone holds the tablet's edit with the tablet's envelope; the tablet its own once.
        let phoneLog = try await phone.ledger.read { try $0.events(after: 0, limit: 100) }
        let fromTablet = phoneLog.filter { if case .feed = $0.source { true } else { false } }
        #expect(fromTablet.count == 1)
        if case .feed(let origin)? = fromTablet.first?.source {
            #expect(origin.ledger == tablet.ledger.metadata.ledgerID && origin.position == 2)
            #expect(fromTablet.first?.origin.role == "widget" && fromTablet.first?.timestampMicros == feed[1].origin?.time)
        }
        let tabletLog = try await tablet.ledger.read { try $0.events(after: 0, limit: 100) }
        #expect(tabletLog.filter { $0.type == NoteEdited.eventType }.count == 2)   // its own (shared) and the phone's (from the feed)
        #expect(tabletLog.filter { $0.type == DomainEvent.sharedSettledType }.count == 1)
        for device in [phone, tablet] { #expect(try device.ledger.maintenance.verify().isHealthy) }
    }

    /// Three devices of one user edit the same notes and tasks offline and sync in a random
    /// order, answers lost after the server committed and clients started again at random: once
    /// every device has sent its events and caught up with the feed, each holds every event
    /// exactly once and shows exactly the model's fold of the feed.
    @Test(arguments: [1, 2, 3, 4]) func threeDevicesConvergeOnTheFeedsOrder(seed: UInt64) async throws {
        var rng = SeededGenerator(seed: seed)
        let server = FakeServer(relaysCustomEvents: true)
        var devices = try ["app", "widget", "intents"].map { try Device(role: $0, server: server) }
        let notes = ["n1", "n2", "n3"], tasks = ["t1", "t2", "t3", "t4"]
        var appended = 0
        for _ in 0..<80 {
            let d = Int.random(in: 0..<devices.count, using: &rng)
            switch Int.random(in: 0..<10, using: &rng) {
            case 0..<5:
                let ledger = devices[d].ledger
                let id = tasks.randomElement(using: &rng) ?? "t1"
                switch Int.random(in: 0..<4, using: &rng) {
                case 0: try await ledger.append(NoteEdited(noteID: notes.randomElement(using: &rng) ?? "n1", text: "text \(appended) on \(d)"))
                case 1: try await ledger.append(TaskAdded(id: id, title: "task \(appended)", day: Int64.random(in: 0..<5, using: &rng)))
                case 2: try await ledger.append(TaskDone(id: id))
                default: try await ledger.append(TaskRemoved(id: id))
                }
                appended += 1
            case 5..<8:
                if Bool.random(using: &rng) { server.inject(.loseAnswer) }   // committed, the answer lost
                _ = try? await devices[d].client.syncOnce()
            case 8:
                try devices[d].restart(server: server)
            default:
                // A local change the feed never carries (not shared): in this device's order.
                try await devices[d].ledger.append(.badgeAdjusted(.delta(1)))
            }
        }
        server.state.withLock { $0.faults = [] }
        for _ in 0..<3 { for device in devices { _ = try await device.client.syncOnce() } }

        let feed = server.feed
        let model = try Model(feed: feed)
        #expect(feed.count == appended, "every shared event in the feed once")
        for device in devices {
            #expect(try device.notes() == model.notes)
            let (rows, document) = try device.tasks()
            #expect(rows == model.tasks)
            #expect(document == TaskList.Document(open: model.open, done: model.done))
            // Every event once: the others' from the feed, its own once, each own one settled once.
            let log = try await device.ledger.read { try $0.events(after: 0, limit: 10_000) }
            let ledgerID = device.ledger.metadata.ledgerID
            var held: [String] = []
            for event in log where ConvergenceTests.shared.contains(event.type) {
                switch event.source {
                case .feed(let origin): held.append("\(origin.ledger ?? "-")/\(origin.sequence)")
                case .shared, .local: held.append("\(ledgerID)/\(event.sequence)")
                }
            }
            #expect(held.sorted() == feed.compactMap { $0.origin.map { "\($0.ledger ?? "-")/\($0.seq)" } }.sorted())
            let settled = log.filter { $0.type == DomainEvent.sharedSettledType }.count
            #expect(settled == feed.count { $0.origin?.ledger == ledgerID })
            #expect(try device.ledger.maintenance.verify().isHealthy)
        }
        _ = devices
    }
}
