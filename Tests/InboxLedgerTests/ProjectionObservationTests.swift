import Foundation
import Synchronization
import Testing
import TestSupport
@testable import InboxLedger

/// An app projection observed (docs/apps.md, "Your own read models"): the state at once, then
/// each distinct new state after commits of any process — here `ledger append`, a process that
/// does not register the projection, so the observer's reads apply its events in memory —
/// bursts coalesced, ending cleanly on cancellation; and `ProjectionModel` over it.
@Suite(.serialized) struct ProjectionObservationTests {
    let cli = Processes.product("ledger")

    func tasksLedger(_ role: String = "app") throws -> TestLedger {
        try TestLedger(role: role) { $0.projections = [TaskList.self] }
    }

    /// Appends `lines` from another process (`ledger append`, one transaction per line).
    func appendFromAnotherProcess(_ path: String, origin: String = "app", _ lines: [String]) throws {
        let out = try Processes.run(cli, ["append", path, "--origin", origin], input: Data((lines.joined(separator: "\n") + "\n").utf8))
        #expect(out.status == 0, "ledger append failed: \(out.stderr)")
    }

    func added(_ id: String, _ title: String, day: Int64 = 20_000) -> String {
        #"{"type":"com.example.task-added","data":{"id":"\#(id)","title":"\#(title)","day":\#(day)}}"#
    }

