import ArgumentParser
import Foundation
import InboxLedger

struct Verify: ParsableCommand {
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

    func run() throws {
        let ledger = try openLedger(location, writes: false)
        let report: VerificationReport
        do { report = try ledger.verify() } catch { throw fail(error) }
        if json {
            emit(try EventFormatting.json([
                "healthy": report.isHealthy, "eventsChecked": report.eventsChecked,
                "firstSequence": report.firstSequence, "headSequence": report.headSequence,
                "snapshotsChecked": report.snapshotsChecked,
                "findings": report.findings.map(\.description), "warnings": report.warnings.map(\.description),
            ] as [String: Any]))
        } else {
            var lines = [report.isHealthy ? Style.good("OK: \(location.path) is healthy") : Style.bad("DAMAGED: \(location.path)")]
            lines.append("  \(report.eventsChecked) records checked (sequences \(report.firstSequence)–\(report.headSequence)), \(report.snapshotsChecked) snapshots")
            for f in report.findings { lines.append(Style.bad("  problem: ") + f.description) }
            for w in report.warnings { lines.append(Style.warn("  warning: ") + w.description) }
            emit(lines.joined(separator: "\n"))
        }
        if !report.isHealthy { throw ExitCode(ExitStatus.problems) }
    }
}
