import ArgumentParser
import Foundation
import InboxLedger

struct Events: AsyncParsableCommand, GuardedCommand {
    static let configuration = CommandConfiguration(
        abstract: "List events, filtered by sequence, type and origin.",
        discussion: """
            --json prints one JSON object per line: sequence, type, origin {role, pid}, timestamp, key, data, source (local, shared, feed), feed.
            --follow keeps printing events as any process appends them, until interrupted.

            Examples:
              ledger events /tmp/inbox --after 100 --type widget.action --json
              ledger events /tmp/inbox --follow --origin widget
            """
    )

    @OptionGroup var location: LedgerLocation

    @Option(help: "Only events after this sequence.")
    var after: UInt64 = 0

    @Option(help: "Only events before this sequence.")
    var before: UInt64?

    @Option(help: "Most events to print (without --follow).")
    var limit = 100

    @Option(help: "Only the event with this idempotency key.")
    var key: String?

    @Flag(help: "Keep printing new events as they are appended, until interrupted.")
    var follow = false

    @Option(help: "Only events of this type.")
    var type: String?

    @Option(help: "Only events from this origin role.")
    var origin: String?

    @Flag(help: "JSON lines instead of a table.")
    var json = false

    func validate() throws {
        guard limit >= 0 else { throw ValidationError("--limit must not be negative") }
        if follow && before != nil { throw ValidationError("--follow cannot be combined with --before") }
    }

    func matches(_ event: Event) -> Bool {
        if let type, event.type != type { return false }
        if let origin, event.origin.role != origin { return false }
        if let key, event.key != key { return false }
        return true
    }

    func run() async throws {
        let ledger = try openLedger(location, writes: false)
        // With --follow the command mostly waits: the reader of stdout leaving (a closed pipe)
        // ends it at once instead of at the next event's failed write.
        let readerWatch = follow ? ReaderWatch() : nil
        var printed = 0
        var iterator = EventIterator(ledger, after: after, pageSize: 1024)
        do {
            while follow || printed < limit {
                guard let event = try iterator.next() else {
                    guard let readerWatch else { break }
                    if try await Self.readerGoneBeforeChange(ledger, after: iterator.position, readerWatch) {
                        throw StandardStream.outputFailed(EPIPE)
                    }
                    continue
                }
                if let before, event.sequence >= before { break }
                guard matches(event) else { continue }
                try emit(json ? try jsonLine(EventOutput(event)) : EventFormatting.line(event, width: Style.width))
                printed += 1
            }
        } catch let error as LedgerError {
            throw fail(error)
        }
    }

    /// Waits for an append after `position` or for the reader of stdout to leave, whichever
    /// comes first; true if the reader left.
    static func readerGoneBeforeChange(_ ledger: Ledger, after position: UInt64, _ watch: ReaderWatch) async throws -> Bool {
        try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask {
                _ = try await ledger.waitForChange(after: position)
                return false
            }
            group.addTask {
                await watch.wait()
                return true
            }
            defer { group.cancelAll() }
            return try await group.next() ?? false
        }
    }
}
