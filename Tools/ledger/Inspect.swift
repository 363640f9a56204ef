import ArgumentParser
import Foundation
import InboxLedger

struct Inspect: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show a ledger's identity, contents and storage health.",
        discussion: """
            Works while other processes write the ledger and never blocks them. Falls back to
            read-only when the directory is not writable. --json prints one object whose field
            names are a stable contract (docs/cli.md).

            Example:
              ledger inspect /tmp/inbox --json
            """
    )

    @OptionGroup var location: LedgerLocation

    @Flag(help: "Print one JSON object instead of the human summary.")
    var json = false

    @Option(help: "How many of the latest events to show.")
    var last = 5

    func run() throws {
        let ledger = try openLedger(location, writes: false)
        let stats: LedgerStatistics
        let recent: [Event]
        do {
            stats = try ledger.statistics()
            let from = stats.headSequence > UInt64(max(0, last)) ? stats.headSequence - UInt64(max(0, last)) : 0
            recent = try ledger.events(after: from, limit: max(0, last))
        } catch {
            throw fail(error)
        }
        if json {
            emit(try jsonText(stats, recent: recent))
        } else {
            emit(humanText(stats, recent: recent, path: ledger.path))
        }
    }

    func jsonText(_ s: LedgerStatistics, recent: [Event]) throws -> String {
        let object: [String: Any] = [
            "formatVersion": Int(s.metadata.formatVersion),
            "ledgerID": s.metadata.ledgerID,
            "createdAt": Timestamp(micros: s.metadata.createdAtMicros).iso8601,
            "headSequence": s.headSequence,
            "firstSequence": s.firstSequence,
            "eventCount": s.eventCount,
            "countsByType": s.countsByType,
            "countsByOrigin": s.countsByOrigin,
            "idempotencyKeys": s.idempotencyKeys,
            "fileBytes": s.fileBytes,
            "mapBytes": s.mapBytes,
            "usedBytes": s.usedBytes,
            "pageSize": s.pageSize,
            "maxReaders": s.maxReaders,
            "readers": s.readers.map { ["pid": Int($0.pid), "transactionID": $0.transactionID as Any? ?? NSNull()] as [String: Any] },
            "lastEvents": recent.map(EventFormatting.jsonObject),
        ]
        return try EventFormatting.json(object)
    }

    func humanText(_ s: LedgerStatistics, recent: [Event], path: String) -> String {
        var lines: [String] = []
        lines.append("Ledger \(path)")
        lines.append("  id         \(s.metadata.ledgerID)")
        lines.append("  format     \(s.metadata.formatVersion), created \(Timestamp(micros: s.metadata.createdAtMicros).iso8601)")
        lines.append("  events     \(s.eventCount) (sequences \(s.firstSequence)–\(s.headSequence)), \(s.idempotencyKeys) idempotency keys")
        lines.append("  by type    " + Units.list(s.countsByType))
        lines.append("  by origin  " + Units.list(s.countsByOrigin))
        let percent = s.mapBytes > 0 ? Double(s.usedBytes) * 100 / Double(s.mapBytes) : 0
        lines.append("  storage    data.mdb \(Units.bytes(s.fileBytes)), map \(Units.bytes(s.mapBytes)) (\(String(format: "%.0f", percent)) % used), page \(Units.bytes(s.pageSize))")
        let active = s.readers.filter { $0.transactionID != nil }.count
        lines.append("  readers    \(s.readers.count) of \(s.maxReaders) slots held, \(active) reading now")
        if !recent.isEmpty {
            lines.append("  last \(recent.count) events")
            for event in recent.reversed() {
                lines.append("    " + EventFormatting.line(event, width: 74))
            }
        }
        return lines.joined(separator: "\n")
    }
}
