import Foundation
import Testing
import TestSupport
@_spi(Testing) @testable import InboxLedger
import LMDB

func policy(tail: Int = 0, chunk: Int = 100, lease: Double = 3600, keys: Double = 3600, keep: Int = 2) -> CompactionPolicy {
    var p = CompactionPolicy()
    p.retainedTail = tail
    p.chunkSize = chunk
    p.consumerLeaseSeconds = lease
    p.keyRetentionSeconds = keys
    p.keepSnapshots = keep
    p.triggerEvents = 0
    return p
}

/// Appends `count` inbox events of every kind (syncs, reads, actions, completions, badge).
func appendMixed(_ ledger: Ledger, count: Int, seed: UInt64) throws {
    var rng = SeededGenerator(seed: seed)
    for i in 0..<count {
        let id = "m\(Int.random(in: 0..<30, using: &rng))"
        let event: DomainEvent = switch i % 5 {
        case 0: .inboxSynced(InboxSync(mode: i % 50 == 0 ? .full : .delta, messages: [msg(id, "title \(i)", read: Bool.random(using: &rng))]))
        case 1: .messageRead(ReadChange(ids: [id], read: Bool.random(using: &rng)))
        case 2: .widgetAction(WidgetAction(actionID: "a\(i)", kind: .markRead, target: id))
        case 3: .actionCompleted(ActionCompletion(actionID: "a\(i - 1 - 5 * Int.random(in: 0...3, using: &rng))", outcome: .done))
        default: .badgeAdjusted(.delta(Int.random(in: -2...2, using: &rng)))
        }
        try ledger.append(event, key: i % 7 == 0 ? "k\(seed)-\(i)" : nil)
    }
}

@Suite struct CompactionTests {
    @Test func trimsToTheTailOnASnapshotAndKeepsTheProjections() throws {
        let t = try TestLedger()
        try appendMixed(t.ledger, count: 2000, seed: 1)
        let before = try t.ledger.read({ try $0.widgetList(limit: 100) })
        let pendingBefore = try t.ledger.read({ try $0.pendingActions(limit: 1000) })
        let report = try Compactor(ledger: t.ledger, policy: policy(tail: 100, chunk: 150)).runOnce()
        #expect(report.trimmed == 1...1900)
        #expect(report.eventsTrimmed == 1900)
        #expect(report.chunks == 13)
        #expect(report.snapshotWritten && report.snapshotSequence == 2000)
        #expect(report.blockers == [.retainedTail(through: 1900)])
        #expect(try t.ledger.read({ try $0.firstSequence() }) == 1901)
        #expect(try t.ledger.read({ try $0.head() }) == 2000)
        #expect(try t.ledger.read({ try $0.count() }) == 100)
        #expect(try t.ledger.read({ try $0.widgetList(limit: 100) }) == before)
        #expect(try t.ledger.read({ try $0.pendingActions(limit: 1000) }) == pendingBefore)
        #expect(try t.ledger.maintenance.verifyProjections() == nil)
        // Counters now count what the log holds.
        let stats = try t.ledger.maintenance.statistics()
        #expect(stats.countsByType.values.reduce(0, +) == 100)
        #expect(stats.countsByOrigin.values.reduce(0, +) == 100)
        // Appending goes on, densely, and the rebuild still matches.
        try appendMixed(t.ledger, count: 50, seed: 2)
        #expect(try t.ledger.read({ try $0.events(after: 0, limit: 1) }).first?.sequence == 1901)
        #expect(try t.ledger.read({ try $0.head() }) == 2050)
        #expect(try t.ledger.maintenance.verifyProjections() == nil)
    }

    @Test func dryRunWritesNothing() throws {
        let t = try TestLedger()
        try appendMixed(t.ledger, count: 300, seed: 3)
        let c = try t.ledger.consumers.consumer(named: "host")
        try c.commit(try c.next(limit: 120))
        let report = try Compactor(ledger: t.ledger, policy: policy(tail: 10)).runOnce(dryRun: true)
        #expect(report.dryRun)
        #expect(report.trimmed == 1...120)
        #expect(report.blockers.contains(.consumer(name: "host", cursor: 120)))
        #expect(try t.ledger.read({ try $0.firstSequence() }) == 1)
        #expect(try t.ledger.maintenance.snapshots().isEmpty)
    }