    func done(_ id: String) -> String { #"{"type":"com.example.task-done","data":{"id":"\#(id)"}}"# }

    /// Polls on the main actor until `condition` holds (the test's time limit bounds it).
    @MainActor func waitUntil(_ condition: @MainActor () -> Bool) async throws {
        while !condition() { try await Task.sleep(for: .milliseconds(5)) }
    }

    @Test(.timeLimit(.minutes(10))) func anotherProcessesAppendReachesTheObservedProjection() async throws {
        let t = try tasksLedger("widget")
        let seen = Mutex<[ProjectionContents<TaskList>]>([])
        let observer = Task {
            for try await state in LedgerObservation.tracking({ try $0.projection(TaskList.self).contents(limit: 5) }).removingDuplicates(by: { $0.sameState(as: $1) }).values(in: t.ledger) { seen.withLock { $0.append(state) } }
        }
        defer { observer.cancel() }
        while seen.withLock({ $0.isEmpty }) { try await Task.sleep(for: .milliseconds(5)) }
        #expect(seen.withLock { $0[0].rows.isEmpty && $0[0].rowCount == 0 })

        try appendFromAnotherProcess(t.path, [added("t1", "Water the plants")])
        while seen.withLock({ $0.count < 2 }) { try await Task.sleep(for: .milliseconds(5)) }
        let second = seen.withLock { $0[1] }
        #expect(second.rows.map(\.key) == ["t1"])
        #expect(second.rows.first?.row == TaskList.Row(title: "Water the plants", day: 20_000, done: false))
        #expect(second.document == TaskList.Document(open: 1, done: 0))

        // An event the projection does not read (another process's, committed on its own)
        // leaves the state as it was: it yields nothing, though the head moved. The widget's
        // tap then does.
        try appendFromAnotherProcess(t.path, [#"{"type":"com.example.unrelated","data":{}}"#])
        try appendFromAnotherProcess(t.path, origin: "widget", [done("t1")])
        while seen.withLock({ $0.count < 3 }) { try await Task.sleep(for: .milliseconds(5)) }
        let values = seen.withLock { $0 }
        #expect(values.count == 3, "a commit that did not change the projection yielded a value: \(values.map(\.head))")
        #expect(values[2].rows.first?.row.done == true)
        #expect(values[2].document == TaskList.Document(open: 0, done: 1))
        let head = try await t.ledger.read({ try $0.head() })
        #expect(values[2].head == head)
    }

    @Test(.timeLimit(.minutes(10))) func aBurstOfAnotherProcessesCommitsIsCoalescedAndEndsAtTheFinalState() async throws {
        let t = try tasksLedger()
        let burst = 300
        let seen = Mutex<[Int]>([])
        let observer = Task {
            for try await state in LedgerObservation.tracking({ try $0.projection(TaskList.self).contents(limit: 3) }).removingDuplicates(by: { $0.sameState(as: $1) }).values(in: t.ledger) {
                seen.withLock { $0.append(state.rowCount) }
                #expect(state.rows.count == min(3, state.rowCount))
                if state.rowCount == burst { return }
                try await Task.sleep(for: .milliseconds(20))  // a consumer slower than the commits
            }
        }
        while seen.withLock({ $0.isEmpty }) { try await Task.sleep(for: .milliseconds(5)) }
        try appendFromAnotherProcess(t.path, (0..<burst).map { added("t\($0)", "Task \($0)") })
        try await observer.value
        let counts = seen.withLock { $0 }
        #expect(counts.first == 0 && counts.last == burst)
        #expect(counts.count < burst / 4, "\(counts.count) values for \(burst) commits: not coalesced")
        #expect(zip(counts, counts.dropFirst()).allSatisfy { $0 < $1 }, "a state repeated or went back: \(counts)")
        print("\(burst) commits by another process observed as \(counts.count) projection states")
    }

    @Test(.timeLimit(.minutes(10))) func cancellationEndsTheSequence() async throws {
        let t = try tasksLedger()
        let received = Mutex(0)
        let observer = Task {
            for try await _ in LedgerObservation.tracking({ try $0.projection(TaskList.self).contents() }).removingDuplicates(by: { $0.sameState(as: $1) }).values(in: t.ledger) { received.withLock { $0 += 1 } }
            return "ended"
        }
        while received.withLock({ $0 == 0 }) { try await Task.sleep(for: .milliseconds(5)) }
        observer.cancel()
        #expect(try await observer.value == "ended", "cancellation did not end the sequence cleanly")
    }

    @MainActor @Test(.timeLimit(.minutes(10))) func theModelFollowsAnotherProcessAndStopsAndRestarts() async throws {
        let t = try tasksLedger("app")
        let model = ProjectionModel(TaskList.self, in: t.ledger, limit: 10)
        #expect(model.contents == nil && model.rows.isEmpty && model.document == TaskList.initialDocument && !model.isRunning)

        model.start()
        #expect(model.isRunning)
        try await waitUntil { model.contents != nil }
        #expect(model.rows.isEmpty)

        try appendFromAnotherProcess(t.path, [added("t1", "Call the bank", day: 20_001), added("t2", "Buy milk", day: 20_000)])
        try await waitUntil { model.contents?.rowCount == 2 }
        #expect(model.rows.map(\.key) == ["t2", "t1"], "open tasks by day")

        try appendFromAnotherProcess(t.path, origin: "widget", [done("t2")])
        try await waitUntil { model.document.done == 1 }
        #expect(model.rows.map(\.key) == ["t1", "t2"], "done tasks last")
        #expect(model.error == nil)

        model.stop()
        #expect(!model.isRunning)
        let kept = model.contents
        try appendFromAnotherProcess(t.path, [added("t3", "Book flights")])
        #expect(model.contents == kept, "stop() keeps the last state")

        model.start()   // again: the state now, with what was appended while stopped
        try await waitUntil { model.contents?.rowCount == 3 }
        model.stop()
        model.stop()    // twice: nothing more
        #expect(!model.isRunning && model.error == nil)
    }

    @MainActor @Test(.timeLimit(.minutes(10))) func runEndsWhenItsTaskIsCancelled() async throws {
        let t = try tasksLedger()
        let model = ProjectionModel(TaskList.self, in: t.ledger)
        let runner = Task { await model.run() }   // what `.task { await model.run() }` does
        try await waitUntil { model.contents != nil }
        #expect(model.isRunning)
        runner.cancel()
        await runner.value
        #expect(!model.isRunning)
        #expect(model.error == nil, "a cancellation is no error")
    }

    @MainActor @Test(.timeLimit(.minutes(10))) func aProjectionThisProcessCannotReadEndsTheModelWithTheError() async throws {
        let t = try tasksLedger()
        let model = ProjectionModel(TaskListV2.self, in: t.ledger)   // not registered by this handle
        await model.run()
        guard case .projectionUnavailable(let name, _)? = model.error as? LedgerError else {
            Issue.record("expected projectionUnavailable, got \(String(describing: model.error))")
            return
        }
        #expect(name == TaskList.name)
        #expect(model.contents == nil && !model.isRunning)
    }

    @MainActor @Test(.timeLimit(.minutes(10))) func aReleasedModelEndsItsObservation() async throws {
        let t = try tasksLedger()
        weak var released: ProjectionModel<TaskList>?
        do {
            let model = ProjectionModel(TaskList.self, in: t.ledger)
            released = model
            model.start()
            try await waitUntil { model.contents != nil }
        }
        #expect(released == nil, "the model's task keeps it alive")
    }
}
