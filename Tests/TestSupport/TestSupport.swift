import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A fresh temporary directory per test, removed when the value is released.
public final class TemporaryDirectory: @unchecked Sendable {
    // @unchecked: immutable after init.
    public let path: String

    public init(_ label: String = "ledger-test") {
        let template = FileManager.default.temporaryDirectory.path + "/\(label)-XXXXXX"
        var bytes = Array(template.utf8CString)
        let made = bytes.withUnsafeMutableBufferPointer { buffer -> String? in
            guard let base = buffer.baseAddress, mkdtemp(base) != nil else { return nil }
            return String(cString: base)
        }
        path = made ?? (template.replacingOccurrences(of: "XXXXXX", with: UUID().uuidString))
        if made == nil { try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true) }
    }

    /// A path inside the directory (not created).
    public func child(_ name: String) -> String { path + "/" + name }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// The directory holding the built products (the test bundle, `ledger`, `LedgerTestAgent`).
public let productsDirectory: String = {
    let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    var url = URL(fileURLWithPath: exe)
    // On macOS the test runner lives inside an .xctest bundle.
    while url.path.contains(".xctest") { url.deleteLastPathComponent() }
    if url.pathExtension == "xctest" { url.deleteLastPathComponent() }
    return url.hasDirectoryPath ? url.path : url.deletingLastPathComponent().path
}()

/// What a finished process left behind.
public struct ProcessOutput: Sendable {
    public var status: Int32
    public var stdout: String
    public var stderr: String
    /// Whether it was killed by a signal rather than exiting.
    public var signalled: Bool
}

/// Starts and watches real processes.
public enum Processes {
    /// Path of a built product, e.g. `ledger` or `LedgerTestAgent`.
    public static func product(_ name: String) -> String { productsDirectory + "/" + name }

    /// Starts `executable` with `arguments`; stdin from `input` (closed after writing).
    public static func start(_ executable: String, _ arguments: [String], input: Data? = nil, environment: [String: String]? = nil) throws -> RunningProcess {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        let out = Pipe(), err = Pipe(), inPipe = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = inPipe
        let running = RunningProcess(process: process, out: out, err: err)
        try process.run()
        if let input { inPipe.fileHandleForWriting.write(input) }
        try? inPipe.fileHandleForWriting.close()
        running.startCollecting()
        return running
    }

    /// Runs to completion (bounded by `timeout` seconds; killed past it).
    public static func run(_ executable: String, _ arguments: [String], input: Data? = nil, timeout: Double = 120, environment: [String: String]? = nil) throws -> ProcessOutput {
        let p = try start(executable, arguments, input: input, environment: environment)
        return try p.wait(timeout: timeout)
    }
}

public struct ProcessTimeout: Error, CustomStringConvertible {
    public var command: String
    public var description: String { "process did not finish in time: \(command)" }
}

/// A started process whose output is collected in the background.
public final class RunningProcess: @unchecked Sendable {
    // @unchecked: output buffers are guarded by `lock`; `process` is only used through
    // thread-safe Process API.
    public let process: Process
    private let out: Pipe
    private let err: Pipe
    private let lock = NSLock()
    private var outData = Data()
    private var errData = Data()
    private let group = DispatchGroup()

    init(process: Process, out: Pipe, err: Pipe) {
        self.process = process
        self.out = out
        self.err = err
    }

    func startCollecting() {
        for (pipe, isOut) in [(out, true), (err, false)] {
            group.enter()
            Thread.detachNewThread { [self] in
                let handle = pipe.fileHandleForReading
                while true {
                    let chunk = handle.availableData
                    if chunk.isEmpty { break }
                    lock.lock()
                    if isOut { outData.append(chunk) } else { errData.append(chunk) }
                    lock.unlock()
                }
                group.leave()
            }
        }
    }

    public var pid: Int32 { process.processIdentifier }

    /// Stdout so far.
    public var stdoutSoFar: String {
        lock.lock(); defer { lock.unlock() }
        return String(decoding: outData, as: UTF8.self)
    }

    /// Sends SIGKILL.
    public func kill() { _ = Glibc.kill(process.processIdentifier, SIGKILL) }

    /// Waits until stdout contains `text` (true) or the process has exited without writing it
    /// (false): waits for the event, whatever the machine's load; `timeout` only guards against
    /// a hang (the process is left running past it).
    public func waitForOutput(containing text: String, timeout: Double = hangGuardSeconds) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while !stdoutSoFar.contains(text) {
            if !process.isRunning {
                _ = group.wait(timeout: .now() + hangGuardSeconds)  // the rest of its output
                return stdoutSoFar.contains(text)
            }
            if Date() > deadline { return false }
            usleep(2000)
        }
        return true
    }

    /// Whether the process exits within `seconds` (it is left running if not).
    public func exits(within seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while process.isRunning {
            if Date() > deadline { return false }
            usleep(2000)
        }
        return true
    }

    /// Waits for exit, killing the process if it runs past `timeout` seconds (then throws).
    public func wait(timeout: Double = 120) throws -> ProcessOutput {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning {
            if Date() > deadline {
                kill()
                process.waitUntilExit()
                throw ProcessTimeout(command: ([process.executableURL?.lastPathComponent ?? "?"] + (process.arguments ?? [])).joined(separator: " "))
            }
            usleep(2000)
        }
        process.waitUntilExit()
        _ = group.wait(timeout: .now() + 10)
        lock.lock(); defer { lock.unlock() }
        return ProcessOutput(
            status: process.terminationStatus,
            stdout: String(decoding: outData, as: UTF8.self),
            stderr: String(decoding: errData, as: UTF8.self),
            signalled: process.terminationReason == .uncaughtSignal)
    }
}

/// How long a test waits for an event (a line, an exit, a condition) before calling it a hang:
/// minutes, so that a loaded machine only makes tests slower, never failing. Not a budget any
/// assertion relies on.
public let hangGuardSeconds: Double = 600

/// Polls `condition` until it holds (true) or `timeout` passes (false: a hang).
public func waitUntil(timeout: Double = hangGuardSeconds, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while try !condition() {
        if Date() > deadline { return false }
        usleep(2000)
    }
    return true
}

/// A small deterministic generator (SplitMix64) so randomised tests can be replayed from a seed.
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64
    public init(seed: UInt64) { state = seed }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Runs blocking work (waiting for processes, sleeping) on a thread of its own, so that a long
/// multi-process test does not hold one of the few threads of Swift's cooperative pool, on
/// which the async tests running at the same time depend (2 threads on a 2-core machine).
public func offThePool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread {
            continuation.resume(with: Result { try body() })
        }
    }
}
