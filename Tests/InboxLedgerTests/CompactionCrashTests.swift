import Foundation
import Testing
import TestSupport
@testable import InboxLedger

/// A compactor killed at every phase, and compaction under concurrent load, across processes.
@Suite(.serialized) struct CompactionCrashTests {
    let agent = Processes.product("LedgerTestAgent")

    /// The ledger after a crash: projections equal the rebuild, the log is dense from its
    /// first sequence to the head, and the consumer's events are all there.
    func checkHealthy(_ path: String, head: UInt64, consumerCursor: UInt64, context: String) throws {
        let ledger = try Ledger(path: path)
        #expect(try ledger.maintenance.verifyProjections() == nil, "\(context)")
        #expect(try ledger.read({ try $0.head() }) == head, "\(context)")
        let first = try ledger.read({ try $0.firstSequence() })
        #expect(first <= consumerCursor + 1, "\(context): trimmed past a live consumer")
        var expected = first
        var iterator = EventIterator(ledger, after: first - 1, pageSize: 1000)
        while let e = try iterator.next() {
            #expect(e.sequence == expected, "\(context)")
            expected += 1
        }
        #expect(expected == head + 1, "\(context)")
    }

    @Test func aCompactorKilledAtAnyPhaseLeavesAConsistentLedgerAndARerunFinishes() throws {
        let phases: [(String, Int)] = [
            ("leased", 1), ("snapshotWritten", 1), ("chunkTrimmed", 1), ("chunkTrimmed", 3),
            ("keysSwept", 1), ("snapshotsPruned", 1), ("finished", 1),
        ]
        for (phase, count) in phases {
            let dir = TemporaryDirectory()
            let path = dir.child("ledger")
            let ledger = try Ledger(path: path)
            try appendMixed(ledger, count: 600, seed: 99)
            let consumer = try ledger.consumers.consumer(named: "host")
            try consumer.commit(try consumer.next(limit: 450))
            // An earlier compaction, so there is an old snapshot to prune.
            try Compactor(ledger: ledger, policy: policy(tail: 500)).runOnce()
            try appendMixed(ledger, count: 100, seed: 100)
            try consumer.commit(try consumer.next(limit: 200))  // now at 650, past the old snapshot (600)
            let context = "killed at \(phase) #\(count)"
            let killed = try Processes.run(agent, ["compact", path, "20", "50"], environment: ["FAULT_PHASE": phase, "FAULT_COUNT": String(count)])
            #expect(killed.signalled, "\(context): \(killed.stdout) \(killed.stderr)")
            try checkHealthy(path, head: 700, consumerCursor: 650, context: context)
            // A rerun finishes the job.
            let rerun = try Processes.run(agent, ["compact", path, "20", "50"])
            #expect(rerun.status == 0, "\(context): \(rerun.stderr)")
            try checkHealthy(path, head: 700, consumerCursor: 650, context: context + ", rerun")
            #expect(try ledger.read({ try $0.firstSequence() }) == 651, "\(context)")
            #expect(try ledger.maintenance.snapshots().count <= 2, "\(context)")
        }
    }

    @Test func randomKillsOfACompactorProcess() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        let ledger = try Ledger(path: path)
        var rng = SeededGenerator(seed: 31)
        var head: UInt64 = 0
        for round in 0..<12 {
            try appendMixed(ledger, count: 400, seed: UInt64(round))
            head += 400
            let compactor = try Processes.start(agent, ["compact", path, "10", "7"])
            usleep(UInt32.random(in: 0...40_000, using: &rng))
            compactor.kill()
            _ = try compactor.wait(timeout: 30)
            try checkHealthy(path, head: head, consumerCursor: head, context: "round \(round)")
        }
        let last = try Processes.run(agent, ["compact", path, "10", "7"])
        #expect(last.status == 0, "\(last.stderr)")
        #expect(try ledger.read({ try $0.firstSequence() }) == head - 10 + 1)
    }

    @Test func writersReaderConsumerAndTwoCompactorsAtOnce() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        let ledger = try Ledger(path: path)
        _ = try ledger.consumers.consumer(named: "checker")
        try appendMixed(ledger, count: 50, seed: 1)
        let perWriter = 3000
        let writers = try (0..<3).map { w in
            try Processes.start(agent, ["write", path, "w\(w)", String(perWriter), String(500 + w), dir.child("ack\(w)"), "40", "none"])
        }
        let widget = try Processes.start(agent, ["widget-reader", path, "4"])
        let checker = try Processes.start(agent, ["consume-check", path, "checker", String(50 + 3 * perWriter), "300"])
        // Two compactor processes at once: the lease keeps them from working over each other.
        let compactors = try (0..<2).map { _ in try Processes.start(agent, ["compact-loop", path, "4", "100"]) }
        for p in writers + [widget, checker] + compactors {
            let out = try p.wait(timeout: 300)
            #expect(out.status == 0, "\(out.stdout) \(out.stderr)")
        }
        #expect(try ledger.maintenance.verifyProjections() == nil)
        #expect(try ledger.read({ try $0.head() }) == UInt64(50 + 3 * perWriter))
        // Every acknowledged event of every writer that compaction has not trimmed is there.
        let first = try ledger.read({ try $0.firstSequence() })
        for w in 0..<3 {
            for seq in acknowledged(dir.child("ack\(w)")).values.flatMap({ $0 }) where seq >= first {
                #expect(try ledger.read({ try $0.event(at: seq) }) != nil)
            }
        }
        // The compactor really trimmed while the others ran.
        #expect(first > 1)
    }
}

@Suite(.serialized) struct KilledReaderTests {
    let agent = Processes.product("LedgerTestAgent")

    @Test func aReaderKilledInsideItsTransactionDoesNotMakeTheFileGrowForever() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        var options = LedgerOptions()
        options.durability = .none
        let ledger = try Ledger(path: path, options: options)
        let compactor = Compactor(ledger: ledger, policy: policy(tail: 50, chunk: 500))
        func cycle(_ n: Int) throws -> Int {
            try ledger.append(contentsOf: (0..<1500).map { i in
                NewEvent(type: "app.note", payload: Array(#"{"n":\#(n),"i":\#(i),"pad":"\#(String(repeating: "y", count: 200))"}"#.utf8))
            })
            try compactor.runOnce()
            return try ledger.maintenance.statistics().fileBytes
        }
        _ = try cycle(0)
        // A reader opens a transaction and is killed inside it: its slot pins old pages.
        let reader = try Processes.start(agent, ["hold-reader", path])
        _ = reader.waitForOutput(containing: "holding")
        #expect(reader.stdoutSoFar.contains("holding"))
        reader.kill()
        _ = try? reader.wait(timeout: 10)
        // Compaction clears the dead slot, so freed pages are reused again: the file stays bounded.
        let afterKill = try cycle(1)
        var sizes: [Int] = []
        for n in 2..<10 { sizes.append(try cycle(n)) }
        #expect(sizes.allSatisfy { Double($0) <= 1.5 * Double(afterKill) }, "after the kill \(afterKill), then \(sizes)")
        #expect(try ledger.maintenance.statistics().readers.allSatisfy(\.isAlive))
    }
}
