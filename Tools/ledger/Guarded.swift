import Foundation
import InboxLedger

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs the reading part of `verify` and `inspect` in a child process (docs/reliability.md,
/// "Damaged pages"). LMDB cannot be made to tolerate every damaged page: one it trips on is an
/// `abort()` or a SIGBUS that no code in the process can catch. The parent re-runs this very
/// command with the same arguments in a child and, if the child dies of a signal, reports
/// that as what it is — damage — instead of dying itself.
enum Guarded {
    /// Set in the child's environment: the child does the work itself.
    static let variable = "LEDGER_GUARDED_CHILD"

    /// Whether this process is the guarded child (or guarding is impossible): then the caller
    /// does the work. Otherwise runs the child, relays its exit status, and reports a signal
    /// through `onSignal`, which returns the exit code to end with.
    static func runInChild(onSignal: (String) -> Int32) -> Bool {
        if ProcessInfo.processInfo.environment[variable] != nil { return true }
        guard let executable = Bundle.main.executablePath else { return true }
        let child = Process()
        child.executableURL = URL(fileURLWithPath: executable)
        child.arguments = Array(CommandLine.arguments.dropFirst())
        var environment = ProcessInfo.processInfo.environment
        environment[variable] = "1"
        child.environment = environment
        do { try child.run() } catch { return true }  // cannot spawn (sandbox): do it here, unguarded
        child.waitUntilExit()
        fflush(nil)
        guard child.terminationReason == .uncaughtSignal else { exit(child.terminationStatus) }
        let signal = child.terminationStatus
        // Only a fault is damage; Ctrl-C, a kill or a closed pipe reached the child as they
        // reached this process, and end it the same way.
        guard [SIGBUS, SIGSEGV, SIGABRT, SIGILL, SIGFPE, SIGTRAP].contains(signal) else { exit(128 + signal) }
        exit(onSignal(signalName(signal)))
    }

    static func signalName(_ signal: Int32) -> String {
        switch signal {
        case SIGBUS: "SIGBUS"
        case SIGSEGV: "SIGSEGV"
        case SIGABRT: "SIGABRT (an LMDB assertion)"
        case SIGKILL: "SIGKILL"
        default: "signal \(signal)"
        }
    }
}