    @Test func liveConsumersHoldTrimmingBackUntilTheirLeaseExpires() throws {
        let t = try TestLedger()
        try appendMixed(t.ledger, count: 500, seed: 4)
        let slow = try t.ledger.consumers.consumer(named: "slow")
        try slow.commit(try slow.next(limit: 200))
        var report = try Compactor(ledger: t.ledger, policy: policy(lease: 3600)).runOnce()
        #expect(report.trimmed == 1...200)
        #expect(report.blockers == [.consumer(name: "slow", cursor: 200)])
        #expect(try slow.next(limit: 1).events.first?.sequence == 201)
        // Silent for longer than the lease: no longer protected, reported, and it gets the gap.
        usleep(20_000)
        report = try Compactor(ledger: t.ledger, policy: policy(lease: 0.01)).runOnce()
        #expect(report.expiredConsumers == ["slow"])
        #expect(report.trimmed == 201...500)
        #expect(throws: LedgerError.consumerGap(name: "slow", cursor: 200, firstAvailable: 501)) { try slow.next() }
        // It rebases: cursor to the head; pending actions are still in the projection.
        #expect(try slow.rebase() == 500)
        #expect(try slow.next().events.isEmpty)
        #expect(try t.ledger.maintenance.verifyProjections() == nil)
    }

