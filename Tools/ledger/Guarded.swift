import Foundation
import InboxLedger
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A subcommand that opens a ledger, run in a guarded child process (docs/reliability.md,
/// "Damaged pages"): every one of them but the simulation's internal roles.
protocol GuardedCommand {
    /// Where the ledger is.
    var location: LedgerLocation { get }
    /// How a child killed by a fault is reported.
    var crashReport: CrashReport { get }
}

extension GuardedCommand {
    var crashReport: CrashReport { .corruptStore(path: location.path) }
}

/// How the parent reports a child that reading the store killed.
enum CrashReport: Sendable {
    /// A corrupt store, exit 3 (every command but verify).
    case corruptStore(path: String)
    /// verify: the damage is its finding, exit 1.
    case verifyFinding(path: String, json: Bool)

    /// Reports that the child died of `signal` (its name); returns the exit code to end with.
    func report(_ signal: String) -> Int32 {
        switch self {
        case .corruptStore(let path):
            printError("\(path): corrupt store: reading it crashed the process (\(signal)); run `ledger verify \(path)` for the damaged pages")
            return ExitStatus.cannotOpen
        case .verifyFinding(let path, let json):
            let finding = "reading the store through LMDB crashed the checking process (\(signal)): a page is damaged; see docs/reliability.md"
            let text: String
            if json {
                // Encoding a bool and strings cannot fail.
                text = (try? jsonLine(VerifyOutput(damaged: [finding]))) ?? #"{"healthy":false}"#
            } else {
                text = Style.bad("DAMAGED: \(path)") + "\n" + Style.bad("  problem: ") + finding
            }
            do { try emit(text) } catch { return ExitStatus.storage }  // emit reported it
            return ExitStatus.problems
        }
    }
}

/// The process boundary around every command that reads a ledger. LMDB cannot be made to
/// tolerate every damaged page: one it trips on is an `abort()` (an `mdb_assert`, e.g. IS_LEAF)
/// or a SIGBUS that no code in the process can catch. So the command's process re-executes
/// itself with the same arguments as a child that does the work — stdin, stdout and stderr
/// are the child's, and ignored signals (a supervisor's ignored SIGPIPE) stay ignored — relays
/// its exit status, and reports a fault signal as what it is, damage, instead of dying of it.
enum Guarded {
    /// Set in the child's environment: the child does the work itself.
    static let variable = "LEDGER_GUARDED_CHILD"

    /// The child's pid while it runs (0 before and after), for the forwarding signal handler.
    private static let child = Atomic<Int32>(0)

    /// Signals the parent forwards to the child, so that a supervisor's `kill` of the pid it
    /// started (SIGTERM) stops the work, not only the waiting parent.
    private static let forwarded: [Int32] = [SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2]

    /// Signals that are a fault of the process itself: damage met while reading.
    private static let faults: [Int32] = [SIGBUS, SIGSEGV, SIGABRT, SIGILL, SIGFPE, SIGTRAP]

    /// Whether this process is the guarded child (or guarding is impossible): then the caller
    /// does the work. Otherwise runs the child, ends this process with its exit status, and
    /// reports a fault signal through `onSignal`, which returns the exit code to end with.
    static func runInChild(onSignal: (String) -> Int32) -> Bool {
        if let value = getenv(variable) {
            endWithParent(descriptor: Int32(String(cString: value)) ?? -1)
            return true
        }
        guard let executable = Bundle.main.executablePath else { return true }
        let arguments = [executable] + CommandLine.arguments.dropFirst()
        // The child's lifeline: it holds the reading end of a pipe whose only writing end is
        // this process's; end of file there means this process is gone (even by SIGKILL, which
        // cannot be forwarded), and the child ends too instead of working on as an orphan.
        var lifeline: [Int32] = [-1, -1]
        guard pipe(&lifeline) == 0, fcntl(lifeline[1], F_SETFD, FD_CLOEXEC) == 0 else { return true }
        let environment = ProcessInfo.processInfo.environment.filter { $0.key != variable }.map { "\($0.key)=\($0.value)" }
            + ["\(variable)=\(lifeline[0])"]
            // A crash of the child is reported here in one line: no runtime backtrace on stderr
            // unless asked for.
            + (getenv("SWIFT_BACKTRACE") == nil ? ["SWIFT_BACKTRACE=enable=no"] : [])

        // Forwarding handlers first, with the forwarded signals blocked until the child's pid is
        // known: one arriving in between is delivered (and forwarded) once they are unblocked.
        var block = sigset_t()
        sigemptyset(&block)
        for s in forwarded { sigaddset(&block, s) }
        var original = sigset_t()
        sigprocmask(SIG_BLOCK, &block, &original)
        for s in forwarded where !isIgnored(s) {
            var action = sigaction()
            #if canImport(Glibc)
            action.__sigaction_handler.sa_handler = forward
            #else
            action.__sigaction_u.__sa_handler = forward
            #endif
            action.sa_flags = SA_RESTART
            sigemptyset(&action.sa_mask)
            sigaction(s, &action, nil)
        }
        let spawned = spawn(executable, arguments, environment, mask: original)
        close(lifeline[0])
        guard let pid = spawned else {
            close(lifeline[1])
            sigprocmask(SIG_SETMASK, &original, nil)
            return true  // cannot spawn (sandbox): do it here, unguarded
        }
        child.store(pid, ordering: .sequentiallyConsistent)
        sigprocmask(SIG_SETMASK, &original, nil)

        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            guard errno == EINTR else { exit(ExitStatus.storage) }  // cannot happen for our own child
        }
        child.store(0, ordering: .sequentiallyConsistent)
        let signal = status & 0x7F
        if signal == 0 { exit((status >> 8) & 0xFF) }
        // Only a fault is damage; Ctrl-C, a kill or a closed pipe reached the child as they
        // reached this process, and end it the same way.
        guard faults.contains(signal) else { exit(128 + signal) }
        exit(onSignal(signalName(signal)))
    }

    /// In the child: a thread waits on the lifeline's reading end `descriptor` and ends this
    /// process at once when the parent is gone (as a kill would: every write of the ledger is
    /// atomic, so nothing half-done remains).
    private static func endWithParent(descriptor: Int32) {
        guard descriptor > 2 else { return }
        Thread.detachNewThread {
            var byte: UInt8 = 0
            while true {
                let n = read(descriptor, &byte, 1)
                if n == 0 { _exit(128 + SIGHUP) }  // end of file: the parent is gone
                if n < 0 && errno != EINTR { return }  // not our lifeline: nothing to watch
            }
        }
    }

    /// The child's pid, or nil when it cannot be started. It inherits this process's
    /// descriptors and ignored signals; its signal mask is `mask`.
    private static func spawn(_ executable: String, _ arguments: [String], _ environment: [String], mask: sigset_t) -> Int32? {
        #if canImport(Glibc)
        var attributes = posix_spawnattr_t()
        #else
        var attributes: posix_spawnattr_t? = nil
        #endif
        guard posix_spawnattr_init(&attributes) == 0 else { return nil }
        defer { posix_spawnattr_destroy(&attributes) }
        var mask = mask
        posix_spawnattr_setsigmask(&attributes, &mask)
        // The forwarding handlers must not leave the child with a caught signal's disposition
        // (exec resets it anyway): default for exactly those, ignored ones stay ignored.
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for s in forwarded where !isIgnored(s) { sigaddset(&defaults, s) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup($0) } + [nil]
        defer {
            for p in argv { free(p) }
            for p in envp { free(p) }
        }
        var pid: pid_t = 0
        let code = posix_spawn(&pid, executable, nil, &attributes, argv, envp)
        return code == 0 ? pid : nil
    }

    /// Whether `signal` is ignored in this process (then it stays so, unforwarded).
    private static func isIgnored(_ signal: Int32) -> Bool {
        var current = sigaction()
        guard sigaction(signal, nil, &current) == 0 else { return false }
        #if canImport(Glibc)
        return unsafeBitCast(current.__sigaction_handler.sa_handler, to: Int.self) == unsafeBitCast(SIG_IGN, to: Int.self)
        #else
        return unsafeBitCast(current.__sigaction_u.__sa_handler, to: Int.self) == unsafeBitCast(SIG_IGN, to: Int.self)
        #endif
    }

    /// The signal handler: passes the signal on to the child (async-signal-safe: a load and `kill`).
    private static let forward: @convention(c) (Int32) -> Void = { signal in
        let pid = Guarded.child.load(ordering: .sequentiallyConsistent)
        if pid > 0 { kill(pid, signal) }
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
