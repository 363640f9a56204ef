import Foundation
import Testing
import TestSupport
@testable import InboxLedger

#if canImport(Glibc)
import Glibc
#endif

/// The lines of `/proc/locks`, read to its end. The kernel fills one `read` call with at most
/// a page of the listing (a seq_file), so a full suite's hundreds of locks take several calls,
/// and between two calls locks taken and released by other processes shift the listing: a
/// line can be skipped or repeated. A check that a lock is present therefore waits for it
/// (``anyPosixLock(onFile:)``) or asks the kernel directly (``lockHolder(onFile:byte:)``);
/// a skipped line can only make an absence check pass early, never fail.
func procLocksLines() -> [String] {
    let fd = open("/proc/locks", O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return [] }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 1 << 16)
    while true {
        let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if count < 0, errno == EINTR { continue }
        guard count > 0 else { break }
        bytes.append(contentsOf: chunk[..<count])
    }
    return String(decoding: bytes, as: UTF8.self).split(separator: "\n").map(String.init)
}

/// The pid of another process holding a POSIX lock on byte `byte` of `path` (`F_GETLK` for
/// an exclusive lock: any holder is reported, this process's own locks never are); nil when
/// none does. LMDB holds byte 0 of `lock.mdb` shared while the environment is open, and the
/// byte at a process's pid exclusively while that process has a reader slot. Never from a
/// process that has the ledger open: closing the descriptor it opens drops every `fcntl` lock
/// this process holds on the file, LMDB's own included.
func lockHolder(onFile path: String, byte: off_t) -> Int32? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var query = flock()
    query.l_type = Int16(F_WRLCK)
    query.l_whence = Int16(SEEK_SET)
    query.l_start = byte
    query.l_len = 1
    guard fcntl(fd, F_GETLK, &query) == 0, query.l_type != Int16(F_UNLCK) else { return nil }
    return query.l_pid
}

/// Whether `/proc/locks` lists a lock on `path`, read again until it does (a present lock can
/// be skipped by one reading, see ``procLocksLines()``); false only after the hang guard.
func anyPosixLock(onFile path: String) -> Bool {
    waitUntil(timeout: hangGuardSeconds) { !posixLocks(onFile: path).isEmpty }
}

/// The POSIX locks `pid` holds, as `/proc/locks` lists them (`1: POSIX ADVISORY READ 123 00:2d:456 0 0`).
func posixLocks(of pid: Int32) -> [String] {
    procLocksLines().filter { line in
        let fields = line.split(separator: " ", omittingEmptySubsequences: true)
        return fields.count > 4 && fields[4] == Substring(String(pid))
    }
}

/// The POSIX locks any process holds on the file `path` (matched by inode).
func posixLocks(onFile path: String) -> [String] {
    var s = stat()
    guard stat(path, &s) == 0 else { return [] }
    return procLocksLines().filter { line in
        let fields = line.split(separator: " ", omittingEmptySubsequences: true)
        return fields.count > 5 && fields[5].split(separator: ":").last == Substring(String(s.st_ino))
    }
}

/// Waits until the process's output has a line starting with `prefix` and returns it; nil once
/// the process has exited without one (or past the hang guard).
func line(_ process: RunningProcess, startingWith prefix: String, within seconds: Double = hangGuardSeconds) -> String? {
    func found() -> String? {
        process.stdoutSoFar.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }).map(String.init)
    }
    _ = waitUntil(timeout: seconds) { found() != nil || !process.process.isRunning }
    return found() ?? (process.waitForOutput(containing: prefix, timeout: 0) ? found() : nil)
}

/// iOS suspends processes and kills a suspended one that holds a file lock in a shared
/// container (0xdead10cc); a process stopped inside its write must not stop the others.
@Suite(.serialized) struct SuspensionTests {
    let agent = Processes.product("LedgerTestAgent")
    let cli = Processes.product("ledger")

