import ArgumentParser
import Foundation
import InboxLedger

struct Append: ParsableCommand, GuardedCommand {
    static let configuration = CommandConfiguration(
        abstract: "Append events read as JSON lines from stdin.",
        discussion: """
            Each line is {"type": "<name>", "data": <any JSON>, "key": "<optional idempotency key>"}.
            Lines are committed in transactions of --batch lines; each committed event's sequence
            number is printed on stdout as soon as its transaction commits. A malformed line is
            reported on stderr with its line number, nothing of its batch is written, and the
            command exits 1; earlier batches stay committed. Blank lines are skipped.

            Example:
              echo '{"type":"badge.adjusted","data":{"delta":1}}' | ledger append /tmp/inbox --origin widget
            """
    )

    @OptionGroup var location: LedgerLocation

    @Option(help: "The origin role recorded with each event (app, widget, notification-service, …).")
    var origin = "cli"

    @Option(help: "Lines per transaction.")
    var batch = 1

    @Option(help: "Commit durability (raised to the ledger's durability floor if weaker).")
    var durability: LedgerDurability = .durable

    @Option(name: .customLong("write-timeout"), help: "Seconds to wait for another process's write without progress before failing (exit 4).")
    var writeTimeout: Double = 5

    func validate() throws {
        guard batch >= 1 else { throw ValidationError("--batch must be at least 1") }
        guard !location.readOnly else { throw ValidationError("append cannot run with --read-only") }
        guard writeTimeout.isFinite, writeTimeout >= 0 else { throw ValidationError("--write-timeout must be a number of seconds, 0 or more") }
    }

    func run() throws {
        let ledger = try openLedger(location, role: origin, writes: true, create: true) {
            $0.durability = durability
            $0.writeTimeout = writeTimeout
        }
        var pending: [NewEvent] = []
        var pendingLines: [Int] = []
        var lineNumber = 0

        /// Commits the pending lines as one transaction and prints their sequence numbers.
        func commit() throws {
            guard !pending.isEmpty else { return }
            let sequences: [UInt64]
            do {
                sequences = try ledger.append(contentsOf: pending)
            } catch {
                if case .invalidEvent(let index, let field, let reason) = error, index < pendingLines.count {
                    printError("line \(pendingLines[index]): invalid event: \(field): \(reason) (nothing of its batch was written)")
                    throw ExitCode(ExitStatus.problems)
                }
                if case .eventTooLarge(let index, let size, let limit) = error, index < pendingLines.count {
                    printError("line \(pendingLines[index]): event of \(size) bytes exceeds the \(limit)-byte limit (nothing of its batch was written)")
                    throw ExitCode(ExitStatus.problems)
                }
                let first = pendingLines[0], last = pendingLines[pendingLines.count - 1]
                let lines = first == last ? "line \(first)" : "lines \(first)–\(last)"
                if case .writerBusy = error {
                    // One line: the error names the holder and says nothing was written.
                    printError("\(lines): \(error.description)")
                    throw ExitCode(ExitStatus.storage)
                }
                printError(lines + ": nothing of this batch was written")
                throw fail(error)
            }
            pending.removeAll(keepingCapacity: true)
            pendingLines.removeAll(keepingCapacity: true)
            // The batch is committed; a failed write stops before the next one is appended.
            try emit(sequences.map(String.init).joined(separator: "\n"))
        }

        var reader = LineReader()
        while true {
            let bytes: [UInt8]
            do {
                guard let line = try reader.next() else { break }
                bytes = line
            } catch {
                printError("line \(lineNumber + 1): " + (error == .lineTooLong ? "longer than \(LineReader.maxLineBytes >> 20) MiB" : "cannot read standard input")
                    + " (nothing of its batch was written)")
                throw ExitCode(ExitStatus.problems)
            }
            lineNumber += 1
            if bytes.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { continue }
            do throws(LedgerError) {
                guard String(validating: bytes, as: UTF8.self) != nil else {
                    throw .invalidEvent(index: pending.count, field: "json", reason: "not valid UTF-8")
                }
                pending.append(try EventJSON.parse(Data(bytes), index: pending.count))
                pendingLines.append(lineNumber)
            } catch {
                if case .invalidEvent(_, let field, let reason) = error {
                    printError("line \(lineNumber): invalid event: \(field): \(reason) (nothing of its batch was written)")
                } else {
                    printError("line \(lineNumber): \(error)")
                }
                throw ExitCode(ExitStatus.problems)
            }
            if pending.count == batch { try commit() }
        }
        try commit()
    }
}
