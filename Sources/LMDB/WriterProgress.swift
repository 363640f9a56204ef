#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a waiter for the writer lock looks at to tell a holder that is slow from one that is
/// stopped (docs/operations.md, "Slow is not stopped"): a writer gives up with
/// ``LMDBError/writeLockTimeout`` only when nothing moved for the whole write timeout.
///
/// Two signals, compared between consecutive looks (``WriterWait``: every quarter of the
/// timeout, at most 250 ms apart):
/// - **commits**: the last committed transaction of the file (any process) — writers that keep
///   committing are making progress however long a waiter has been queued behind them;
/// - **the holder itself** (Linux): its CPU time (`/proc/PID/stat`, every thread) advanced, or
///   one of its threads is runnable or in uninterruptible I/O (`R`, `D` in `/proc/PID/task/*/stat`)
///   — running, only descheduled or waiting for the disk — unless its cgroup is frozen (the
///   freezer's tasks show `D` on Linux 6.1+). A holder stopped (`SIGSTOP`, a debugger), frozen
///   (cgroup freezer) or sleeping inside its write shows neither.
///
/// Apple platforms show no other process's scheduling state to a sandboxed app, so there only
/// the commits count (``holderActivity(_:)`` returns nil).
struct WriterProgress: Equatable {
    /// The file's last committed transaction id.
    var lastTransaction: Int
    /// The process holding the writer lock (nil: none, or it cannot be told).
    var holder: Int32?
    /// The holder's CPU time in clock ticks (nil: not visible on this platform).
    var holderCPU: Int?
    /// One of the holder's threads is runnable or in uninterruptible I/O right now.
    var holderRunning: Bool

    /// What one look at a holder shows.
    struct Activity: Equatable {
        var cpuTicks: Int
        var running: Bool
    }

    init(lastTransaction: Int, holder: Int32?) {
        self.lastTransaction = lastTransaction
        self.holder = holder
        let activity = holder.flatMap(Self.holderActivity)
        self.holderCPU = activity?.cpuTicks
        self.holderRunning = activity?.running ?? false
    }

    /// What a waiter concludes from this look, compared with the previous one.
    enum Verdict: Equatable {
        /// Transactions committed, or the lock changed hands: the writers are moving.
        case committing
        /// The same holder, running (CPU time advanced, or runnable now) but not committing.
        case holderRunning
        /// The same holder, neither running nor committing: stopped, frozen or asleep in its write.
        case stalled
    }

    func verdict(since earlier: WriterProgress) -> Verdict {
        if lastTransaction != earlier.lastTransaction || holder != earlier.holder || holder == nil { return .committing }
        if holderRunning { return .holderRunning }
        if let now = holderCPU, let then = earlier.holderCPU, now != then { return .holderRunning }
        return .stalled
    }

    /// How `pid` is doing: its CPU time and whether any thread is runnable or in
    /// uninterruptible I/O. Nil where the platform does not show it, or the process is gone.
    static func holderActivity(_ pid: Int32) -> Activity? {
        #if os(Linux)
        guard let stat = readSmallFile("/proc/\(pid)/stat"), let fields = statFields(stat), fields.count > 12,
              let utime = Int(fields[11]), let stime = Int(fields[12]) else { return nil }
        if fields[0] == "Z" || fields[0] == "X" { return nil }  // dead: its locks are gone
        var running = fields[0] == "R" || fields[0] == "D"
        if !running, let tasks = opendir("/proc/\(pid)/task") {
            defer { closedir(tasks) }
            while !running, let entry = readdir(tasks) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                    String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
                }
                guard name.first?.isNumber == true, let text = readSmallFile("/proc/\(pid)/task/\(name)/stat"),
                      let state = statFields(text)?.first else { continue }
                running = state == "R" || state == "D"
            }
        }
        // A frozen cgroup's tasks show `D` on Linux 6.1+ (cgroup v1 freezer): frozen is not running.
        if running, isFrozen(pid) { running = false }
        return Activity(cpuTicks: utime + stime, running: running)
        #else
        return nil
        #endif
    }

    /// Whether `pid` is in a frozen cgroup: the v1 freezer's `freezer.state` (`FROZEN`, or
    /// `FREEZING` on the way), or v2's `cgroup.freeze` (`1`). What `docker pause`, systemd and
    /// Android's app freezer do to a process; it looks like uninterruptible I/O from outside.
    static func isFrozen(_ pid: Int32) -> Bool {
        #if os(Linux)
        guard let groups = readSmallFile("/proc/\(pid)/cgroup", limit: 4096) else { return false }
        for line in groups.split(separator: "\n") {
            // "ID:CONTROLLERS:PATH"; the path may itself hold colons.
            let parts = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard parts.count == 3 else { continue }
            let path = String(parts[2])
            if parts[1].split(separator: ",").contains("freezer") {
                if let state = readSmallFile("/sys/fs/cgroup/freezer\(path)/freezer.state"),
                   state.hasPrefix("FROZEN") || state.hasPrefix("FREEZING") { return true }
            } else if parts[0] == "0", parts[1].isEmpty {
                if let freeze = readSmallFile("/sys/fs/cgroup\(path)/cgroup.freeze"), freeze.hasPrefix("1") { return true }
            }
        }
        #endif
        return false
    }

    /// The fields of a `/proc` stat line after the command name, from the state on (the name is
    /// in parentheses and may hold spaces and parentheses itself: split after the last `)`).
    static func statFields(_ line: String) -> [Substring]? {
        // Bytes, not Characters: a name ending in a prepend character (U+0600) joins the `)`
        // into one grapheme cluster, which a search for the Character `)` misses.
        guard let close = line.utf8.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        return line[line.utf8.index(after: close)...].split(separator: " ", omittingEmptySubsequences: true)
    }

    /// The first `limit` bytes of a small file (a `/proc` or cgroup entry), or nil.
    private static func readSmallFile(_ path: String, limit: Int = 1024) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: limit)
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        return String(decoding: buffer[..<count], as: UTF8.self)
    }
}
