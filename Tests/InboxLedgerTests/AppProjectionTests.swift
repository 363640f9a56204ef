import Foundation
import Testing
import TestSupport
@testable import InboxLedger

/// App-defined projections (docs/semantics.md, "App projections"), checked against an
/// independent model of the task list written from docs/apps.md: a dictionary folded by hand.
@Suite struct AppProjectionTests {
    /// The model: what docs/apps.md says the task list holds after `events`.
    struct TaskModel {
        var rows: [String: TaskList.Row] = [:]
        mutating func apply(_ event: Event) throws {
            switch event.baseType {
            case TaskAdded.eventType:
                let e = try event.decode(as: TaskAdded.self)
                rows[e.id] = TaskList.Row(title: e.title, day: e.day, done: false)
            case TaskDone.eventType:
                let e = try event.decode(as: TaskDone.self)
                rows[e.id]?.done = true
            case TaskRemoved.eventType:
                let e = try event.decode(as: TaskRemoved.self)
                rows[e.id] = nil
            default: break
            }
        }
        /// Open tasks first, by day, then title, then key.
        var ordered: [(key: String, row: TaskList.Row)] {
            rows.map { (key: $0.key, row: $0.value) }.sorted { a, b in
                if a.row.done != b.row.done { return !a.row.done }
                if a.row.day != b.row.day { return a.row.day < b.row.day }
                if a.row.title != b.row.title { return a.row.title.utf8.lexicographicallyPrecedes(b.row.title.utf8) }
                return a.key.utf8.lexicographicallyPrecedes(b.key.utf8)
            }
        }
        var document: TaskList.Document {
            TaskList.Document(open: rows.values.filter { !$0.done }.count, done: rows.values.filter(\.done).count)
        }
    }

    func options(_ role: String, _ projections: [any LedgerProjection.Type] = [TaskList.self]) -> LedgerOptions {
        var options = LedgerOptions(role: role)
        options.projections = projections
        return options
    }

    /// `options(role)` for a handle that builds only when asked (the tests drive the build).
    func whenAsked(_ role: String) -> LedgerOptions {
        var asked = options(role)
        asked.projectionBuilds = .whenAsked
        return asked
    }

    /// A handle without the projection (the CLI, an old extension) whose commits need not be
    /// durable: what fills a test's log.
    func plainWriter(_ path: String) throws -> Ledger {
        var plain = LedgerOptions(role: "cli")
        plain.durability = .none
        return try Ledger(path: path, options: plain)
    }

    /// Appends `count` distinct tasks (`t<n>`, due on one of 9 days) in batches of 1,000.
    func addTasks(_ ledger: Ledger, count: Int) throws {
        for start in stride(from: 0, to: count, by: 1_000) {
            try ledger.append(contentsOf: (start..<min(count, start + 1_000)).map { i in
                try NewEvent(TaskAdded(id: "t\(i)", title: "task \(i % 1_000)", day: Int64(i % 9)))
            })
        }
    }

    /// The model of `ledger`'s whole log (the task list's version 1).
    func foldedLog(_ ledger: Ledger) throws -> TaskListModel {
        var model = TaskListModel(.v1)
        try model.fold(try ledger.read { try $0.events(after: 0, limit: .max) })
        return model
    }

    func check(_ ledger: Ledger, against model: TaskModel, _ note: Comment? = nil) throws {
        let state = try ledger.read({ try $0.projection(TaskList.self).contents() })
        #expect(state.rows.map(\.key) == model.ordered.map(\.key), note)
        #expect(state.rows.map(\.row) == model.ordered.map(\.row), note)
        #expect(state.document == model.document, note)
        #expect(state.rowCount == model.rows.count, note)
    }

