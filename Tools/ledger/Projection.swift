import ArgumentParser
import Foundation
import InboxLedger

struct ProjectionCommand: ParsableCommand, GuardedCommand {
    static let configuration = CommandConfiguration(
        commandName: "projection",
        abstract: "Dump an app projection without the app's code: its record, document and rows.",
        discussion: """
            Prints the stored state of the app projection NAME (a LedgerProjection an app
            registers): its record (version, status, rows, the last sequence applied), its
            document and its rows in the projection's order, one per line as `key  row`, each
            row as the JSON it is stored as (a key's backslashes and control characters are
            escaped as in a JSON string: one row, one line). Opens read-only. `ledger inspect`
            lists the names.
            The stored state is what the last process that keeps the projection wrote: events
            appended since by processes without it are not applied here (see appliedThrough).

            Example:
              ledger projection /tmp/inbox com.example.tasks --limit 20
            """
    )

    @OptionGroup var location: LedgerLocation

    @Argument(help: "The projection's name (as `ledger inspect` lists it).")
    var name: String

    @Option(help: "Rows to show (default: all).")
    var limit: Int?

    @Flag(help: "Print one JSON object: {\"projection\", \"document\", \"rows\": [{\"key\", \"row\"}]}.")
    var json = false

    func validate() throws {
        if let limit, limit < 0 { throw ValidationError("--limit must not be negative") }
    }

    func run() throws {
        let ledger = try openLedger(location, writes: false)
        let dump: (info: ProjectionInfo, document: [UInt8]?, rows: [(key: String, json: [UInt8])])
        do {
            dump = try ledger.projections.dump(named: name, limit: limit ?? .max)
        } catch .projectionUnavailable {
            // No record of that name: say which there are (if the records can be read).
            let stored = (try? ledger.projections.list())?.map(\.name)
            let names = stored.map { $0.isEmpty ? "none is stored" : "stored: " + $0.joined(separator: ", ") }
            printError("\(location.path): no app projection named '\(name)'" + (names.map { " (\($0))" } ?? ""))
            throw ExitCode(ExitStatus.problems)
        } catch {
            throw fail(error)
        }
        if json {
            try emit(try jsonLine(ProjectionDumpOutput(info: dump.info, document: dump.document, rows: dump.rows)))
            return
        }
        let info = dump.info
        var lines = ["Projection \(info.name) in \(location.path)"]
        let built = info.builtFrom > 0 ? ", built from \(info.builtFrom)" : ""
        lines.append("  version \(info.version) · \(info.status) · \(info.rows) \(info.rows == 1 ? "row" : "rows") · applied through \(info.appliedThrough)\(built)")
        lines += Units.wrap("  events   ", info.eventTypes.isEmpty ? "–" : info.eventTypes.joined(separator: " · "))
        if let failure = info.failure { lines += Units.wrap("  failed   ", Untrusted.escaped(failure), styledLabel: Style.bad("  failed   ")) }
        lines.append("  document " + (dump.document.map(Self.shown) ?? "none"))
        let shownRows = dump.rows.count < info.rows ? "first \(dump.rows.count) of \(info.rows)" : "\(dump.rows.count)"
        lines.append("  rows     \(shownRows), in the projection's order (key  row):")
        // One line per row whatever the key holds (the app chooses it: a title, a path).
        for row in dump.rows { lines.append("\(Untrusted.escaped(row.key))  \(Self.shown(row.json))") }
        try emit(lines.joined(separator: "\n"))
    }

    /// Stored JSON as it is, on one line (``Untrusted/oneLineJSON(_:)``: the same JSON); bytes
    /// that are not JSON are said to be so.
    static func shown(_ bytes: [UInt8]) -> String {
        do {
            _ = try JSONDecoder().decode(JSONValue.self, from: Data(bytes))
        } catch {
            return "(not JSON: \(bytes.count) bytes, base64 \(Data(bytes).base64EncodedString()))"
        }
        return Untrusted.oneLineJSON(String(decoding: bytes, as: UTF8.self))
    }
}
