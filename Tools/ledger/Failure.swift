import ArgumentParser
import Foundation
import InboxLedger
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Documented exit codes (docs/cli.md).
enum ExitStatus {
    static let ok: Int32 = 0
    static let problems: Int32 = 1
    static let usage: Int32 = 2
    static let cannotOpen: Int32 = 3
    static let storage: Int32 = 4
}

/// Prints `message` on stderr, if it can: a closed or full stderr leaves nothing to tell it
/// to, so a failed write is dropped here (never a crash, whatever SIGPIPE's disposition).
func printError(_ message: String) {
    _ = StandardStream.write(("ledger: " + message + "\n").utf8, to: STDERR_FILENO)
}

/// Writes `text` and a newline to stdout at once (no buffer: what returned was handed to the
/// reader). A failed write — EPIPE when the reader of a pipe has gone (with SIGPIPE ignored,
/// as supervisors often start processes), ENOSPC, EIO — is reported on stderr and ends the
/// command with exit 4 before it does anything else (a consumer's cursor is not committed).
func emit(_ text: String) throws(ExitCode) {
    if let code = StandardStream.write((text + "\n").utf8, to: STDOUT_FILENO) {
        throw StandardStream.outputFailed(code)
    }
}

/// Unbuffered, checked writes to the standard streams.
enum StandardStream {
    /// Writes every byte of `bytes` to `fd`; returns the `errno` of a failed write, nil when all
    /// were written.
    static func write(_ bytes: some Collection<UInt8>, to fd: Int32) -> Int32? {
        let buffer = Array(bytes)
        return buffer.withUnsafeBytes { raw -> Int32? in
            guard let base = raw.baseAddress else { return nil }
            var offset = 0
            while offset < raw.count {
                #if canImport(Glibc)
                let n = Glibc.write(fd, base + offset, raw.count - offset)
                #else
                let n = Darwin.write(fd, base + offset, raw.count - offset)
                #endif
                if n < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                offset += n
            }
            return nil
        }
    }

    /// Reports a failed write to stdout and returns the exit to throw.
    static func outputFailed(_ code: Int32) -> ExitCode {
        let reason = code == EPIPE ? "the reader of the pipe has gone (EPIPE)" : "\(String(cString: strerror(code))) (errno \(code))"
        printError("cannot write to standard output: \(reason); stopped, nothing more was done")
        return ExitCode(ExitStatus.storage)
    }

    /// Returns true once nobody can read stdout any more: the reading end of its pipe (or
    /// socket) was closed, or stdout itself is closed. Never returns for a terminal, a file or
    /// /dev/null; false at once if stdout cannot be watched. Blocks its thread (``ReaderWatch``).
    static func waitUntilReaderGone() -> Bool {
        var watched = pollfd(fd: STDOUT_FILENO, events: 0, revents: 0)
        while true {
            let n = poll(&watched, 1, -1)
            if n < 0 {
                if errno == EINTR { continue }
                return false
            }
            if watched.revents & Int16(POLLERR | POLLHUP | POLLNVAL) != 0 { return true }
        }
    }
}

/// Tells a command that waits between writes (`events --follow`) that the reader of stdout has
/// gone, without waiting for the next write to fail: one thread blocks in `poll` on stdout.
final class ReaderWatch: Sendable {
    private struct State {
        var gone = false
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let state = Mutex(State())

    init() {
        Thread.detachNewThread { [self] in
            guard StandardStream.waitUntilReaderGone() else { return }
            let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
                s.gone = true
                defer { s.waiter = nil }
                return s.waiter
            }
            waiter?.resume()
        }
    }

    /// Returns when the reader of stdout has gone, or at once when the task is cancelled.
    func wait() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { s -> Bool in
                    if s.gone || Task.isCancelled { return true }
                    s.waiter = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
                defer { s.waiter = nil }
                return s.waiter
            }
            waiter?.resume()
        }
    }
}

/// Opens a ledger for a subcommand, printing a clear error and exiting 3 when it cannot.
/// A command that only reads (`writes: false`) always opens read-only, so it writes nothing:
/// a ledger of an older format or with older projections stays byte-identical (only a
/// writable opening upgrades it), and no missing table is created.
/// With `reportErrors: false` the `LedgerError` is thrown as it is, for the caller to report.
func openLedger(_ location: LedgerLocation, role: String = "cli", writes: Bool, create: Bool = false, reportErrors: Bool = true,
                configure: (inout LedgerOptions) -> Void = { _ in }) throws -> Ledger {
    var options = LedgerOptions(role: role)
    options.readOnly = location.readOnly || !writes
    options.create = create
    configure(&options)
    do {
        return try Ledger(path: location.path, options: options)
    } catch {
        throw reportErrors ? fail(error) : error
    }
}

/// Reports `error` and returns the exit to throw.
func fail(_ error: LedgerError) -> ExitCode {
    printError(error.description)
    switch error {
    case .notALedger, .newerFormat, .permissionDenied, .corruptStore, .projectionUpgradeNeeded, .filesNotShared: return ExitCode(ExitStatus.cannotOpen)
    case .invalidEvent, .invalidArgument, .eventTooLarge, .idempotencyConflict, .corruptRecord, .unknownConsumer, .consumerGap,
         .consumerConflict, .headMoved, .eventDecoding, .projectionRejected, .projectionUnavailable, .projectionBuilding: return ExitCode(ExitStatus.problems)
    case .readOnly, .newerProjections, .storeFull, .storage, .writerBusy, .suspended, .readerSlotsFull, .unexpected, .cancelled: return ExitCode(ExitStatus.storage)
    }
}
