import Foundation
import Testing
import TestSupport
@testable import InboxLedger
import LMDB

@Suite struct ConsumerTests {
    @Test func commitMovesTheCursorTogetherWithTheAppendedEvents() throws {
        let t = try TestLedger()
        try t.ledger.append(.widgetAction(WidgetAction(actionID: "a1", kind: .markTaskDone, target: "t1")))
        try t.ledger.append(.widgetAction(WidgetAction(actionID: "a2", kind: .markTaskDone, target: "t2")))
        let host = try t.ledger.consumers.consumer(named: "host-app")
        let batch = try host.next(limit: 10)
        #expect(batch.after == 0)
        #expect(batch.events.map(\.sequence) == [1, 2])
        let completions = try ["a1", "a2"].map { try DomainEvent.actionCompleted(ActionCompletion(actionID: $0, outcome: .done)).newEvent() }
        let receipt = try host.commit(batch, appending: completions)
        #expect(receipt.sequences == [3, 4])
        #expect(try host.cursor() == 2)
        #expect(try t.ledger.read({ try $0.pendingActions() }).isEmpty)
        // Next time it sees its own completions, then nothing.
        let next = try host.next()
        #expect(next.events.map(\.type) == ["action.completed", "action.completed"])
        try host.commit(next)
        #expect(try host.next().events.isEmpty)
        #expect(try host.cursor() == 4)
    }

    @Test func aSecondInstanceThatReadTheSameBatchCannotCommitIt() throws {
        let t = try TestLedger()
        try t.ledger.append(.widgetAction(WidgetAction(actionID: "a1", kind: .markTaskDone, target: "t1")))
        let first = try t.ledger.consumers.consumer(named: "host-app")
        let second = try t.ledger.consumers.consumer(named: "host-app")
        let b1 = try first.next()
        let b2 = try second.next()
        let done = try DomainEvent.actionCompleted(ActionCompletion(actionID: "a1", outcome: .done)).newEvent()
        try first.commit(b1, appending: [done])
        #expect(throws: LedgerError.consumerConflict(name: "host-app", expected: 0, actual: 1)) {
            try second.commit(b2, appending: [done])
        }
        // Exactly one completion was recorded.
        #expect(try t.ledger.read({ try $0.events() }).filter { $0.type == "action.completed" }.count == 1)
    }

    @Test func aFailedCommitWritesNothing() throws {
        let t = try TestLedger()
        try t.ledger.append(event())
        try t.ledger.append(event("t", "1", key: "k"))
        let c = try t.ledger.consumers.consumer(named: "c")
        let batch = try c.next()
        #expect(throws: LedgerError.idempotencyConflict(key: "k", existingSequence: 2)) {
            try c.commit(batch, appending: [event("t", "2", key: "k")])
        }
        #expect(try c.cursor() == 0)
        #expect(try t.ledger.read({ try $0.count() }) == 2)
    }

    @Test func startingAtTheEndSkipsHistory() throws {
        let t = try TestLedger()
        try t.ledger.append(contentsOf: [event(), event()])
        let c = try t.ledger.consumers.consumer(named: "late", startingAt: .end)
        #expect(try c.cursor() == 2)
        try t.ledger.append(event())
        #expect(try c.next().events.map(\.sequence) == [3])
    }

    @Test func consumersReportCursorLagAndLease() throws {
        let t = try TestLedger()
        try t.ledger.append(contentsOf: [event(), event(), event()])
        let c = try t.ledger.consumers.consumer(named: "widget-refresh")
        try c.commit(try c.next(limit: 1))
        let before = try #require(try t.ledger.consumers.list().first)
        #expect(before.name == "widget-refresh" && before.cursor == 1 && before.lag == 2)
        usleep(2000)
        try c.heartbeat()
        let after = try #require(try t.ledger.consumers.list().first)
        #expect(after.lastSeen > before.lastSeen)
        #expect(after.cursor == 1)
        #expect(after.createdAt == before.createdAt)
        #expect(try t.ledger.consumers.drop(named: "widget-refresh"))
        #expect(try t.ledger.consumers.list().isEmpty)
        #expect(throws: LedgerError.unknownConsumer(name: "widget-refresh")) { try c.next() }
    }

    @Test func aCursorBelowTheFirstRetainedEventIsAGap() throws {
        let t = try TestLedger()
        try t.ledger.append(contentsOf: (0..<5).map { _ in event() })
        let c = try t.ledger.consumers.consumer(named: "slow")
        try c.commit(try c.next(limit: 1))
        // Trim 1...3 behind the ledger's back, as compaction will.
        let env = try Environment.open(directory: t.path, configuration: EnvironmentConfiguration())
        let events = try env.database("events")
        try env.write { txn in for s in 1...3 { try txn.delete(events, key: SequenceKey.encode(UInt64(s))) } }
        #expect(try t.ledger.read({ try $0.firstSequence() }) == 4)
        #expect(throws: LedgerError.consumerGap(name: "slow", cursor: 1, firstAvailable: 4)) { try c.next() }
    }
}

@Suite(.serialized) struct ChangeNotificationTests {
    let agent = Processes.product("LedgerTestAgent")

    @Test func waiterInThisProcessWakesForAnAppend() async throws {
        let t = try TestLedger()
        let head = try await t.ledger.read({ try $0.head() })
        let ledger = t.ledger
        let appender = Task.detached {
            try await Task.sleep(for: .milliseconds(50))
            return try await ledger.append(AppendRequest([event()])).sequences[0]
        }
        let woke = try await ledger.waitForChange(after: head)
        #expect(woke == (try await appender.value))
    }

    @Test func anotherProcessWakesForOurCommit() throws {
        let t = try TestLedger()
        try t.ledger.append(event())
        let watcher = try Processes.start(agent, ["wait-change", t.path, "1"])
        #expect(watcher.waitForOutput(containing: "waiting"), "\(watcher.stdoutSoFar)")
        usleep(100_000)  // let it park in its wait
        let seq = try t.ledger.append(event())
        let out = try watcher.wait(timeout: hangGuardSeconds)
        #expect(out.status == 0, "\(out.stderr)")
        let words = out.stdout.split(whereSeparator: \.isWhitespace)
        #expect(words.contains("woke"))
        #expect(words.count >= 4 && words[2] == Substring(String(seq)))
        if words.count >= 4 { print("cross-process wake-up latency: \(words[3]) µs") }
    }

    @Test func cancellingAWaitEndsIt() async throws {
        let t = try TestLedger()
        let ledger = t.ledger
        let task = Task { try await ledger.waitForChange(after: 0) }
        try await Task.sleep(for: .milliseconds(20))
        task.cancel()
        await #expect(throws: LedgerError.cancelled) { try await task.value }
    }

    @Test func changesStreamYieldsHeads() async throws {
        let t = try TestLedger()
        let ledger = t.ledger
        Task.detached {
            for _ in 0..<3 {
                try await Task.sleep(for: .milliseconds(20))
                try await ledger.append(AppendRequest([event()]))
            }
        }
        var seen: [UInt64] = []
        for try await head in ledger.changes(after: 0) {
            seen.append(head)
            if head >= 3 { break }
        }
        #expect(seen.last == 3)
        #expect(seen == seen.sorted())
    }
}
