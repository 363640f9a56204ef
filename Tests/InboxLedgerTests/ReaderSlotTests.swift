import Foundation
import Testing
import TestSupport
import InboxLedger

/// Issue 22 item 7: live processes holding every reader slot of `lock.mdb` (126, the one value
/// every process uses) must not keep writers out; a read-only opener gets a typed error and
/// recovers once slots are freed, by exit or by the reclaiming of a killed process's slots.
@Suite(.serialized) struct ReaderSlotTests {
    let agent = Processes.product("LedgerTestAgent")

    @Test func writersOpenAndAppendWhileLiveProcessesHoldEveryReaderSlot() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        do {  // created, then closed: this process holds no slot
            let ledger = try Ledger(path: path, options: LedgerOptions(role: "app"))
            for i in 0..<3 { try ledger.append(event("test.seed", #"{"i":\#(i)}"#)) }
        }
        // Two live processes take every slot: 60, then all the rest.
        func holding(_ p: RunningProcess) throws -> Int {
            let found = try #require(line(p, startingWith: "holding "), "\(p.stdoutSoFar)")
            return try #require(Int(found.dropFirst("holding ".count)))
        }
        let first = try Processes.start(agent, ["hold-readers", path, "60"])
        defer { first.kill(); _ = try? first.wait(timeout: 600) }
        #expect(try holding(first) == 60)
        let second = try Processes.start(agent, ["hold-readers", path, "1000"])
        defer { second.kill(); _ = try? second.wait(timeout: 600) }
        #expect(try holding(second) == 66)

        // A new writer process opens, reads and appends without a slot.
        let append = try Processes.run(agent, ["append-key", path, "k-full", "{}"], timeout: 600)
        #expect(append.status == 0, "\(append.stdout) \(append.stderr)")
        #expect(append.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "4")
        let count = try Processes.run(agent, ["open", path], timeout: 600)
        #expect(count.stdout.contains("count 4"), "\(count.stdout) \(count.stderr)")
        // The retry of a keyed append is recognised (the key lookup ran in the write).
        let retry = try Processes.run(agent, ["append-key", path, "k-full", "{}"], timeout: 600)
        #expect(retry.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "4", "\(retry.stdout) \(retry.stderr)")

        // A read-only opener needs a slot: the typed error, saying what to do.
        let refused = try Processes.run(agent, ["open", path, "ro"], timeout: 600)
        #expect(refused.status == 2)
        #expect(refused.stdout.contains("all 126 reader slots are held by live processes"), "\(refused.stdout)")
        var readOnly = LedgerOptions(role: "widget")
        readOnly.readOnly = true
        #expect {
            _ = try Ledger(path: path, options: readOnly)
        } throws: { error in
            guard case .readerSlotsFull(_, 126)? = error as? LedgerError else { return false }
            return (error as? LedgerError)?.isTransient == true
        }

        // The second holder is killed: its 66 slots are stale, reclaimed by the next opener.
        second.kill()
        _ = try second.wait(timeout: 600)
        let recovered = try Processes.run(agent, ["open", path, "ro"], timeout: 600)
        #expect(recovered.status == 0, "\(recovered.stdout) \(recovered.stderr)")
        #expect(recovered.stdout.contains("count 4"))
        let widget = try Ledger(path: path, options: readOnly)
        #expect(try widget.read({ try $0.count() }) == 4)
        #expect(try widget.maintenance.statistics().readers.map(\.pid).contains(second.pid) == false)
    }
}
