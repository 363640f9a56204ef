import Foundation
import Testing
import TestSupport
@testable import LMDB

#if canImport(Glibc)
import Glibc
#endif

/// Found from outside (issue 30's review): holders the progress look misjudges.
@Suite struct WriterProgressTrialTests {
    let agent = Processes.product("LedgerTestAgent")

    /// Opening an environment whose named databases do not exist yet creates them in a write
    /// transaction (`EnvironmentRegistry.openDatabasesOnce`) begun without this layer's writer
    /// lock: it waits on LMDB's writer mutex with no bound, so a process stopped, frozen or
    /// asleep inside its write stops the open for as long as it is stopped (here until the
    /// holder wakes after 100 s), against docs/operations.md "Bounded waits". Two processes
    /// creating a new ledger at once (an app and its extension on first launch) meet this.
    @Test(.timeLimit(.minutes(10))) func anOpenThatCreatesDatabasesIsBoundedByTheWriteTimeout() throws {
        let dir = TemporaryDirectory()
        let holder = try Processes.start(agent, ["stall-in-write", dir.path, "100"])
        defer { holder.kill(); _ = try? holder.wait(timeout: 30) }
        #expect(holder.waitForOutput(containing: "in-txn"))
        var c = EnvironmentConfiguration()
        c.databases = ["data": []]
        c.writeTimeoutMilliseconds = 300
        #expect(throws: LMDBError.writeLockTimeout) { _ = try Environment.open(directory: dir.path, configuration: c) }
        #expect(!holder.stdoutSoFar.contains("committed"), "the open waited for the stopped holder to finish")
    }

    #if os(Linux)
    /// A process whose name ends in a Unicode "prepend" character (U+0600): in `/proc/PID/stat`
    /// the name's last character and the closing `)` form one grapheme cluster, so a search for
    /// the Character `)` misses it and the holder is read as not visible (treated as stopped).
    @Test func aHolderWhoseNameEndsInAPrependCharacterIsStillRead() throws {
        let dir = TemporaryDirectory()
        let name = dir.child("w\u{0600}")
        #expect(symlink("/bin/sleep", name) == 0)
        let child = try Processes.start(name, ["60"])
        defer { child.kill(); _ = try? child.wait(timeout: 30) }
        #expect(waitUntil { (try? String(contentsOfFile: "/proc/\(child.pid)/comm", encoding: .utf8))?.hasPrefix("w\u{0600}") == true })
        #expect(WriterProgress.statFields("1 (w\u{0600}) S 1 2 3 4 5 6 7 8 9 10 11 12 13")?.first == "S")
        #expect(WriterProgress.holderActivity(child.pid) != nil, "the stat line of a live process is read")
    }

    /// A holder frozen by the cgroup v1 freezer (what `docker pause`, systemd and older Android
    /// freezers use) is reported by Linux 6.1+ as `D` (uninterruptible), which the look counts
    /// as running: a waiter grants it 12 timeouts instead of giving up after one, though
    /// docs/operations.md lists "frozen (cgroup freezer)" among the holders given up on.
    @Test func aHolderFrozenByTheCgroupV1FreezerShowsNoActivity() throws {
        let root = "/sys/fs/cgroup/freezer"
        let group = "\(root)/inboxledger-trial-\(getpid())"
        guard access(root, W_OK) == 0, mkdir(group, 0o755) == 0 || errno == EEXIST else { return }  // no v1 freezer here
        defer { rmdir(group) }
        let dir = TemporaryDirectory()
        let holder = try Processes.start(agent, ["spin-in-write", dir.path, "60"])
        defer {
            try? "THAWED".write(toFile: "\(group)/freezer.state", atomically: false, encoding: .utf8)
            holder.kill()
            _ = try? holder.wait(timeout: 30)
        }
        #expect(holder.waitForOutput(containing: "in-txn"))
        try "\(holder.pid)".write(toFile: "\(group)/cgroup.procs", atomically: false, encoding: .utf8)
        try "FROZEN".write(toFile: "\(group)/freezer.state", atomically: false, encoding: .utf8)
        #expect(waitUntil { (try? String(contentsOfFile: "\(group)/freezer.state", encoding: .utf8))?.hasPrefix("FROZEN") == true })
        let frozen = WriterProgress.holderActivity(holder.pid)
        usleep(100_000)
        #expect(WriterProgress.holderActivity(holder.pid)?.cpuTicks == frozen?.cpuTicks, "frozen: its CPU time stands still")
        #expect(frozen?.running == false, "a frozen holder runs no thread (state \(String(describing: try? String(contentsOfFile: "/proc/\(holder.pid)/stat", encoding: .utf8))))")
    }
    #endif
}
