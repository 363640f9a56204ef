import Foundation
import Testing
import TestSupport
@testable import InboxLedger
import LMDB

@Suite struct AppendTests {
    @Test func sequencesAreDenseFromOne() throws {
        let t = try TestLedger(role: "widget")
        #expect(try t.ledger.append(event()) == 1)
        #expect(try t.ledger.append(contentsOf: [event(), event(), event()]) == [2, 3, 4])
        #expect(try t.ledger.append(contentsOf: []) == [])
        #expect(try t.ledger.read({ try $0.head() }) == 4)
        #expect(try t.ledger.read({ try $0.count() }) == 4)
        let events = try t.ledger.read({ try $0.events(after: 0, limit: 10) })
        #expect(events.map(\.sequence) == [1, 2, 3, 4])
        #expect(events.allSatisfy { $0.origin.role == "widget" && $0.origin.pid == getpid() })
        #expect(events.allSatisfy { $0.timestampMicros > 1_700_000_000_000_000 })
    }

    @Test func readsByRangeAndIterator() throws {
        let t = try TestLedger()
        for i in 1...25 { try t.ledger.append(event("t", #"{"i":\#(i)}"#)) }
        #expect(try t.ledger.read({ try $0.events(after: 20, limit: 100) }).map(\.sequence) == [21, 22, 23, 24, 25])
        #expect(try t.ledger.read({ try $0.events(after: 3, limit: 2) }).map(\.sequence) == [4, 5])
        #expect(try t.ledger.read({ try $0.events(after: 25) }).isEmpty)
        #expect(try t.ledger.read({ try $0.events(after: UInt64.max) }).isEmpty)
        #expect(try t.ledger.read({ try $0.event(at: 7) })?.payload == Array(#"{"i":7}"#.utf8))
        #expect(try t.ledger.read({ try $0.event(at: 26) }) == nil)
        var iterator = EventIterator(t.ledger, after: 0, pageSize: 4)
        var seen: [UInt64] = []
        while let e = try iterator.next() { seen.append(e.sequence) }
        #expect(seen == Array(1...25))
        // The iterator picks up events appended after it ran dry.
        try t.ledger.append(event())
        #expect(try iterator.next()?.sequence == 26)
    }

    @Test func invalidEventsWriteNothing() throws {
        let t = try TestLedger()
        try t.ledger.append(event())
        let cases: [(NewEvent, LedgerError)] = [
            (event(""), .invalidEvent(index: 1, field: "type", reason: "must be 1–128 bytes, got 0")),
            (event(String(repeating: "t", count: 129)), .invalidEvent(index: 1, field: "type", reason: "must be 1–128 bytes, got 129")),
            (event("has space"), .invalidEvent(index: 1, field: "type", reason: "must be printable ASCII without spaces, got \"has space\"")),
            (event("t", key: ""), .invalidEvent(index: 1, field: "key", reason: "must be 1–256 bytes, got 0")),
            (event("t", key: String(repeating: "k", count: 257)), .invalidEvent(index: 1, field: "key", reason: "must be 1–256 bytes, got 257")),
        ]
        for (bad, expected) in cases {
            #expect(throws: expected) { try t.ledger.append(contentsOf: [event(), bad, event()]) }
        }
        #expect(try t.ledger.read({ try $0.head() }) == 1)
        #expect(try t.ledger.read({ try $0.count() }) == 1)
    }

    @Test func oversizedEventIsRejected() throws {
        let t = try TestLedger { $0.maxEventBytes = 1000 }
        let big = NewEvent(type: "t", payload: [UInt8](repeating: 1, count: 1000))
        #expect {
            try t.ledger.append(contentsOf: [event(), big])
        } throws: { error in
            guard case LedgerError.eventTooLarge(1, let size, 1000) = error else { return false }
            return size > 1000
        }
        #expect(try t.ledger.read({ try $0.count() }) == 0)
        let fits = NewEvent(type: "t", payload: [UInt8](repeating: 1, count: 1000 - 36 - 1 - 3))
        #expect(try t.ledger.append(fits) == 1)
    }

    @Test func idempotentRetryReturnsTheOriginalSequence() throws {
        let t = try TestLedger()
        let first = try t.ledger.append(event("badge.adjusted", #"{"delta":1}"#, key: "push-1"))
        try t.ledger.append(event())
        let retry = try t.ledger.append(event("badge.adjusted", #"{"delta":1}"#, key: "push-1"))
        #expect(retry == first)
        #expect(try t.ledger.read({ try $0.count() }) == 2)
        #expect(try t.ledger.read({ try $0.event(at: first) })?.key == "push-1")
    }

    @Test func reusedKeyWithOtherContentIsAConflictAndTheBatchIsNotWritten() throws {
        let t = try TestLedger()
        let first = try t.ledger.append(event("badge.adjusted", #"{"delta":1}"#, key: "push-1"))
        #expect(throws: LedgerError.idempotencyConflict(key: "push-1", existingSequence: first)) {
            try t.ledger.append(contentsOf: [event(), event("badge.adjusted", #"{"delta":2}"#, key: "push-1")])
        }
        #expect(throws: LedgerError.idempotencyConflict(key: "push-1", existingSequence: first)) {
            try t.ledger.append(event("com.example.badge", #"{"delta":1}"#, key: "push-1"))
        }
        #expect(try t.ledger.read({ try $0.count() }) == 1)
        #expect(try t.ledger.read({ try $0.head() }) == 1)
    }

    @Test func keysRepeatedInsideOneBatch() throws {
        let t = try TestLedger()
        let seqs = try t.ledger.append(contentsOf: [event("a", "1", key: "k"), event("b"), event("a", "1", key: "k")])
        #expect(seqs == [1, 2, 1])
        #expect(try t.ledger.read({ try $0.count() }) == 2)
        #expect(throws: LedgerError.invalidEvent(index: 1, field: "key", reason: "'j' is used twice in the batch with different content")) {
            try t.ledger.append(contentsOf: [event("a", "1", key: "j"), event("a", "2", key: "j")])
        }
        #expect(try t.ledger.read({ try $0.count() }) == 2)
    }

    @Test func keysSurviveReopening() throws {
        let t = try TestLedger()
        try t.ledger.append(event("a", "1", key: "k"))
        let reopened = try Ledger(path: t.path)
        #expect(try reopened.append(event("a", "1", key: "k")) == 1)
    }

    @Test func corruptRecordIsATypedErrorWithItsSequence() throws {
        let t = try TestLedger()
        for i in 1...5 { try t.ledger.append(event("t", #"{"i":\#(i)}"#)) }
        let env = try Environment.open(directory: t.path, configuration: EnvironmentConfiguration())
        let events = try env.database("events")
        let key = SequenceKey.encode(3)
        var record = try #require(try env.read { try $0.get(events, key: key) })
        record[record.count / 2] ^= 0x40
        try env.write { try $0.put(events, key: key, value: record) }
        #expect {
            try t.ledger.read({ try $0.event(at: 3) })
        } throws: { error in
            guard case LedgerError.corruptRecord(3, let reason) = error else { return false }
            return reason.contains("checksum mismatch")
        }
        #expect {
            try t.ledger.read({ try $0.events(after: 0) })
        } throws: { error in
            guard case LedgerError.corruptRecord(3, _) = error else { return false }
            return true
        }
        #expect(try t.ledger.read({ try $0.event(at: 2) })?.sequence == 2)
        #expect(try t.ledger.read({ try $0.events(after: 3) }).map(\.sequence) == [4, 5])
    }

    @Test func statisticsCountByTypeAndOrigin() throws {
        let t = try TestLedger(role: "app")
        try t.ledger.append(contentsOf: [event("a"), event("a"), event("b", key: "k")])
        var options = LedgerOptions(role: "widget")
        options.durability = .none
        let widget = try Ledger(path: t.path, options: options)
        try widget.append(event("a"))
        let stats = try t.ledger.maintenance.statistics()
        #expect(stats.headSequence == 4)
        #expect(stats.firstSequence == 1)
        #expect(stats.eventCount == 4)
        #expect(stats.countsByType == ["a": 3, "b": 1])
        #expect(stats.countsByOrigin == ["app": 3, "widget": 1])
        #expect(stats.idempotencyKeys == 1)
        #expect(stats.fileBytes > 0 && stats.mapBytes >= stats.usedBytes)
        #expect(stats.maxReaders == 126)
    }

    @Test func everyDurabilityModeCommits() throws {
        for mode in LedgerDurability.allCases {
            let t = try TestLedger(durability: mode)
            try t.ledger.append(contentsOf: [event(), event()])
            #expect(try t.ledger.read({ try $0.count() }) == 2)
        }
    }

    @Test func growsTheMapWhileAppending() throws {
        let t = try TestLedger { $0.initialMapSize = 256 << 10 }
        let pad = String(repeating: "x", count: 3000)
        for i in 0..<100 {
            try t.ledger.append(contentsOf: (0..<20).map { j in event("t", #"{"i":\#(i * 20 + j),"p":"\#(pad)"}"#) })
        }
        #expect(try t.ledger.read({ try $0.count() }) == 2000)
        #expect(try t.ledger.maintenance.statistics().mapBytes > 256 << 10)
    }

    @Test func fullStoreIsATypedErrorAndLosesNothing() throws {
        let t = try TestLedger { $0.initialMapSize = 256 << 10; $0.maxMapSize = 512 << 10 }
        let pad = String(repeating: "x", count: 3000)
        var committed = 0
        #expect {
            for i in 0..<1000 {
                try t.ledger.append(contentsOf: (0..<5).map { j in event("t", #"{"i":\#(i * 5 + j),"p":"\#(pad)"}"#) })
                committed += 5
            }
        } throws: { error in
            guard case LedgerError.storeFull = error else { return false }
            return true
        }
        #expect(committed > 0)
        #expect(try t.ledger.read({ try $0.count() }) == committed)
        #expect(try t.ledger.read({ try $0.head() }) == UInt64(committed))
    }
}

@Suite struct GroupCommitTests {
    @Test func concurrentAppendersShareCommitsAndKeepTheirOrder() throws {
        let t = try TestLedger(durability: .durable)
        let threads = 8
        let perThread = 200
        let before = try t.ledger.maintenance.statistics().lastTransactionID
        let results = ResultsBox(count: threads)
        let group = DispatchGroup()
        for thread in 0..<threads {
            group.enter()
            Thread.detachNewThread { [ledger = t.ledger] in
                var mine: [UInt64] = []
                for i in 0..<perThread {
                    if let seq = try? ledger.append(event("t", #"{"thread":\#(thread),"i":\#(i)}"#)) { mine.append(seq) }
                }
                results.set(thread, mine)
                group.leave()
            }
        }
        #expect(group.wait(timeout: .now() + 300) == .success)
        let all = results.all.flatMap { $0 }
        #expect(all.count == threads * perThread)
        #expect(Set(all).count == all.count)
        #expect(Set(all) == Set(1...UInt64(threads * perThread)))
        // Each thread's own events are in its order.
        for seqs in results.all { #expect(seqs == seqs.sorted()) }
        for e in try t.ledger.read({ try $0.events(after: 0, limit: 10_000) }) {
            let text = String(decoding: e.payload, as: UTF8.self)
            let thread = results.all.firstIndex { $0.contains(e.sequence) }
            #expect(thread.map { text.contains(#""thread":\#($0),"#) } == true)
        }
        // Fewer commits than appends: callers were coalesced.
        let commits = try t.ledger.maintenance.statistics().lastTransactionID - before
        #expect(commits < threads * perThread)
    }
}

final class ResultsBox: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [[UInt64]]
    init(count: Int) { values = Array(repeating: [], count: count) }
    func set(_ i: Int, _ v: [UInt64]) { lock.lock(); values[i] = v; lock.unlock() }
    var all: [[UInt64]] { lock.lock(); defer { lock.unlock() }; return values }
}