    @Test(.timeLimit(.minutes(10)))
    func suspendReleasesEveryLockAndReaderSlotAndResumeReopens() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        let control = dir.child("control")
        try FileManager.default.createDirectory(atPath: control, withIntermediateDirectories: true)
        let app = try Processes.start(agent, ["suspend-cycle", path, control])
        defer { app.kill(); _ = try? app.wait(timeout: 10) }
        #expect(line(app, startingWith: "ready") != nil, "\(app.stdoutSoFar)")
        // Open and idle: LMDB holds its locks on lock.mdb (the checks below can fail): byte 0
        // shared (the environment is open), the byte at its pid (it has a reader slot).
        let lockFile = path + "/lock.mdb"
        #expect(lockHolder(onFile: lockFile, byte: 0) == app.pid, "an open ledger should hold LMDB's locks")
        #expect(lockHolder(onFile: lockFile, byte: off_t(app.pid)) == app.pid, "a reader should hold its pid's byte")

        _ = FileManager.default.createFile(atPath: control + "/suspend", contents: nil)
        let suspended = try #require(line(app, startingWith: "suspended-call"), "\(app.stdoutSoFar)")
        #expect(posixLocks(of: app.pid).isEmpty, "suspended but still holding: \(posixLocks(of: app.pid))")
        #expect(lockHolder(onFile: lockFile, byte: 0) == nil && lockHolder(onFile: lockFile, byte: off_t(app.pid)) == nil,
                "suspended but still holding a lock on lock.mdb")
        let inspect = try Processes.run(cli, ["inspect", path, "--json"])
        let object = try JSONSerialization.jsonObject(with: Data(inspect.stdout.utf8)) as? [String: Any]
        let readers = object?["readers"] as? [[String: Any]] ?? []
        #expect(!readers.contains { ($0["pid"] as? Int) == Int(app.pid) }, "a reader slot of the suspended process: \(readers)")
        // A call while suspended throws at once.
        let fields = suspended.split(separator: " ")
        #expect(fields.count == 4 && fields[2] == "suspended" && fields[3] == "suspended", "\(suspended)")
        #expect((Int(fields[1]) ?? .max) < 1000, "a call while suspended took \(fields[1]) µs")

        _ = FileManager.default.createFile(atPath: control + "/resume", contents: nil)
        #expect(line(app, startingWith: "widget-same") == "widget-same true", "\(app.stdoutSoFar)")
        #expect(line(app, startingWith: "resumed") == "resumed 2", "\(app.stdoutSoFar)")
        // The waiter parked across suspend/resume wakes for another process's later commit.
        let other = try Processes.run(cli, ["append", path], input: Data(#"{"type":"badge.adjusted","data":{"delta":1}}"#.utf8))
        #expect(other.status == 0, "\(other.stderr)")
        #expect(line(app, startingWith: "woke", within: 10) == "woke 3", "\(app.stdoutSoFar)")
        _ = FileManager.default.createFile(atPath: control + "/exit", contents: nil)
        #expect(try app.wait(timeout: 30).status == 0)
    }

    @Test(.timeLimit(.minutes(10)))
    func aWriterStoppedInsideItsTransactionMakesOthersFailWithWriterBusyNotHang() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        _ = try Ledger(path: path).append(event())
        let staller = try Processes.start(agent, ["stall-in-write", path, "3"])
        defer { staller.kill(); _ = try? staller.wait(timeout: 10) }
        #expect(line(staller, startingWith: "in-txn") != nil)
        kill(staller.pid, SIGSTOP)

        var options = LedgerOptions(role: "app")
        options.writeTimeout = 1
        let ledger = try Ledger(path: path, options: options)
        let started = Date()
        var failure: LedgerError?
        do { try ledger.append(event()) } catch { failure = error }
        let waited = Date().timeIntervalSince(started)
        guard case .writerBusy(_, let holder, _)? = failure else {
            Issue.record("expected writerBusy, got \(String(describing: failure))")
            return
        }
        #expect(holder == staller.pid)
        // It gave up at its timeout (a wait for the stopped writer would never end): the upper
        // bound catches a timeout applied twice, with room for a loaded machine (1.1 s failed
        // beside a release build).
        #expect(waited >= 1.0 && waited < 1.9, "gave up after \(waited) s")
        #expect(failure?.description.contains("process \(staller.pid)") == true)

        // The CLI: exit 4, one line naming the holder.
        let cliOut = try Processes.run(cli, ["append", path, "--write-timeout", "0.3"], input: Data(#"{"type":"t","data":{}}"#.utf8))
        #expect(cliOut.status == 4, "\(cliOut.stderr)")
        #expect(cliOut.stderr.contains("writer busy") && cliOut.stderr.contains("process \(staller.pid)"), "\(cliOut.stderr)")
        #expect(cliOut.stderr.split(separator: "\n").count == 1)

        // Continued, the stopped writer commits, and the append goes through.
        kill(staller.pid, SIGCONT)
        var patient = LedgerOptions(role: "app")
        patient.writeTimeout = 10
        #expect(try Ledger(path: path, options: patient).append(event()) == 2)
        #expect(line(staller, startingWith: "committed") != nil)
        #expect(try ledger.read({ try $0.count() }) == 2, "nothing acknowledged may be lost")
    }

    @Test(.timeLimit(.minutes(10)))
    func aStoppedWriterThatIsKilledReleasesTheLockAtOnce() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        _ = try Ledger(path: path).append(event())
        let staller = try Processes.start(agent, ["stall-in-write", path, "60"])
        #expect(line(staller, startingWith: "in-txn") != nil)
        kill(staller.pid, SIGSTOP)
        staller.kill()
        _ = try staller.wait(timeout: 10)
        var options = LedgerOptions(role: "app")
        options.writeTimeout = 1
        let started = Date()
        #expect(try Ledger(path: path, options: options).append(event()) == 2)
        #expect(Date().timeIntervalSince(started) < 1, "the killed holder's lock was not released at once")
    }

    /// LMDB's first opener holds byte 0 of lock.mdb exclusively while it initialises; stopped
    /// there, it would make every other open wait for ever.
    @Test(.timeLimit(.minutes(10)))
    func anOpenerStoppedWhileOpeningMakesOthersFailNotHang() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        _ = try Ledger(path: path).append(event())
        let holder = try Processes.start(agent, ["hold-open-lock", path])
        defer { holder.kill(); _ = try? holder.wait(timeout: 10) }
        #expect(line(holder, startingWith: "holding") != nil, "\(holder.stdoutSoFar)")
        let started = Date()
        let out = try Processes.run(agent, ["open", path], timeout: 30)
        #expect(out.status == 2 && out.stdout.contains("stopped or suspended while opening"), "\(out.stdout) \(out.stderr)")
        #expect(Date().timeIntervalSince(started) < 10)
        holder.kill()
        _ = try holder.wait(timeout: 10)
        #expect(try Processes.run(agent, ["open", path]).stdout.contains("count 1"))
    }

    @Test func anIdleLedgerClosesItsFilesAndReopensOnTheNextCall() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("ledger")
        var options = LedgerOptions(role: "widget")
        options.closesWhenIdle = 0.2
        let ledger = try Ledger(path: path, options: options)
        try ledger.append(event())
        let lockFile = path + "/lock.mdb"
        #expect(anyPosixLock(onFile: lockFile))
        // The idle close is the event: waited for, not given a budget.
        _ = waitUntil { posixLocks(onFile: lockFile).isEmpty }
        #expect(posixLocks(onFile: lockFile).isEmpty, "still open after the idle period: \(posixLocks(onFile: lockFile))")
        // The next calls reopen transparently.
        #expect(try ledger.read({ try $0.count() }) == 1)
        #expect(try ledger.append(event()) == 2)
        #expect(try ledger.maintenance.verify().isHealthy)
    }
}
