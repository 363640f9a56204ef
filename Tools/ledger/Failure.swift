import ArgumentParser
import Foundation
import InboxLedger

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

/// Prints `message` on stderr.
func printError(_ message: String) {
    FileHandle.standardError.write(Data(("ledger: " + message + "\n").utf8))
}

/// Writes `text` to stdout and flushes, so a reader of the pipe sees it at once.
func emit(_ text: String) {
    print(text)
    fflush(nil)
}

/// Opens a ledger for a subcommand, printing a clear error and exiting 3 when it cannot.
/// A command that only reads falls back to read-only when the directory is not writable.
/// With `reportErrors: false` the `LedgerError` is thrown as it is, for the caller to report.
func openLedger(_ location: LedgerLocation, role: String = "cli", writes: Bool, create: Bool = false, reportErrors: Bool = true,
                configure: (inout LedgerOptions) -> Void = { _ in }) throws -> Ledger {
    var options = LedgerOptions(role: role)
    options.readOnly = location.readOnly
    options.create = create
    configure(&options)
    do {
        return try Ledger(path: location.path, options: options)
    } catch LedgerError.permissionDenied(_, _) where !writes && !options.readOnly {
        options.readOnly = true
        do { return try Ledger(path: location.path, options: options) } catch { throw reportErrors ? fail(error) : error }
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
         .consumerConflict, .headMoved, .eventDecoding: return ExitCode(ExitStatus.problems)
    case .readOnly, .newerProjections, .storeFull, .storage, .writerBusy, .suspended, .readerSlotsFull, .unexpected: return ExitCode(ExitStatus.storage)
    }
}
