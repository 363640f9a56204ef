import ArgumentParser
import Foundation
import InboxLedger

struct Compact: AsyncParsableCommand, GuardedCommand {
    static let configuration = CommandConfiguration(
        abstract: "Snapshot the projections and trim the log (once, or as a worker).",
        discussion: """
            Trims events up to min(snapshot, every live consumer's cursor, head − retained tail),
            in short transactions so writers are not stalled. --dry-run reports what would be
            trimmed and what blocks it. --watch keeps running, compacting whenever the trigger
            fires, until interrupted. --copy-to writes a compacted copy of the whole environment
            (LMDB's compacting copy: the offline way to shrink the file) and trims nothing.

            Examples:
              ledger compact /tmp/inbox --dry-run
              ledger compact /tmp/inbox --retained-tail 500 --json
              ledger compact /tmp/inbox --copy-to /tmp/inbox-small
            """
    )

    @OptionGroup var location: LedgerLocation

    @Flag(help: "Report what would be trimmed, write nothing.")
    var dryRun = false

    @Flag(help: "Keep running: compact whenever the trigger fires.")
    var watch = false

    @Flag(help: "Print the report as JSON.")
    var json = false

    @Option(help: "Always keep this many of the latest events.")
    var retainedTail = 1_000

    @Option(help: "Seconds of silence after which a consumer no longer holds trimming back.")
    var consumerLease: Double = 7 * 86_400

    @Option(help: "Events deleted per transaction.")
    var chunkSize = 1_000

    @Option(help: "Snapshots to keep.")
    var keepSnapshots = 2

    @Option(help: "Seconds an idempotency key is remembered after its event.")
    var keyRetention: Double = 7 * 86_400

    @Option(help: "With --watch: compact when the log holds more events than this.")
    var triggerEvents = 10_000

    @Option(help: "Write a compacted copy of the environment into this (new or empty) directory.")
    var copyTo: String?

    func validate() throws {
        guard retainedTail >= 0, chunkSize >= 1, keepSnapshots >= 1, consumerLease >= 0, keyRetention >= 0, triggerEvents >= 0 else {
            throw ValidationError("--retained-tail, --consumer-lease, --key-retention and --trigger-events must not be negative; --chunk-size and --keep-snapshots must be at least 1")
        }
        if watch && (dryRun || copyTo != nil) { throw ValidationError("--watch cannot be combined with --dry-run or --copy-to") }
        if !dryRun && copyTo == nil && location.readOnly { throw ValidationError("compaction writes: drop --read-only or use --dry-run") }
    }

    var policy: CompactionPolicy {
        var p = CompactionPolicy()
        p.retainedTail = retainedTail
        p.consumerLeaseSeconds = consumerLease
        p.chunkSize = chunkSize
        p.keepSnapshots = keepSnapshots
        p.keyRetentionSeconds = keyRetention
        p.triggerEvents = triggerEvents
        return p
    }

    func run() async throws {
        let ledger = try openLedger(location, writes: !dryRun && copyTo == nil)
        if let copyTo {
            do {
                try ledger.maintenance.compactCopy(to: copyTo)
            } catch {
                throw fail(error)
            }
            let size = (try? FileManager.default.attributesOfItem(atPath: copyTo + "/data.mdb")[.size] as? Int) ?? 0
            try emit(json ? try jsonLine(CopyOutput(copyTo: copyTo, fileBytes: size)) : "Wrote a compacted copy to \(copyTo) (data.mdb \(Units.bytes(size)))")
            return
        }
        let compactor = Compactor(ledger: ledger, policy: policy)
        if watch {
            try emit("Compacting \(location.path) when it holds more than \(triggerEvents) events; Ctrl-C to stop.")
            try await compactor.run()
            return
        }
        let report: CompactionReport
        do { report = try compactor.runOnce(dryRun: dryRun) } catch { throw fail(error) }
        try emit(json ? try jsonLine(CompactionOutput(report)) : Self.human(report))
    }

    static func human(_ r: CompactionReport) -> String {
        var lines: [String] = []
        let verb = r.dryRun ? "Would trim" : "Trimmed"
        if let range = r.trimmed, r.eventsTrimmed > 0 {
            lines.append("\(verb) \(r.eventsTrimmed) events (\(range.lowerBound)–\(range.upperBound))"
                + (r.dryRun ? "" : " in \(r.chunks) chunks, \(String(format: "%.3f", r.seconds)) s"))
        } else {
            lines.append(r.dryRun ? "Nothing to trim." : "Trimmed nothing.")
        }
        if let s = r.snapshotSequence {
            lines.append("  snapshot at \(s)" + (r.snapshotWritten ? " (written now)" : r.dryRun && r.eventsTrimmed > 0 ? " (to be written)" : ""))
        }
        lines.append("  log now \(r.firstSequence)–\(r.headSequence)")
        if r.keysForgotten > 0 || r.snapshotsDeleted > 0 {
            lines.append("  forgot \(r.keysForgotten) idempotency keys, deleted \(r.snapshotsDeleted) old snapshots")
        }
        for b in r.blockers { lines.append("  limited by: \(b)") }
        for c in r.expiredConsumers { lines.append("  warning: consumer '\(c)' lease expired; it no longer holds trimming back") }
        return lines.joined(separator: "\n")
    }
}
