import ArgumentParser
import Foundation
import InboxLedger

struct Verify: ParsableCommand, GuardedCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check a ledger: checksums, density, projections, consumers, snapshots, readers.",
        discussion: """
            Exits 0 when healthy, 1 with a precise report (sequence numbers, what differs) when not.
            Works read-only and while other processes write.

            Example:
              ledger verify /tmp/inbox --json
            """
    )

    @OptionGroup var location: LedgerLocation

    @Flag(help: "Print the report as JSON.")
    var json = false

    /// The checking child dying of a fault is a finding like any other (exit 1).
    var crashReport: CrashReport { .verifyFinding(path: location.path, json: json) }

    /// Runs in the guarded child (``Guarded``): a crash while reading is reported by ``crashed(_:)``.
    func run() throws {
        let ledger: Ledger
        do {
            ledger = try openLedger(location, writes: false, reportErrors: false)
        } catch LedgerError.corruptStore(let path, let reason) {
            // LMDB refuses the store: name the damaged pages if a walk of the file finds them.
            let pages = LedgerMaintenance.damagedPages(at: path)
            guard !pages.isEmpty else { throw fail(LedgerError.corruptStore(path: path, reason: reason)) }
            let findings = [reason] + pages
            if json {
                try emit(try jsonLine(VerifyOutput(damaged: findings)))
            } else {
                try emit(([Style.bad("DAMAGED: \(location.path)")] + findings.map { Style.bad("  problem: ") + $0 }).joined(separator: "\n"))
            }
            throw ExitCode(ExitStatus.problems)
        } catch let error as LedgerError {
            throw fail(error)
        }
        let report: VerificationReport
        do { report = try ledger.maintenance.verify() } catch { throw fail(error) }
        if json {
            try emit(try jsonLine(VerifyOutput(report)))
        } else {
            var lines = [report.isHealthy ? Style.good("OK: \(location.path) is healthy") : Style.bad("DAMAGED: \(location.path)")]
            lines.append("  \(report.eventsChecked) records checked (sequences \(report.firstSequence)–\(report.headSequence)), \(report.snapshotsChecked) snapshots")
            for f in report.findings { lines.append(Style.bad("  problem: ") + f.description) }
            for w in report.warnings { lines.append(Style.warn("  warning: ") + w.description) }
            try emit(lines.joined(separator: "\n"))
        }
        if !report.isHealthy { throw ExitCode(ExitStatus.problems) }
    }
}
