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
            "snapshots": s.snapshots.map { ["sequence": $0.sequence, "createdAt": $0.createdAt.iso8601, "rows": $0.rows, "bytes": $0.bytes] as [String: Any] },
            "lastCompaction": s.lastCompaction.map {
                ["finishedAt": $0.finishedAt.iso8601, "snapshotSequence": $0.snapshotSequence, "trimmedThrough": $0.trimmedThrough,
                 "eventsTrimmed": $0.eventsTrimmed, "seconds": $0.seconds] as [String: Any]
            } as Any? ?? NSNull(),
            "consumers": s.consumers.map { ["name": $0.name, "cursor": $0.cursor, "lag": $0.lag, "lastSeen": $0.lastSeen.iso8601] as [String: Any] },
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
        if !s.consumers.isEmpty {
            let now = Timestamp.now.micros
            lines.append("  consumers")
            for c in s.consumers {
                let line = "    \(c.name) at \(c.cursor), lag \(c.lag), seen \(Units.duration(micros: now - c.lastSeen.micros)) ago"
                lines.append(line.count <= 80 ? line : String(line.prefix(79)) + "…")
            }
        }
        if let c = s.lastCompaction {
            lines.append("  compacted  \(c.eventsTrimmed) events trimmed through \(c.trimmedThrough) at \(c.finishedAt.iso8601.prefix(19))Z")
        }
        if !s.snapshots.isEmpty {
            lines.append("  snapshots  " + s.snapshots.map { "at \($0.sequence) (\($0.rows) rows)" }.joined(separator: " · "))
        }
        if !recent.isEmpty {
            lines.append("  last \(recent.count) events")
            for event in recent.reversed() {
                lines.append("    " + EventFormatting.line(event, width: 74))
            }
        }
        return lines.joined(separator: "\n")
    }
}
