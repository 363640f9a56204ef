import Foundation
import Testing
import TestSupport
@testable import InboxLedger

/// The async forms never block a thread of the cooperative pool (a 2-core machine has two):
/// while another process holds the write lock, 64 async appends wait and the pool keeps
/// running other tasks; cancellation before the commit starts withdraws the append.
@Suite(.serialized) struct AsyncAPITests {
    let agent = Processes.product("LedgerTestAgent")

    /// A ledger with one event and another process inside a write transaction (holding the
    /// write lock until it is killed).
    /// Waits (polling, up to 60 s on a loaded machine) until `condition` holds.
    func waitUntil(_ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(hangGuardSeconds)
        while !condition() {
            guard ContinuousClock.now < deadline else { Issue.record("condition not reached in \(Int(hangGuardSeconds)) s: a hang"); return }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    func ledgerWithStalledWriter(_ dir: TemporaryDirectory) throws -> (Ledger, RunningProcess) {
        let path = dir.child("ledger")
        var options = LedgerOptions(role: "app")
        // Long enough for the test even while other suites keep the pool busy (the whole suite
        // runs in parallel), short enough that an implementation blocking the pool fails (its
        // appends time out) before the time limit.
        options.writeTimeout = 100
        let ledger = try Ledger(path: path, options: options)
        try ledger.append(event())
        let staller = try Processes.start(agent, ["stall-in-write", path, "300"])
        #expect(line(staller, startingWith: "in-txn") != nil)
        return (ledger, staller)
    }

    @Test(.timeLimit(.minutes(10))) func sixtyFourAsyncAppendsWaitWithoutBlockingThePool() async throws {
        let dir = TemporaryDirectory()
        let (ledger, staller) = try ledgerWithStalledWriter(dir)
        defer { staller.kill(); _ = try? staller.wait(timeout: 10) }
        let appends = Task {
            try await withThrowingTaskGroup(of: UInt64.self) { group in
                for i in 0..<64 { group.addTask { try await ledger.append(AppendRequest([event("async.append", #"{"i":\#(i)}"#)])).sequences[0] } }
                return try await group.reduce(into: [UInt64]()) { $0.append($1) }
            }
        }
        // The pool is free: tasks that sleep and resume (they need a pool thread each time), an
        // async read, all finish while the appends still wait for the other process.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<32 { group.addTask { for _ in 0..<5 { try await Task.sleep(for: .milliseconds(2)) } } }
            try await group.waitForAll()
        }
        let list = try await ledger.read({ try $0.widgetList() })
        #expect(list.version == 0)
        #expect(try await ledger.read({ try $0.head() }) == 1, "the appends did not wait for the write lock")
        staller.kill()
        let sequences = try await appends.value
        #expect(sequences.sorted() == Array(2...65))
        // They were committed together (group commit), not one transaction each.
        let commits = Set(try await ledger.read({ try $0.events(after: 1, limit: 100) }).map(\.timestampMicros))
        #expect(commits.count <= 3, "64 waiting appends took \(commits.count) commits")
    }

    @Test(.timeLimit(.minutes(10))) func cancellationBeforeTheCommitWithdrawsTheAppend() async throws {
        let dir = TemporaryDirectory()
        let (ledger, staller) = try ledgerWithStalledWriter(dir)
        defer { staller.kill(); _ = try? staller.wait(timeout: 10) }
        // The first append is taken by the commit leader, which waits for the lock.
        let first = Task { try await ledger.append(AppendRequest([event("first")])).sequences[0] }
        try await waitUntil { ledger.log.commitQueue.progress.leading }
        let queued = (0..<10).map { i in Task { try await ledger.append(AppendRequest([event("queued", #"{"i":\#(i)}"#)])).sequences[0] } }
        try await waitUntil { ledger.log.commitQueue.progress.asyncWaiting == 10 }
        for task in queued.prefix(5) { task.cancel() }
        // Cancelled requests return at once, while the other process still holds the lock.
        for task in queued.prefix(5) {
            await #expect(throws: LedgerError.cancelled) { try await task.value }
        }
        #expect(try await ledger.read({ try $0.head() }) == 1)
        // The one whose commit had started is not cancelled by cancelling its task.
        first.cancel()
        staller.kill()
        #expect(try await first.value == 2)
        var kept: [UInt64] = []
        for task in queued.suffix(5) { kept.append(try await task.value) }
        #expect(kept.sorted() == Array(3...7))
        let stored = try await ledger.read({ try $0.events(after: 1) }).map { String(decoding: $0.payload, as: UTF8.self) }
        #expect(stored.count == 6 && !stored.contains(#"{"i":0}"#) && stored.contains(#"{"i":9}"#))
        // A task cancelled before it asks appends nothing at all.
        let early = Task {
            try await Task.sleep(for: .seconds(10))
            return try await ledger.append(AppendRequest([event("never")])).sequences[0]
        }
        early.cancel()
        await #expect(throws: CancellationError.self) { try await early.value }
        #expect(try await ledger.read({ try $0.head() }) == 7)
    }

    @Test func asyncReadsAndConsumersReturnWhatTheBlockingOnesDo() async throws {
        let t = try TestLedger(role: "widget")
        try await t.ledger.append(.inboxSynced(InboxSync(mode: .delta, messages: [
            InboxMessage(id: "m1", title: "Hi", sentAt: Timestamp(iso8601: "2026-11-22T08:00:00Z")!),
        ])))
        try await t.ledger.append(.widgetAction(WidgetAction(actionID: "a", kind: .openMessage, target: "m1")))
        let syncList = try { () throws(LedgerError) in try t.ledger.read({ try $0.widgetList() }) }()
        #expect(try await t.ledger.read({ try $0.widgetList() }) == syncList)
        #expect(try await t.ledger.read({ try $0.badge() }) == 1)
        #expect(try await t.ledger.read({ try $0.pendingActions() }).map(\.actionID) == ["a"])
        #expect(try await t.ledger.read({ try $0.events(after: 0) }).count == 2)
        let host = try await t.ledger.consumers.consumer(named: "host")
        let batch = try await host.next()
        #expect(batch.events.count == 2)
        try await host.commit(batch, appending: [try DomainEvent.actionCompleted(ActionCompletion(actionID: "a", outcome: .done)).newEvent()])
        #expect(try host.cursor() == 2)
        #expect(try await t.ledger.read({ try $0.pendingActions() }).isEmpty)
        // A stale batch is a conflict, as in the blocking form.
        await #expect(throws: LedgerError.consumerConflict(name: "host", expected: 0, actual: 2)) { try await host.commit(batch) }
    }
}