    @Test func appendsUpdateTheProjectionInTheSameTransaction() throws {
        let dir = TemporaryDirectory()
        let ledger = try Ledger(path: dir.child("l"), options: options("app"))
        var model = TaskModel()
        var generator = SeededGenerator(seed: 28)
        for step in 0..<400 {
            let id = "t\(Int.random(in: 0..<40, using: &generator))"
            let event: NewEvent
            switch Int.random(in: 0..<10, using: &generator) {
            case 0..<5: event = try NewEvent(TaskAdded(id: id, title: "task \(Int.random(in: 0..<9, using: &generator))", day: Int64.random(in: 0..<5, using: &generator)))
            case 5..<8: event = try NewEvent(TaskDone(id: id))
            case 8: event = try NewEvent(TaskRemoved(id: id))
            default: event = NewEvent(type: "badge.adjusted", payload: Array(#"{"delta":1}"#.utf8))
            }
            let sequence = try ledger.append(contentsOf: [event])[0]
            let stored = try ledger.read({ try $0.event(at: sequence) })
            try model.apply(try #require(stored))
            if step % 50 == 0 { try check(ledger, against: model, "step \(step)") }
        }
        try check(ledger, against: model)
        let info = try #require(try ledger.projections.list().first)
        #expect(info.name == TaskList.name && info.version == 1 && info.status == "ready")
        #expect(info.appliedThrough == (try ledger.read({ try $0.head() })))
        #expect(info.rows == model.rows.count)
        // A row, a range from an order, the document: each one read transaction.
        let someKey = try #require(model.rows.keys.sorted().first)
        #expect(try ledger.read({ try $0.projection(TaskList.self).row(someKey) }) == model.rows[someKey])
        let firstDone = model.ordered.firstIndex { $0.row.done } ?? model.ordered.count
        let done = try ledger.read({ try $0.projection(TaskList.self).rows(from: ProjectionOrder(.bool(true)), limit: 3) })
        #expect(done.map(\.key) == Array(model.ordered[firstDone...].prefix(3)).map(\.key))
    }

    @Test func anApplyThatThrowsRefusesItsAppendAloneAndNothingIsWritten() throws {
        let dir = TemporaryDirectory()
        let ledger = try Ledger(path: dir.child("l"), options: options("app"))
        try ledger.append(TaskAdded(id: "t1", title: "Milk", day: 1))
        let head = try ledger.read({ try $0.head() })
        // A payload that does not decode as TaskDone: the projection's apply throws.
        let bad = NewEvent(type: TaskDone.eventType, payload: Array(#"{"task":"t1"}"#.utf8))
        #expect {
            try ledger.append(contentsOf: [try NewEvent(TaskAdded(id: "t2", title: "Eggs", day: 2)), bad])
        } throws: { error in
            guard case LedgerError.projectionRejected(let name, let sequence, let type, _) = error else { return false }
            return name == TaskList.name && sequence == head + 2 && type == TaskDone.eventType
        }
        #expect(try ledger.read({ try $0.head() }) == head, "nothing of the refused append is written")
        #expect(try ledger.read({ try $0.projection(TaskList.self).row("t2") }) == nil)
        // The next append goes through.
        try ledger.append(TaskDone(id: "t1"))
        #expect(try ledger.read({ try $0.projection(TaskList.self).row("t1") })?.done == true)
    }

    @Test func aHandleWithoutTheProjectionAppendsAndTheStateStillAgreesWithTheLog() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        let app = try Ledger(path: path, options: options("app"))
        try app.append(TaskAdded(id: "t1", title: "Milk", day: 1))
        // The CLI, an old extension: no projection registered.
        let plain = try Ledger(path: path, options: LedgerOptions(role: "extension"))
        try plain.append(TaskDone(id: "t1"))
        try plain.append(TaskAdded(id: "t2", title: "Eggs", day: 0))
        // Reads apply what is missing in memory; the stored record still says 1.
        #expect(try app.projections.list().first?.appliedThrough == 1)
        #expect(try app.read({ try $0.projection(TaskList.self).row("t1") })?.done == true)
        #expect(try app.read({ try $0.projection(TaskList.self).rows() }).map(\.key) == ["t2", "t1"])
        #expect(try app.read({ try $0.projection(TaskList.self).document() }) == TaskList.Document(open: 1, done: 1))
        // The registered handle's next append applies them for good.
        try app.append(TaskRemoved(id: "t2"))
        #expect(try app.projections.list().first?.appliedThrough == 4)
        #expect(try app.read({ try $0.projection(TaskList.self).contents() }).rows.map(\.key) == ["t1"])
    }

    @Test func aNewVersionIsBuiltBesideTheOldOneWhichKeepsWorkingUntilTheSwitch() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        let v1 = try Ledger(path: path, options: options("app"))
        try v1.append(TaskAdded(id: "t1", title: "Milk", day: 1))
        try v1.append(TaskAdded(id: "t2", title: "Eggs", day: 2))
        try v1.append(TaskDone(id: "t1"))
        #expect(try v1.read({ try $0.projection(TaskList.self).rows() }).map(\.key) == ["t2", "t1"])
        // The updated app opens with version 2: the opening applies nothing, the build waits to
        // be asked; with so few events left, a read replays them in memory (writing nothing).
        var asked = options("app", [TaskListV2.self])
        asked.projectionBuilds = .whenAsked
        let v2 = try Ledger(path: path, options: asked)
        #expect(try v2.read({ try $0.projection(TaskListV2.self).rows() }).map(\.key) == ["t2"])
        #expect(try v2.projections.list().map(\.status) == ["ready", "building"])
        // Meanwhile the old version is read and kept as before.
        try v1.append(TaskAdded(id: "t3", title: "Jam", day: 3))
        #expect(try v1.read({ try $0.projection(TaskList.self).rows() }).map(\.key) == ["t2", "t3", "t1"])
        let listed = try v2.projections.list()
        #expect(listed.map(\.version) == [1, 2] && listed.map(\.status) == ["ready", "building"])
        // The build, then the switch; version 1 (whose only registrant is this process) is
        // dropped by a build step 2 s after version 2 appeared.
        try v2.projections.build()
        #expect(try v2.read({ try $0.projection(TaskListV2.self).rows() }).map(\.key) == ["t2", "t3"])
        #expect(try v2.read({ try $0.projection(TaskListV2.self).document() }) == TaskList.Document(open: 2, done: 1))
        #expect(try waitUntil { try v2.projections.build(); return try v2.projections.list().map(\.version) == [2] })
        // The old widget still runs version 1: its appends go through, its reads are refused.
        try v1.append(TaskDone(id: "t2"))
        #expect(throws: LedgerError.self) { try v1.read({ try $0.projection(TaskList.self).rows() }) }
        #expect(try v2.read({ try $0.projection(TaskListV2.self).rows() }).map(\.key) == ["t3"])
        #expect(try v2.read({ try $0.projection(TaskListV2.self).document() }) == TaskList.Document(open: 1, done: 2))
        // Reopening version 1 does not take the projection back.
        let v1Again = try Ledger(path: path, options: options("widget"))
        #expect(try v1Again.projections.list().map(\.version) == [2])
        #expect(try v1Again.maintenance.verify().isHealthy)
    }

    @Test func anOpeningWithABuildDueAppliesNothingAndTheBackgroundBuilderFinishesIt() async throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        let plain = try plainWriter(path)
        try plain.append(contentsOf: (0..<3_000).map { try NewEvent(TaskAdded(id: "t\($0)", title: "task", day: Int64($0))) })
        let app = try Ledger(path: path, options: options("app"))
        // The observation waits through `projectionBuilding` for the state the builder stores.
        for try await state in LedgerObservation.tracking({ try $0.projection(TaskList.self).contents(limit: 1) }).values(in: app) where state.rowCount == 3_000 {
            #expect(state.head == 3_000 && state.behind == 0)
            break
        }
        #expect(try app.projections.list().first?.status == "ready")
    }

    @Test func badRegistrationsAreRefusedAtOpenWithNothingWritten() throws {
        struct Clash: LedgerProjection {
            typealias Row = TaskList.Row
            static let name = "events"
            static let version = 1
            static let eventTypes: Set<String> = []
            static func apply(_ event: Event, to state: inout ProjectionUpdate<Clash>) throws {}
        }
        struct BadName: LedgerProjection {
            typealias Row = TaskList.Row
            static let name = "Tasks!"
            static let version = 1
            static let eventTypes: Set<String> = []
            static func apply(_ event: Event, to state: inout ProjectionUpdate<BadName>) throws {}
        }
        let dir = TemporaryDirectory()
        for projections: [any LedgerProjection.Type] in [[Clash.self], [BadName.self], [TaskList.self, TaskListV2.self]] {
            #expect(throws: LedgerError.self) { try Ledger(path: dir.child("l"), options: options("app", projections)) }
        }
        #expect(!FileManager.default.fileExists(atPath: dir.child("l")))
    }

    @Test func aStateThatCannotBeEncodedRefusesTheAppend() throws {
        struct NotFinite: LedgerProjection {
            struct Row: Codable, Sendable, Equatable { var ratio: Double }
            static let name = "ratios"
            static let version = 1
            static let eventTypes: Set<String> = ["com.example.ratio"]
            static func apply(_ event: Event, to state: inout ProjectionUpdate<NotFinite>) throws {
                try state.set(Row(ratio: .infinity), for: "r")
            }
        }
        let dir = TemporaryDirectory()
        let ledger = try Ledger(path: dir.child("l"), options: options("app", [NotFinite.self]))
        #expect {
            try ledger.append(contentsOf: [NewEvent(type: "com.example.ratio", payload: Array("{}".utf8))])
        } throws: { error in
            guard case LedgerError.projectionRejected(let name, _, _, let reason) = error else { return false }
            return name == "ratios" && reason.contains("JSON")
        }
        #expect(try ledger.read({ try $0.head() }) == 0)
    }

