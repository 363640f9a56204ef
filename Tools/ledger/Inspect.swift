import ArgumentParser
import Foundation
import InboxLedger

struct Inspect: ParsableCommand, GuardedCommand {
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

    /// Runs in the guarded child (``Guarded``): a crash while reading is a corrupt store, exit 3.
    func run() throws {
        let ledger = try openLedger(location, writes: false)
        let stats: LedgerStatistics
        let recent: [Event]
        let widget: WidgetList
        do {
            stats = try ledger.maintenance.statistics()
            widget = try ledger.read({ try $0.widgetList(limit: 3) })
            let from = stats.headSequence > UInt64(max(0, last)) ? stats.headSequence - UInt64(max(0, last)) : 0
            recent = try ledger.read({ try $0.events(after: from, limit: max(0, last)) })
        } catch {
            throw fail(error)
        }
        // Read with the head, in one transaction; a damaged app-projection record is reported
        // here (and by verify), not a failure of inspect.
        let projections = stats.appProjections
        if json {
            var output = InspectOutput(stats, recent: recent, projections: (try? projections.get()) ?? [])
            if case .failure(let error) = projections { output.warnings.append("app projections cannot be listed: \(error)") }
            try emit(try jsonLine(output))
        } else {
            try emit(humanText(stats, recent: recent, widget: widget, projections: projections, path: ledger.path))
        }
    }

    func humanText(_ s: LedgerStatistics, recent: [Event], widget: WidgetList, projections: Result<[ProjectionInfo], LedgerError>, path: String) -> String {
        var lines: [String] = []
        lines.append("Ledger \(path)")
        lines.append("  id         \(s.metadata.ledgerID)")
        lines.append("  format     \(s.metadata.formatVersion), created \(Timestamp(micros: s.metadata.createdAtMicros).iso8601)")
        lines.append("  rules      durability floor \(s.metadata.durabilityFloor.rawValue), projection rules version \(s.metadata.projectionVersion)")
        lines.append("  events     \(s.eventCount) (sequences \(s.firstSequence)–\(s.headSequence)), \(s.idempotencyKeys) idempotency keys")
        // Types the built-in projections do not interpret (custom ones, or built-ins of a newer
        // version): those a stored app projection reads say which; the rest are kept and
        // delivered to consumers, and nothing projects them.
        let readers = Self.readers(projections)
        var unknown = false
        lines += Units.list("  by type    ", Dictionary(uniqueKeysWithValues: s.countsByType.map { type, count in
            if DomainEvent.builtInTypes.contains(type) { return (type, count) }
            if let names = readers[Self.baseType(type)] { return (type + " (projected by " + names.joined(separator: ", ") + ")", count) }
            unknown = true
            return (type + " (unknown)", count)
        }))
        if unknown {
            lines.append("             (unknown: not interpreted here; kept, delivered, not projected)")
        }
        lines += Units.list("  by origin  ", s.countsByOrigin)
        let percent = s.mapBytes > 0 ? Double(s.usedBytes) * 100 / Double(s.mapBytes) : 0
        lines.append("  storage    data.mdb \(Units.bytes(s.fileBytes)), map \(Units.bytes(s.mapBytes)) (\(String(format: "%.0f", percent)) % used), page \(Units.bytes(s.pageSize))")
        lines.append("             \(s.totalPages) pages in use (log \(s.logPages)), last transaction \(s.lastTransactionID)")
        let active = s.readers.filter { $0.transactionID != nil }.count
        let stale = s.readers.filter { !$0.isAlive }.count
        lines.append("  readers    \(s.readers.count) of \(s.maxReaders) slots held, \(active) reading now, \(stale) stale"
            + (s.oldestReaderLag.map { ", oldest \($0) txns behind" } ?? ""))
        if !s.consumers.isEmpty {
            let now = Timestamp.now.micros
            lines.append("  consumers")
            for c in s.consumers {
                let line = "    \(c.name) at \(c.cursor), lag \(c.lag), seen \(Units.duration(micros: now - c.lastSeen.micros)) ago"
                lines.append(Style.fit(line))
            }
        }
        if let c = s.lastCompaction {
            lines.append("  compacted  \(c.eventsTrimmed) events trimmed through \(c.trimmedThrough) at \(c.finishedAt.iso8601.prefix(19))Z")
        }
        if !s.snapshots.isEmpty {
            lines.append("  snapshots  " + s.snapshots.map { "at \($0.sequence) (\($0.rows) rows)" }.joined(separator: " · "))
        }
        if !widget.items.isEmpty || widget.badge > 0 || widget.pendingActions > 0 || widget.announced > 0 {
            lines.append("  widget     " + Style.widgetCounts(badge: widget.badge, unread: widget.unreadCount, announced: widget.announced, pendingActions: widget.pendingActions))
            for item in widget.items {
                let row = "    \(item.read ? " " : "•") \(item.title)"
                lines.append(Style.fit(row))
            }
        }
        lines += Self.projectionLines(projections)
        if !recent.isEmpty {
            lines.append("  last \(recent.count) events")
            for event in recent.reversed() {
                lines.append("    " + EventFormatting.line(event, width: 74))
            }
        }
        let warnings = s.warnings
        if warnings.isEmpty {
            lines.append(Style.good("  health     no warnings"))
        } else {
            for w in warnings { lines += Units.wrap("  warning    ", w, styledLabel: Style.warn("  warning    ")) }
        }
        return lines.joined(separator: "\n")
    }

    /// The stored app projections that read each event type (the types their records list),
    /// by name; none when the records cannot be read (the projections' section says why).
    static func readers(_ listed: Result<[ProjectionInfo], LedgerError>) -> [String: [String]] {
        guard case .success(let projections) = listed else { return [:] }
        var readers: [String: [String]] = [:]
        for p in projections.sorted(by: { $0.name < $1.name }) {
            for type in p.eventTypes { readers[type, default: []].append(p.name) }
        }
        return readers
    }

    /// The base name of a stored type name, as `Event.baseType` reads it: a version suffix
    /// `@N` (N ≥ 2) removed — an app projection lists the base names of the types it reads.
    static func baseType(_ stored: String) -> String {
        guard let at = stored.lastIndex(of: "@") else { return stored }
        let suffix = stored[stored.index(after: at)...]
        guard let version = Int(suffix), version >= 2, String(version) == suffix else { return stored }
        return String(stored[..<at])
    }

    /// The app projections stored (`ledger projection PATH NAME` dumps one): name, version,
    /// status, rows, how far each has applied the log, and why one failed.
    static func projectionLines(_ listed: Result<[ProjectionInfo], LedgerError>) -> [String] {
        let projections: [ProjectionInfo]
        switch listed {
        case .success(let list): projections = list
        case .failure(let error): return Units.wrap("  app projections  ", "cannot be listed: \(error) (run `ledger verify`)", styledLabel: Style.warn("  app projections  "))
        }
        guard !projections.isEmpty else { return ["  app projections  none"] }
        var lines = ["  app projections"]
        for p in projections {
            let built = p.builtFrom > 0 ? " (built from \(p.builtFrom))" : ""
            let pending = p.pendingSharedEvents > 0 ? " · \(p.pendingSharedEvents) shared pending" : ""
            lines.append(Style.fit("    \(p.name) v\(p.version) \(p.status) · \(p.rows) \(p.rows == 1 ? "row" : "rows") · applied through \(p.appliedThrough)\(built)\(pending)"))
            if let failure = p.failure { lines += Units.wrap("      failed  ", Untrusted.escaped(failure)) }
        }
        return lines
    }
}
