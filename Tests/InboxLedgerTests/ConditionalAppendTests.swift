import Foundation
import Synchronization
import Testing
import TestSupport
@testable import InboxLedger

/// Read, decide, write: an append that expects the head it read fails, writing nothing, when
/// another append (of any process) committed in between.
@Suite struct ConditionalAppendTests {
    let agent = Processes.product("LedgerTestAgent")

    @Test func anAppendOfAnotherProcessInBetweenMakesItFail() throws {
        let t = try TestLedger(role: "app")
        try t.ledger.append(event())
        let read = try t.ledger.read({ try $0.head() })
        #expect(try Processes.run(agent, ["append-key", t.path, "other", "{}"]).status == 0)
        do {
            _ = try t.ledger.append(AppendRequest([event("decision")], expectingHead: read))
            Issue.record("a stale expectation was committed")
        } catch {
            #expect(error == .headMoved(expected: read, actual: read + 1))
        }
        #expect(try t.ledger.read({ try $0.count() }) == 2, "nothing of the failed append may be written")
        // With the head as it is now, it goes through.
        #expect(try t.ledger.append(AppendRequest([event("decision")], expectingHead: read + 1)).sequences == [read + 2])
        #expect(try t.ledger.append(AppendRequest(.badgeAdjusted(.delta(1)), expectingHead: read + 2)).sequences[0] == read + 3)
    }

    @Test func ofConcurrentWritersExpectingTheSameHeadExactlyOneWins() throws {
        let t = try TestLedger(role: "app")
        for round in 0..<20 {
            let head = try t.ledger.read({ try $0.head() })
            let wins = Mutex(0)
            DispatchQueue.concurrentPerform(iterations: 6) { i in
                do {
                    _ = try t.ledger.append(AppendRequest([event("try", #"{"r":\#(round),"i":\#(i)}"#)], expectingHead: head))
                    wins.withLock { $0 += 1 }
                } catch {
                    #expect((error as? LedgerError) == .headMoved(expected: head, actual: head + 1))
                }
            }
            #expect(wins.withLock { $0 } == 1, "round \(round)")
            #expect(try t.ledger.read({ try $0.head() }) == head + 1)
        }
    }
}
