import ArgumentParser
import Foundation
import InboxLedger

struct Consume: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the events after a consumer's cursor as JSON lines, then commit the cursor.",
        discussion: """
            Registers the consumer (starting at the beginning of the log) if it does not exist.

            Example:
              ledger consume /tmp/inbox --name host-app --limit 50
            """
    )

    @OptionGroup var location: LedgerLocation

    @Option(help: "The consumer's name.")
    var name: String

    @Option(help: "Most events to read and commit.")
    var limit = 100

    func validate() throws {
        guard limit >= 1 else { throw ValidationError("--limit must be at least 1") }
        guard !location.readOnly else { throw ValidationError("consume commits its cursor: it cannot run with --read-only") }
    }

    func run() throws {
        let ledger = try openLedger(location, writes: true)
        do {
            let consumer = try ledger.consumer(named: name)
            let batch = try consumer.next(limit: limit)
            for event in batch.events { emit(try jsonLine(EventOutput(event))) }
            try consumer.commit(batch)
        } catch let error as LedgerError {
            throw fail(error)
        }
    }
}

struct ConsumersCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "consumers",
        abstract: "List consumers with cursor, lag and lease age, or drop one.",
        subcommands: [ListConsumers.self, DropConsumer.self],
        defaultSubcommand: ListConsumers.self
    )
}

struct DropConsumer: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "drop",
        abstract: "Remove a consumer: it no longer holds compaction back.",
        discussion: """
            Example:
              ledger consumers drop /tmp/inbox old-widget-refresh
            """
    )

    @OptionGroup var location: LedgerLocation

    @Argument(help: "The consumer to remove.")
    var name: String

    func run() throws {
        let ledger = try openLedger(location, writes: true)
        let existed: Bool
        do { existed = try ledger.dropConsumer(named: name) } catch { throw fail(error) }
        guard existed else {
            printError("\(location.path): no consumer named '\(name)'")
            throw ExitCode(ExitStatus.problems)
        }
        emit("Dropped consumer '\(name)'.")
    }
}

struct ListConsumers: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List consumers with cursor, lag and lease age (the default).",
        discussion: """
            Example:
              ledger consumers /tmp/inbox --json
            """
    )

    @OptionGroup var location: LedgerLocation

    @Flag(help: "Print a JSON array.")
    var json = false

    func run() throws {
        let ledger = try openLedger(location, writes: false)
        let consumers: [ConsumerInfo]
        do { consumers = try ledger.consumers() } catch { throw fail(error) }
        let now = Timestamp.now
        if json {
            emit(try jsonLine(consumers.map { ConsumerOutput($0, now: now) }))
            return
        }
        if consumers.isEmpty {
            emit("No consumers.")
            return
        }
        var lines = ["consumer                 cursor        lag   lease age"]
        for c in consumers {
            let age = Units.duration(micros: now.micros - c.lastSeen.micros)
            lines.append(c.name.padding(toLength: 20, withPad: " ", startingAt: 0)
                + String(c.cursor).leftPadded(11) + String(c.lag).leftPadded(11) + age.leftPadded(12))
        }
        emit(lines.joined(separator: "\n"))
    }
}