    @Test func idempotencyKeysOutliveTheirEventsForTheWindow() throws {
        let t = try TestLedger()
        let original = try t.ledger.append(.badgeAdjusted(.delta(1)), key: "push-1")
        try appendMixed(t.ledger, count: 20, seed: 5)
        try Compactor(ledger: t.ledger, policy: policy(keys: 3600)).runOnce()
        #expect(try t.ledger.read({ try $0.event(at: original) }) == nil)
        #expect(try t.ledger.append(.badgeAdjusted(.delta(1)), key: "push-1") == original)
        #expect(throws: LedgerError.idempotencyConflict(key: "push-1", existingSequence: original)) {
            try t.ledger.append(.badgeAdjusted(.delta(2)), key: "push-1")
        }
        // Past the window the key is forgotten with its event.
        usleep(5000)
        let report = try Compactor(ledger: t.ledger, policy: policy(keys: 0.001)).runOnce()
        #expect(report.keysForgotten >= 1)
        let again = try t.ledger.append(.badgeAdjusted(.delta(1)), key: "push-1")
        #expect(again > original)
    }

    @Test func keepsTheNewestSnapshots() throws {
        let t = try TestLedger()
        for round in 0..<4 {
            try appendMixed(t.ledger, count: 100, seed: UInt64(10 + round))
            try Compactor(ledger: t.ledger, policy: policy(keep: 2)).runOnce()
        }
        #expect(try t.ledger.maintenance.snapshots().map(\.sequence) == [300, 400])
        #expect(try t.ledger.maintenance.verifyProjections() == nil)
    }

    @Test func aSecondCompactorWaitsForTheLease() throws {
        let t = try TestLedger()
        try appendMixed(t.ledger, count: 200, seed: 6)
        let ledger = t.ledger
        final class Box: @unchecked Sendable { var report: CompactionReport? }
        let inner = Box()
        let first = Compactor(ledger: ledger, policy: policy()) { phase in
            if phase == .leased { inner.report = try? Compactor(ledger: ledger, policy: policy()).runOnce() }
        }
        let outer = try first.runOnce()
        #expect(outer.eventsTrimmed == 200)
        #expect(inner.report?.blockers == [.anotherCompactor(pid: getpid())])
        #expect(inner.report?.eventsTrimmed == 0)
    }

    @Test func damagedSnapshotIsReportedByVerify() throws {
        let t = try TestLedger()
        try appendMixed(t.ledger, count: 100, seed: 7)
        try Compactor(ledger: t.ledger, policy: policy(tail: 10)).runOnce()
        let env = try Environment.open(directory: t.path, configuration: EnvironmentConfiguration())
        let snapshots = try env.database("snapshots")
        let row = try #require(try env.read { txn in try txn.withCursor(snapshots) { try $0.last() } })
        try env.write { try $0.put(snapshots, key: row.key, value: row.value + [1]) }
        #expect {
            try t.ledger.maintenance.verifyProjections()
        } throws: { error in
            guard case LedgerError.corruptStore(_, let reason) = error else { return false }
            return reason.contains("fails its checksum")
        }
    }

    @Test func fileSizeStaysBoundedUnderAppendCompactCycles() throws {
        let t = try TestLedger()
        let compactor = Compactor(ledger: t.ledger, policy: policy(tail: 100, chunk: 500))
        var sizes: [Int] = []
        for cycle in 0..<11 {
            try t.ledger.append(contentsOf: (0..<2000).map { i in
                NewEvent(type: "app.note", payload: Array(#"{"cycle":\#(cycle),"i":\#(i),"pad":"\#(String(repeating: "x", count: 200))"}"#.utf8))
            })
            try appendMixed(t.ledger, count: 100, seed: UInt64(cycle))
            try compactor.runOnce()
            sizes.append(try t.ledger.maintenance.statistics().fileBytes)
        }
        let firstCycle = sizes[0]
        #expect(sizes.allSatisfy { Double($0) <= 1.5 * Double(firstCycle) }, "sizes \(sizes)")
    }
}

/// Random streams with compaction at random points behave like a never-compacted twin.
@Suite struct CompactionPropertyTests {
    @Test(arguments: [21, 22, 23])
    func compactedLedgerMatchesANeverCompactedTwin(seed: UInt64) throws {
        let a = try TestLedger(), b = try TestLedger()
        var rng = SeededGenerator(seed: seed)
        let names = ["host", "sync", "audit"]
        let ca = try names.map { try a.ledger.consumers.consumer(named: $0) }
        let cb = try names.map { try b.ledger.consumers.consumer(named: $0) }
        var round = 0
        for _ in 0..<40 {
            round += 1
            let n = Int.random(in: 1...60, using: &rng)
            let chunkSeed = UInt64.random(in: 0...UInt64.max, using: &rng)
            try appendMixed(a.ledger, count: n, seed: chunkSeed)
            try appendMixed(b.ledger, count: n, seed: chunkSeed)
            // Consumers read random amounts, the same in both.
            for k in names.indices where Bool.random(using: &rng) {
                let limit = Int.random(in: 1...80, using: &rng)
                let ba = try ca[k].next(limit: limit), bb = try cb[k].next(limit: limit)
                #expect(ba.events.map(\.sequence) == bb.events.map(\.sequence), "seed \(seed) round \(round)")
                #expect(ba.events.map(\.payload) == bb.events.map(\.payload))
                try ca[k].commit(ba)
                try cb[k].commit(bb)
            }
            if Int.random(in: 0..<3, using: &rng) == 0 {
                let tail = Int.random(in: 0...50, using: &rng)
                try Compactor(ledger: a.ledger, policy: policy(tail: tail, chunk: Int.random(in: 1...40, using: &rng))).runOnce()
            }
            // The twins commit at different instants: compare everything but commit times.
            let la = try a.ledger.read({ try $0.widgetList(limit: 100) }), lb = try b.ledger.read({ try $0.widgetList(limit: 100) })
            #expect(la.items == lb.items && la.unreadCount == lb.unreadCount && la.badge == lb.badge, "seed \(seed) round \(round)")
            #expect(la.version == lb.version && la.pendingActions == lb.pendingActions, "seed \(seed) round \(round)")
            func actions(_ l: Ledger) throws -> [String] { try l.read({ try $0.pendingActions(limit: 1000) }).map { "\($0.sequence) \($0.actionID) \($0.kind) \($0.target ?? "")" } }
            #expect(try actions(a.ledger) == actions(b.ledger), "seed \(seed) round \(round)")
            #expect(try a.ledger.read({ try $0.head() }) == b.ledger.read({ try $0.head() }))
        }
        #expect(try a.ledger.maintenance.verifyProjections() == nil)
        // Every consumer still gets, from its cursor, what the twin gives it.
        for k in names.indices {
            let ra = try ca[k].next(limit: 100_000), rb = try cb[k].next(limit: 100_000)
            #expect(ra.events.map(\.sequence) == rb.events.map(\.sequence))
        }
    }
}

@Suite struct CompactionWorkerTests {
    @Test func workerCompactsWhenTheTriggerFiresUntilCancelled() async throws {
        let t = try TestLedger()
        var p = policy(tail: 10)
        p.triggerEvents = 100
        // Each finished run is signalled: the test waits for that event, not for a time budget.
        let (finished, signal) = AsyncStream<Void>.makeStream()
        let compactor = Compactor(ledger: t.ledger, policy: p) { phase in
            if phase == .finished { signal.yield() }
        }
        // A timer that never fires within the test: only change notification can wake it.
        let worker = Task { try await compactor.run(checkEvery: .seconds(24 * 3600)) }
        try appendMixed(t.ledger, count: 50, seed: 1)
        try await Task.sleep(for: .milliseconds(100))
        await #expect(try t.ledger.read({ try $0.firstSequence() }) == 1)  // under the trigger: nothing trimmed
        try appendMixed(t.ledger, count: 100, seed: 2)
        // Woken by the appends (change notification), not by the timer: wait for the run to
        // finish, however slow a loaded machine is.
        let trimmed = try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask {
                for await _ in finished { return true }
                return false
            }
            group.addTask {  // only a hang guard
                try await Task.sleep(for: .seconds(hangGuardSeconds))
                return false
            }
            let first = try await group.next() ?? false
            group.cancelAll()
            return first
        }
        #expect(trimmed, "no compaction within \(Int(hangGuardSeconds)) s: a hang")
        await #expect(try t.ledger.read({ try $0.firstSequence() }) > 1)
        await #expect(try t.ledger.read({ try $0.count() }) < 150)
        worker.cancel()
        _ = await worker.result
        #expect(try t.ledger.maintenance.verifyProjections() == nil)
    }
}