    @Test func compactionKeepsWhatAProjectionHasNotAppliedAndSnapshotsCarryItsState() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        let app = try Ledger(path: path, options: options("app"))
        for i in 0..<20 { try app.append(TaskAdded(id: "t\(i)", title: "task", day: Int64(i))) }
        let plain = try Ledger(path: path, options: LedgerOptions(role: "compactor"))
        for i in 0..<5 { try plain.append(TaskDone(id: "t\(i)")) }
        var policy = CompactionPolicy()
        policy.retainedTail = 0
        let report = try Compactor(ledger: plain, policy: policy).runOnce()
        #expect(report.blockers.contains(.projection(name: TaskList.name, through: 20)))
        #expect(try plain.read({ try $0.firstSequence() }) == 21, "the five events the projection has not applied stay")
        #expect(try app.read({ try $0.projection(TaskList.self).document() }) == TaskList.Document(open: 15, done: 5))
        let snapshot = try #require(try plain.maintenance.snapshots().last)
        #expect(snapshot.rows > 40, "the snapshot holds the app projection's rows too")
    }

    @Test func anEventAnotherProcessWroteThatApplyRefusesIsSkippedAndRecordedNotAFailureForEveryone() throws {
        struct Strict: LedgerProjection {
            typealias Row = TaskList.Row
            typealias Document = TaskList.Document
            static let name = TaskList.name
            static let version = 1
            static let eventTypes: Set<String> = [TaskAdded.eventType, TaskDone.eventType]
            static let initialDocument = Document()
            /// Sees which: the app's own append of an unknown task is refused; another's is skipped.
            static func apply(_ event: Event, to state: inout ProjectionUpdate<Strict>) throws {
                if event.baseType == TaskAdded.eventType {
                    let added = try event.decode(as: TaskAdded.self)
                    try state.set(Row(title: added.title, day: added.day, done: false), for: added.id)
                    state.document.open += 1
                    return
                }
                let done = try event.decode(as: TaskDone.self)
                guard var row = try state.row(done.id) else { throw TaskListError.unknownTask(done.id, state.context) }
                row.done = true
                try state.set(row, for: done.id)
                state.document.open -= 1
                state.document.done += 1
            }
        }
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        let app = try Ledger(path: path, options: options("app", [Strict.self]))
        try app.append(TaskAdded(id: "t1", title: "Milk", day: 1))
        #expect(throws: LedgerError.self) { try app.append(TaskDone(id: "nope")) }   // its own: refused, nothing written
        #expect(try app.read({ try $0.head() }) == 1)
        // The CLI appends an event the projection cannot decode, then one it refuses, then a good one.
        let plain = try plainWriter(path)
        try plain.append(contentsOf: [NewEvent(type: TaskDone.eventType, payload: Array(#"{"task":"t1"}"#.utf8))])
        try plain.append(TaskDone(id: "ghost"))
        try plain.append(TaskDone(id: "t1"))
        // Reads skip both, in memory; the handle's next append records them; nothing stops.
        #expect(try app.read({ try $0.projection(Strict.self).document() }) == TaskList.Document(open: 0, done: 1))
        try app.append(TaskAdded(id: "t2", title: "Eggs", day: 2))
        let info = try #require(try app.projections.list().first)
        #expect(info.status == "ready" && info.appliedThrough == 5 && info.skippedEvents == 2)
        #expect(info.lastSkipped?.contains("event 3") == true && info.lastSkipped?.contains("replaying") == true, "\(info.lastSkipped ?? "")")
        #expect(try app.read({ try $0.projection(Strict.self).rows() }).map(\.key) == ["t1", "t2"])
        // verify agrees (its rebuild skips the same events) and says so in a warning.
        let report = try app.maintenance.verify()
        #expect(report.isHealthy, "\(report.findings)")
        #expect(report.warnings.contains { if case .appProjectionSkippedEvents(TaskList.name, 1, 2, let last) = $0 { last.contains("event 3") } else { false } }, "\(report.warnings)")
    }

    @Test func droppingAProjectionDeletesItsStateAndLetsCompactionTrim() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        let app = try Ledger(path: path, options: options("app"))
        for i in 0..<10 { try app.append(TaskAdded(id: "t\(i)", title: "task", day: 1)) }
        let plain = try Ledger(path: path, options: LedgerOptions(role: "compactor"))
        for i in 0..<3 { try plain.append(TaskDone(id: "t\(i)")) }
        var policy = CompactionPolicy()
        policy.retainedTail = 0
        #expect(try Compactor(ledger: plain, policy: policy).runOnce().blockers.contains(.projection(name: TaskList.name, through: 10)))
        try plain.projections.drop(named: TaskList.name)
        #expect(try plain.projections.list().isEmpty)
        let dump = try plain.read("count") { tables -> Int in
            var n = 0
            try tables.projections.scan(.apps, from: []) { _, _ in n += 1; return true }
            return n
        }
        #expect(dump == 0, "no row, index entry, document or record is left")
        #expect(try Compactor(ledger: plain, policy: policy).runOnce().blockers.isEmpty)
        #expect(try plain.read({ try $0.firstSequence() }) == 14)
        try plain.projections.drop(named: TaskList.name)  // again: nothing to do
    }
}

/// Why `Strict` refuses an event, with the context it was seen in.
enum TaskListError: Error, CustomStringConvertible {
    case unknownTask(String, ProjectionApplyContext)
    var description: String {
        switch self {
        case .unknownTask(let id, let context): "no task '\(id)' (\(context == .appending ? "appending" : "replaying"))"
        }
    }
}

extension AppProjectionTests {
    @Test func theOldVersionStaysExactWhileANewOneIsBuiltAndAfter() throws {
        var generator = SeededGenerator(seed: 7)
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        let v1 = try Ledger(path: path, options: options("widget"))
        let plain = try Ledger(path: path, options: LedgerOptions(role: "extension"))
        var asked = options("host", [TaskListV2.self])
        asked.projectionBuilds = .whenAsked
        var v2: Ledger?
        var all: [Event] = []
        for round in 0..<400 {
            let role = ["host", "widget", "extension"][Int.random(in: 0..<3, using: &generator)]
            let events = try TaskWorkload.batch(role: role, using: &generator)
            let writer: Ledger = role == "widget" ? v1 : role == "host" ? (v2 ?? plain) : plain
            try writer.append(contentsOf: events)
            if round == 100 { v2 = try Ledger(path: path, options: asked) }
            if round == 300 { try v2?.projections.build() }
            all = try v1.read { try $0.events(after: 0) }
            var model = TaskListModel(.v1)
            try model.fold(all)
            let contents = Result { try v1.read { try $0.projection(TaskList.self).contents() } }
            switch contents {
            case .success(let contents):
                let mismatch = model.mismatch(contents)
                #expect(mismatch == nil, "round \(round)")
                if mismatch != nil { return }
            case .failure(let error):
                #expect(round >= 300, "round \(round): \(error)")
            }
        }
    }
}

extension AppProjectionTests {
    /// A projection whose apply stores what the event says, however large.
    struct Blobs: LedgerProjection {
        struct Row: Codable, Sendable, Equatable { var text: String }
        struct Document: Codable, Sendable, Equatable { var text = "" }
        struct Put: LedgerEvent {
            static let eventType = "com.example.blob-put"
            var bytes: Int
            var inDocument: Bool
        }
        static let name = "com.example.blobs"
        static let version = 1
        static let eventTypes: Set<String> = [Put.eventType]
        static let initialDocument = Document()
        static func apply(_ event: Event, to state: inout ProjectionUpdate<Blobs>) throws {
            let put = try event.decode(as: Put.self)
            let text = String(repeating: "x", count: put.bytes)
            if put.inDocument { state.document.text = text } else { try state.set(Row(text: text), for: "blob") }
        }
    }

    @Test func aHundredMegabyteRowAndAFiveMegabyteDocumentAreRefusedWithNothingWritten() throws {
        let dir = TemporaryDirectory()
        let ledger = try Ledger(path: dir.child("l"), options: options("app", [Blobs.self]))
        try ledger.append(Blobs.Put(bytes: 60_000, inDocument: false))   // under the limit: kept
        try ledger.append(Blobs.Put(bytes: 60_000, inDocument: true))
        for (bytes, inDocument, what) in [(100 << 20, false, "row 'blob'"), (5 << 20, true, "the document")] {
            #expect {
                try ledger.append(Blobs.Put(bytes: bytes, inDocument: inDocument))
            } throws: { error in
                guard case LedgerError.projectionRejected(Blobs.name, _, Blobs.Put.eventType, let reason) = error else { return false }
                return reason.hasPrefix(what) && reason.contains("more than 65536")
            }
        }
        #expect(try ledger.read({ try $0.head() }) == 2, "nothing of a refused append is written")
        let state = try ledger.read { try $0.projection(Blobs.self).contents() }
        #expect(state.rows.first?.row.text.count == 60_000 && state.document.text.count == 60_000)
        #expect(try ledger.maintenance.verify().isHealthy)
    }

    @Test func anOpeningWithA200000EventBuildDueAppliesNothingAndTheBuildFinishesInSteps() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        let plain = try plainWriter(path)
        var generator = SeededGenerator(seed: 38)
        for block in 0..<200 {
            try plain.append(contentsOf: (0..<1_000).map { i in
                let id = "t\(Int.random(in: 0..<20_000, using: &generator))"
                return i % 5 == 4 ? try NewEvent(TaskDone(id: id)) : try NewEvent(TaskAdded(id: id, title: "task \(block)", day: Int64(i % 7)))
            })
        }
        var asked = options("widget")
        asked.projectionBuilds = .whenAsked
        let started = ContinuousClock.now
        let widget = try Ledger(path: path, options: asked)
        print("AppProjectionTests: an opening with a 200,000-event build due took \(ContinuousClock.now - started) (debug build; W9-O measures it)")
        // The opening created the record and applied nothing.
        let record = try #require(try widget.projections.list().first)
        #expect(record.status == "building" && record.appliedThrough == 0 && record.rows == 0)
        #expect(throws: LedgerError.projectionBuilding(name: TaskList.name, through: 0)) { try widget.read({ try $0.projection(TaskList.self).contents(limit: 5) }) }
        // The build, in steps (an append meanwhile goes through), then the model's state.
        try plain.append(TaskAdded(id: "late", title: "late", day: 0))
        try widget.projections.build()
        let contents = try widget.read({ try $0.projection(TaskList.self).contents() })
        #expect(try foldedLog(plain).mismatch(contents) == nil)
        #expect(contents.head == 200_001 && contents.behind == 0)
    }

    /// A step stages its events in a read transaction and writes them only if the record is
    /// still the one it staged from: a registered append between the two (it catches the
    /// projection up itself and applies its own event) makes the staged changes stale — written,
    /// they would take the projection back to before that append, and re-applying the append
    /// would count its task twice in the document.
    @Test func aStepStagedBeforeAnotherWriterCaughtUpWritesNothingStaleAndTheStateMatchesTheModel() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        let app = try Ledger(path: path, options: whenAsked("app"))
        try app.append(TaskAdded(id: "t0", title: "first", day: 0))
        // 800 events from a process without the projection (fewer than an append catches up).
        let plain = try plainWriter(path)
        var generator = SeededGenerator(seed: 3838)
        try plain.append(contentsOf: (0..<800).map { i in
            let id = "t\(Int.random(in: 0..<300, using: &generator))"
            return i % 4 == 3 ? try NewEvent(TaskDone(id: id)) : try NewEvent(TaskAdded(id: id, title: "task \(i % 9)", day: Int64(i % 5)))
        })
        let build = AppProjectionBuild(access: app.access)
        let staged = try #require(try build.plan())
        #expect(staged.isStaged, "a catch-up is staged outside the writer lock")
        // Meanwhile a registered writer appends: it catches the 800 up and applies its own task.
        let other = try Ledger(path: path, options: options("widget"))
        try other.append(TaskAdded(id: "fresh", title: "fresh", day: 1))
        #expect(try #require(try app.projections.list().first).appliedThrough == 802)
        _ = try build.perform(staged)
        try plain.append(TaskAdded(id: "late", title: "late", day: 9))
        try app.projections.build()
        let contents = try app.read({ try $0.projection(TaskList.self).contents() })
        #expect(try foldedLog(plain).mismatch(contents) == nil)
        #expect(contents.head == 803 && contents.behind == 0)
        #expect(try app.maintenance.verify().isHealthy)
    }

    /// docs/semantics.md, "Bounded catch-up": a read further behind than a read replays answers
    /// from the stored state with the first ``AppProjectionBounds/catchUp`` events applied and
    /// says how many it does not reflect; a registered append that far behind stores that many
    /// and leaves the rest (its own event included) to the builder, which ends exact.
    @Test func aReadFurtherBehindThanTheBoundSaysHowFarAndTheBuilderCatchesUp() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        let app = try Ledger(path: path, options: whenAsked("app"))
        try app.append(TaskAdded(id: "t0", title: "first", day: 0))
        let bound = AppProjectionBounds.catchUp
        let plain = try plainWriter(path)
        var generator = SeededGenerator(seed: 357)
        let extra = 700
        try plain.append(contentsOf: (0..<(bound + extra)).map { i in
            let id = "t\(Int.random(in: 0..<400, using: &generator))"
            return i % 3 == 2 ? try NewEvent(TaskDone(id: id)) : try NewEvent(TaskAdded(id: id, title: "task \(i % 7)", day: Int64(i % 4)))
        })
        let log = try plain.read { try $0.events(after: 0, limit: 10_000) }
        func model(through head: UInt64) throws -> TaskListModel {
            var model = TaskListModel(.v1)
            try model.fold(log.filter { $0.sequence <= head })
            return model
        }
        // A read-only widget: the first `bound` events applied, `extra` not.
        var readOnly = options("widget")
        readOnly.readOnly = true
        let widget = try Ledger(path: path, options: readOnly)
        let seen = try widget.read({ try $0.projection(TaskList.self).contents() })
        #expect(seen.head == UInt64(1 + bound) && seen.behind == UInt64(extra), "head \(seen.head), behind \(seen.behind)")
        #expect(try model(through: seen.head).mismatch(seen) == nil)
        #expect(try app.projections.list().first?.appliedThrough == 1, "a read writes nothing")
        // A registered append as far behind: stores `bound`, leaves the rest and its own event.
        try app.append(TaskAdded(id: "mine", title: "mine", day: 3))
        let stored = try #require(try app.projections.list().first).appliedThrough
        #expect(stored == UInt64(1 + bound), "stored through \(stored)")
        let after = try widget.read({ try $0.projection(TaskList.self).contents() })
        #expect(after.head == UInt64(2 + bound + extra) && after.behind == 0, "head \(after.head), behind \(after.behind)")
        // The builder stores the rest; then every read is exact and has nothing to replay.
        try app.projections.build()
        #expect(try app.projections.list().first?.appliedThrough == UInt64(2 + bound + extra))
        #expect(try foldedLog(plain).mismatch(try widget.read({ try $0.projection(TaskList.self).contents() })) == nil)
        #expect(try app.maintenance.verify().isHealthy)
    }

    /// A projection registered on a log with few events (an app update that adds one): its
    /// build has at most the bound left, so a read answers it exactly (replayed in memory,
    /// nothing written) and the first registered append finishes it in its own transaction.
    @Test func aBuildWithinTheBoundIsReadExactlyAndFinishedByTheNextAppend() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        let plain = try plainWriter(path)
        try plain.append(TaskAdded(id: "t1", title: "Milk", day: 1))
        try plain.append(TaskAdded(id: "t2", title: "Eggs", day: 0))
        try plain.append(TaskDone(id: "t1"))
        let app = try Ledger(path: path, options: whenAsked("app"))
        #expect(try app.projections.list().map(\.status) == ["building"])
        var model = try foldedLog(plain)
        let read = try app.read({ try $0.projection(TaskList.self).contents() })
        #expect(model.mismatch(read) == nil && read.head == 3 && read.behind == 0)
        #expect(try app.projections.list().first?.appliedThrough == 0, "a read writes nothing")
        // The append applies the three, switches the version to ready and applies its own event.
        try app.append(TaskRemoved(id: "t2"))
        let record = try #require(try app.projections.list().first)
        #expect(record.status == "ready" && record.appliedThrough == 4 && record.rows == 1)
        try model.fold(try plain.read { try $0.events(after: 3, limit: 10) })
        #expect(model.mismatch(try app.read({ try $0.projection(TaskList.self).contents() })) == nil)
        #expect(try app.maintenance.verify().isHealthy)
    }

    /// A drop while another handle that registers the projection builds it in the background:
    /// the drop ends (no build step clears and rebuilds the version under it: the record holds
    /// the drop's lease), and the background builder does not create it again — an opening does.
    @Test func aDropBesideARegisteredBackgroundBuilderEndsAndStaysDropped() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        let plain = try plainWriter(path)
        try addTasks(plain, count: 20_000)
        let app = try Ledger(path: path, options: options("app"))  // its builder starts
        #expect(try app.projections.list().map(\.status) == ["building"])
        try plain.projections.drop(named: TaskList.name)
        #expect(try plain.projections.list().isEmpty)
        // What the app's background builder would do next: nothing (it never creates).
        #expect(try AppProjectionBuild(access: app.access).step(creating: false) == .idle)
        #expect(try app.projections.list().isEmpty)
        // Its reads say what happened and what brings it back (an outsider found the older text misleading).
        #expect {
            try app.read({ try $0.projection(TaskList.self).rows(limit: 1) })
        } throws: { error in
            guard case LedgerError.projectionUnavailable(_, let reason) = error else { return false }
            return reason.contains("dropped") && reason.contains("projections.build()")
        }
        // The app's next opening creates it again, and its build ends with every task.
        let reopened = try Ledger(path: path, options: whenAsked("app"))
        try reopened.projections.build()
        #expect(try reopened.read({ try $0.projection(TaskList.self).contents(limit: 1) }).rowCount == 20_000)
    }

    /// `verify` between two transactions of a drop (or after a drop interrupted there): the
    /// version is `clearing` and half its entries are gone — only its record is checked, so
    /// there is no finding; the drop then ends, and `verify` is still healthy.
    @Test func verifyInTheMiddleOfADropFindsNothing() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        var asked = whenAsked("app")
        asked.durability = .none
        let app = try Ledger(path: path, options: asked)
        try addTasks(app, count: 3_000)
        let plain = try plainWriter(path)
        // The drop's first transaction, as `drop(named:)` makes it: the record marked, a chunk deleted.
        try plain.write("the first transaction of a drop") { tables in
            let store = tables.projections
            var meta = try #require(try AppProjectionTable.versions(of: TaskList.name, in: store, path: path).first)
            meta.status = .clearing
            meta.rows = 0
            meta.droppingUntil = app.access.options.clock.now().micros + AppProjectionMeta.dropLeaseMicros  // as a drop in progress
            try AppProjectionTable.putMeta(meta, in: store)
            #expect(try AppProjectionTable.clear(AppProjectionSpace(meta), in: store, limit: ProjectionBuildPacing.dropChunk) == ProjectionBuildPacing.dropChunk)
        }
        #expect(try plain.maintenance.verify().isHealthy)
        #expect(throws: LedgerError.self) { try app.read({ try $0.projection(TaskList.self).rows(limit: 1) }) }
        try plain.projections.drop(named: TaskList.name)
        #expect(try plain.projections.list().isEmpty)
        #expect(try plain.maintenance.verify().isHealthy)
    }

    /// A drop that stopped half-way (its process killed, or an error between its
    /// transactions): while its lease holds no build step touches the version; once it has
    /// passed, a build that registers the projection clears it and builds it again, exact.
    @Test func aDropStoppedHalfWayIsLeftAloneWhileItsLeaseHoldsThenRebuilt() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        let app = try Ledger(path: path, options: whenAsked("app"))
        try addTasks(app, count: 3_000)
        let now = app.access.options.clock.now().micros
        try stopDropHalfWay(app, leaseUntil: now + 30_000_000)
        #expect(try AppProjectionBuild(access: app.access).step() == .idle, "a step touched a version under a drop's lease")
        #expect(try app.projections.list().map(\.status) == ["clearing"])
        // The lease passed (the dropper is gone): the build clears and rebuilds it.
        try app.write("the lease passes") { tables in
            let store = tables.projections
            var meta = try #require(try AppProjectionTable.versions(of: TaskList.name, in: store, path: path).first)
            meta.droppingUntil = now - 1
            try AppProjectionTable.putMeta(meta, in: store)
        }
        try buildAndExpectExact(app, rows: 3_000)
        #expect(try app.maintenance.verify().isHealthy)
    }

    /// A drop stopped half-way whose lease was written by a clock an hour ahead (set wrong, or
    /// jumped back since) does not hold the version `clearing` for that hour: the next build
    /// clears and rebuilds it.
    @Test func aDropLeaseFromAClockThatJumpedIsNotHonoured() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        let app = try Ledger(path: path, options: whenAsked("app"))
        try addTasks(app, count: 1_500)
        try stopDropHalfWay(app, leaseUntil: app.access.options.clock.now().micros + 3_600_000_000)
        #expect(try AppProjectionBuild(access: app.access).step() != .idle, "a lease an hour ahead kept the build off the version")
        try buildAndExpectExact(app, rows: 1_500)
    }

    /// `projections.build()`, then the task list ready with `rows` rows and equal to the model's
    /// fold of the log.
    private func buildAndExpectExact(_ app: Ledger, rows: Int) throws {
        try app.projections.build()
        let record = try #require(try app.projections.list().first)
        #expect(record.status == "ready" && record.rows == rows)
        #expect(try foldedLog(app).mismatch(try app.read({ try $0.projection(TaskList.self).contents() })) == nil)
    }

    /// The first transaction of a drop of `app`'s task list, and no more: the version marked
    /// `clearing` under a lease until `leaseUntil`, a chunk of its state deleted.
    private func stopDropHalfWay(_ app: Ledger, leaseUntil: Int64) throws {
        let path = app.path
        try app.write("a drop's first transaction") { tables in
            let store = tables.projections
            var meta = try #require(try AppProjectionTable.versions(of: TaskList.name, in: store, path: path).first)
            meta.status = .clearing
            meta.rows = 0
            meta.droppingUntil = leaseUntil
            try AppProjectionTable.putMeta(meta, in: store)
            _ = try AppProjectionTable.clear(AppProjectionSpace(meta), in: store, limit: ProjectionBuildPacing.dropChunk)
        }
    }

    /// A handle keeps the last `contents(limit:)` it read of a state by that state's record:
    /// a warm read returns it, and any change — an append of this or another handle, another
    /// limit, events another process appended (replayed, never kept) — reads anew.
    @Test func warmContentsAreTheStoredStateAfterEveryKindOfChange() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("l")
        let app = try Ledger(path: path, options: whenAsked("app"))
        let widget = try Ledger(path: path, options: whenAsked("widget"))
        let plain = try plainWriter(path)
        var model = TaskListModel(.v1)
        func expectCurrent(_ note: Comment) throws {
            try model.fold(try plain.read { try $0.events(after: model.through, limit: 1_000) })
            // Each round starts with the limit the last one ended with: a cache not keyed by
            // the state would answer it with the old state.
            for limit in [.max, 1, 3, .max] {
                let read = try app.read({ try $0.projection(TaskList.self).contents(limit: limit) })
                #expect(read == (try app.read({ try $0.projection(TaskList.self).contents(limit: limit) })), note)  // warm: the same
                #expect(read.rows.count == min(limit, model.rows.count), note)
                if limit == .max { #expect(model.mismatch(read) == nil, note) }
            }
        }
        try app.append(TaskAdded(id: "a", title: "A", day: 2))
        try app.append(TaskAdded(id: "b", title: "B", day: 1))
        try expectCurrent("own appends")
        try widget.append(TaskDone(id: "b"))
        try expectCurrent("another handle's append")
        try plain.append(TaskAdded(id: "c", title: "C", day: 0))
        try expectCurrent("a process without the projection (replayed)")
        try app.append(TaskRemoved(id: "a"))
        try expectCurrent("the replay stored by the next append")
    }
}
