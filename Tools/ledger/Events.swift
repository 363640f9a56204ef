import ArgumentParser
import Foundation
import InboxLedger

struct Events: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List events, filtered by sequence, type and origin.",
        discussion: """
            --json prints one JSON object per line: sequence, type, origin {role, pid}, timestamp, key, data.

            Example:
              ledger events /tmp/inbox --after 100 --type widget.action --json
            """
    )

    @OptionGroup var location: LedgerLocation

    @Option(help: "Only events after this sequence.")
    var after: UInt64 = 0

    @Option(help: "Most events to print.")
    var limit = 100

    @Option(help: "Only events of this type.")
    var type: String?

    @Option(help: "Only events from this origin role.")
    var origin: String?

    @Flag(help: "JSON lines instead of a table.")
    var json = false

    func validate() throws {
        guard limit >= 0 else { throw ValidationError("--limit must not be negative") }
    }

    func run() throws {
        let ledger = try openLedger(location, writes: false)
        var printed = 0
        var iterator = ledger.iterator(after: after, pageSize: 1024)
        do {
            while printed < limit, let event = try iterator.next() {
                if let type, event.type != type { continue }
                if let origin, event.origin.role != origin { continue }
                emit(json ? try EventFormatting.json(EventFormatting.jsonObject(event)) : EventFormatting.line(event, width: 80))
                printed += 1
            }
        } catch let error as LedgerError {
            throw fail(error)
        }
    }
}
