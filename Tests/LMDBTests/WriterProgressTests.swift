import Foundation
import Testing
import TestSupport
@testable import LMDB

#if canImport(Glibc)
import Glibc
#endif

/// Slow is not stopped (docs/operations.md): a writer waiting for the write lock gives up only
/// when the holder made no progress for the write timeout.
@Suite struct WriterProgressTests {
    let agent = Processes.product("LedgerTestAgent")

    /// The verdict, row by row.
    /// A look with the given signals (not read from /proc).
    static func look(_ txn: Int, _ holder: Int32?, cpu: Int?, running: Bool) -> WriterProgress {
        var p = WriterProgress(lastTransaction: txn, holder: nil)
        p.holder = holder
        p.holderCPU = cpu
        p.holderRunning = running
        return p
    }

    @Test func theVerdictComparesTwoLooks() {
        func look(_ txn: Int, _ holder: Int32?, cpu: Int?, running: Bool) -> WriterProgress { Self.look(txn, holder, cpu: cpu, running: running) }
        let before = look(10, 42, cpu: 100, running: false)
        #expect(look(11, 42, cpu: 100, running: false).verdict(since: before) == .committing)
        #expect(look(10, 43, cpu: 0, running: false).verdict(since: before) == .committing, "the lock changed hands")
        #expect(look(10, nil, cpu: nil, running: false).verdict(since: before) == .committing, "released")
        #expect(look(10, 42, cpu: 101, running: false).verdict(since: before) == .holderRunning)
        #expect(look(10, 42, cpu: 100, running: true).verdict(since: before) == .holderRunning)
        #expect(look(10, 42, cpu: 100, running: false).verdict(since: before) == .stalled)
        #expect(look(10, 42, cpu: nil, running: false).verdict(since: look(10, 42, cpu: nil, running: false)) == .stalled,
                "where the platform shows no holder state, only commits count")
    }

    /// `WriterWait`'s rule on a clock of the test's own (issue 40): the waiter looks every
    /// quarter of the timeout; a holder that runs and commits, then stops, is given up on one
    /// timeout after the last movement seen, plus at most one look — not after up to two
    /// timeouts, as when it compared looks a timeout apart (9.99 s with a 5 s timeout). A slow
    /// holder that moves now and then is waited for as long as it moves.
    @Test(arguments: [5000, 1000, 300, 20])
    func aWaiterAlreadyWaitingGivesUpOneTimeoutAfterTheHolderStops(timeout: Int) {
        func look(_ txn: Int, cpu: Int, running: Bool = false) -> WriterProgress { Self.look(txn, 42, cpu: cpu, running: running) }
        /// Polls every 1 ms of the fake clock from 0, as `acquire` does; returns when it gave up.
        func givesUp(_ state: (Int) -> WriterProgress, until end: Int) -> Int? {
            var wait = WriterWait(timeoutMilliseconds: timeout, now: 0)
            for now in 0...end where wait.lookDue(at: now) {
                if !wait.record(state(now), at: now) { return now }
            }
            return nil
        }
        let step = max(10, min(250, timeout / 4))
        // Commits until `stop`, then stopped (no commit, no CPU): the look after the stop is at most
        // one step later, then one timeout.
        for stop in [0, timeout / 3, timeout - 1, timeout, 2 * timeout + 7] {
            let end = givesUp({ $0 < stop ? look($0, cpu: 0) : look(stop, cpu: 0) }, until: 10 * timeout)
            #expect(end != nil)
            if let end {
                #expect(end > stop + timeout - step, "timeout \(timeout), stopped at \(stop): never less than a timeout")
                #expect(end <= stop + timeout + 2 * step, "timeout \(timeout), stopped at \(stop): gave up at \(end)")
            }
        }
        // A holder that runs without committing (CPU time grows) until `stop`: the same bound.
        let stop = timeout * 2
        if let end = givesUp({ look(1, cpu: min($0, stop) / 10) }, until: 10 * timeout) {
            #expect(end > stop + timeout - step && end <= stop + timeout + 2 * step, "timeout \(timeout): gave up at \(end)")
        } else {
            Issue.record("never gave up on a holder that stopped")
        }
        // A slow holder that commits once per 0.9 timeout is waited for, however long.
        #expect(givesUp({ look($0 / (timeout * 9 / 10), cpu: 0) }, until: 30 * timeout) == nil)
        // One that runs without ever committing is given up on after `runningHolderLimit` timeouts.
        if let end = givesUp({ look(1, cpu: $0, running: true) }, until: 20 * timeout) {
            #expect(end >= WriterLock.runningHolderLimit * timeout - step && end <= WriterLock.runningHolderLimit * timeout + step)
        } else {
            Issue.record("waited forever for a holder that never commits")
        }
    }

    @Test func statLinesAreSplitAfterTheLastParenthesis() {
        let fields = WriterProgress.statFields("123 (a (b) c) S 1 2 3 4 5 6 7 8 9 10 11 12 13")
        #expect(fields?.first == "S")
        #expect(fields?[11] == "11" && fields?[12] == "12")
        #expect(WriterProgress.statFields("garbage") == nil)
    }

    #if os(Linux)
    /// A running process shows as running; a stopped one does not, and its CPU time stands still.
    @Test func aStoppedProcessShowsNoActivity() throws {
        #expect(WriterProgress.holderActivity(getpid())?.running == true, "this thread is running")
        // The directory must outlive the child (a temporary one is deleted at once, and the
        // child, dead, reads as a zombie: no activity at all), and the child must be holding.
        let dir = TemporaryDirectory()
        let child = try Processes.start(agent, ["hold-reader", dir.path])
        defer { child.kill(); _ = try? child.wait(timeout: 30) }
        #expect(child.waitForOutput(containing: "holding"))
        kill(child.pid, SIGSTOP)
        // SIGSTOP is asynchronous: wait for the stop to show.
        var state = WriterProgress.holderActivity(child.pid)
        for _ in 0..<5000 where state?.running != false {
            usleep(2000)
            state = WriterProgress.holderActivity(child.pid)
        }
        #expect(state?.running == false)
        usleep(50_000)
        #expect(WriterProgress.holderActivity(child.pid)?.cpuTicks == state?.cpuTicks)
        kill(child.pid, SIGCONT)
    }
    #endif

    /// A holder that runs (on the CPU) inside its write for three times the timeout is waited
    /// for: the writer commits after it instead of giving up.
    @Test(.timeLimit(.minutes(10))) func aRunningHolderIsWaitedForPastTheTimeout() throws {
        let dir = TemporaryDirectory()
        var c = EnvironmentConfiguration()
        c.writeTimeoutMilliseconds = 300
        let env = try Environment.open(directory: dir.path, configuration: c)
        let holder = try Processes.start(agent, ["spin-in-write", dir.path, "1"])
        defer { holder.kill(); _ = try? holder.wait(timeout: 30) }
        #expect(holder.waitForOutput(containing: "in-txn"))
        // Before the change, this threw writeLockTimeout after 0.3 s while the holder spun.
        try env.write { _ in }
        #expect(holder.waitForOutput(containing: "committed"), "the holder finished its write: \(holder.stdoutSoFar)")
    }

    /// A holder asleep inside its write (not running, not committing) is given up on after the timeout.
    @Test(.timeLimit(.minutes(10))) func aHolderAsleepInItsWriteIsGivenUpOn() throws {
        let dir = TemporaryDirectory()
        var c = EnvironmentConfiguration()
        c.writeTimeoutMilliseconds = 300
        let env = try Environment.open(directory: dir.path, configuration: c)
        let holder = try Processes.start(agent, ["stall-in-write", dir.path, "60"])
        defer { holder.kill(); _ = try? holder.wait(timeout: 30) }
        #expect(holder.waitForOutput(containing: "in-txn"))
        #expect(throws: LMDBError.writeLockTimeout) { try env.write { _ in } }
        #expect(env.writeLockHolder() == holder.pid)
    }
}
