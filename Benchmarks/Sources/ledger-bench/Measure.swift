// Clocks, statistics, child processes.
import Foundation
import LedgerBenchSupport
#if canImport(Glibc)
import Glibc
#endif

/// `CLOCK_MONOTONIC`, the clock the ledger uses too: one for every process on the machine, so a
/// time taken in one process compares with a time taken in another (W8).
func monotonicNanos() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// Microseconds `body` took.
func timeMicros(_ body: () throws -> Void) rethrows -> Double {
    let t0 = monotonicNanos()
    try body()
    return Double(monotonicNanos() - t0) / 1000
}

/// The value at quantile `q` (0…1) of `samples` (nearest rank).
func percentile(_ samples: [Double], _ q: Double) -> Double? {
    guard !samples.isEmpty else { return nil }
    let sorted = samples.sorted()
    return sorted[min(sorted.count - 1, max(0, Int((Double(sorted.count) * q).rounded(.up)) - 1))]
}

func median(_ values: [Double]) -> Double? { percentile(values, 0.5) }

/// User + system CPU time of this process, in microseconds.
func processCPUMicros() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1e6 + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec)
}

/// W5's cold reader, built next to this tool.
func coldReaderPath() -> String {
    let me = executablePath()
    return String(me[..<(me.lastIndex(of: "/") ?? me.startIndex)]) + "/ledger-bench-cold"
}

/// The path of this executable (children are this tool in a child mode).
func executablePath() -> String {
    var buffer = [CChar](repeating: 0, count: 4096)
    let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    if n > 0 { return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self) }
    return CommandLine.arguments[0]
}

/// A child process spawned with pipes on its stdin and stdout.
final class Child {
    let pid: pid_t
    private let input: Int32
    private let output: Int32
    private var buffered: [UInt8] = []

    /// Starts `executable` (this tool by default) with `arguments`.
    init(_ arguments: [String], executable: String = executablePath()) throws {
        var toChild: [Int32] = [0, 0], fromChild: [Int32] = [0, 0]
        guard pipe(&toChild) == 0, pipe(&fromChild) == 0 else { throw BenchFailure("pipe: errno \(errno)") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, toChild[0], 0)
        posix_spawn_file_actions_adddup2(&actions, fromChild[1], 1)
        for fd in toChild + fromChild { posix_spawn_file_actions_addclose(&actions, fd) }
        let path = executable
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        defer { for p in argv { free(p) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, path, &actions, nil, argv, environ)
        close(toChild[0])
        close(fromChild[1])
        guard rc == 0 else {
            close(toChild[1]); close(fromChild[0])
            throw BenchFailure("posix_spawn: errno \(rc)")
        }
        self.pid = pid
        input = toChild[1]
        output = fromChild[0]
    }

    deinit {
        close(input)
        close(output)
    }

    func send(_ line: String) {
        let bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeBytes { write(input, $0.baseAddress, $0.count) }
    }

    /// The next line the child printed, or nil at end of file.
    func readLine() -> String? {
        while true {
            if let newline = buffered.firstIndex(of: 10) {
                let line = String(decoding: buffered[..<newline], as: UTF8.self)
                buffered.removeSubrange(...newline)
                return line
            }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let n = read(output, &chunk, chunk.count)
            if n <= 0 { return nil }
            buffered += chunk[0..<n]
        }
    }

    /// Waits for the child to exit; its exit status (128 + signal if killed).
    func wait() throws -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            guard errno == EINTR else { throw BenchFailure("waitpid: errno \(errno)") }
        }
        return (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    }
}

/// Runs `count` closures on their own threads, started together; returns when all are done.
func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) throws -> Void) throws {
    let group = DispatchGroup()
    let failures = Failures()
    for t in 0..<count {
        group.enter()
        Thread.detachNewThread {
            do { try body(t) } catch { failures.add(error) }
            group.leave()
        }
    }
    group.wait()
    if let first = failures.first { throw first }
}

final class Failures: @unchecked Sendable {
    // @unchecked: every access holds `lock`.
    private let lock = NSLock()
    private var errors: [any Error] = []
    func add(_ error: any Error) { lock.lock(); errors.append(error); lock.unlock() }
    var first: (any Error)? { lock.lock(); defer { lock.unlock() }; return errors.first }
}

/// Latency samples gathered by several threads.
final class Samples: @unchecked Sendable {
    // @unchecked: every access holds `lock`.
    private let lock = NSLock()
    private var values: [Double] = []
    func add(_ more: [Double]) { lock.lock(); values += more; lock.unlock() }
    var all: [Double] { lock.lock(); defer { lock.unlock() }; return values }
}
