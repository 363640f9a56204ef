import ArgumentParser
import Foundation
import InboxLedger

struct Consume: ParsableCommand, GuardedCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the events after a consumer's cursor as JSON lines, then commit the cursor.",
        discussion: """
            Registers the consumer (at the first event still in the log) if it does not exist.
            The cursor is committed only after every line was written to stdout: when a write
            fails (the reader of a pipe has gone, a full disk), nothing is committed and the
            command exits 4, so the next run prints the same events again.

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
        let consumer: Consumer
        let batch: ConsumerBatch
        do {
            consumer = try ledger.consumers.consumer(named: name)
            batch = try consumer.next(limit: limit)
        } catch {
            throw fail(error)
        }
        // Every write is checked and unbuffered (emit): a failed one throws before the commit.
        for event in batch.events { try emit(try jsonLine(EventOutput(event))) }
        do { try consumer.commit(batch) } catch { throw fail(error) }
    }
}

struct ConsumersCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "consumers",
        abstract: "List consumers with cursor, lag and lease age; drop or rebase one.",
        subcommands: [ListConsumers.self, DropConsumer.self, RebaseConsumer.self],
        defaultSubcommand: ListConsumers.self
    )
}

struct RebaseConsumer: ParsableCommand, GuardedCommand {
    static let configuration = CommandConfiguration(
        commandName: "rebase",
        abstract: "Move a consumer's cursor to the head (after events it missed were trimmed).",
        discussion: """
            For a consumer that fails with "events it has not read were trimmed": the projections
            carry the state up to the head, and pending actions stay queued until completed
            (docs/semantics.md, "Consumers"). Renews its lease. Exit 1 if there is no consumer
            by that name (none is registered).

            Example:
              ledger consumers rebase /tmp/inbox host-app
            """
    )

    @OptionGroup var location: LedgerLocation

    @Argument(help: "The consumer to rebase.")
    var name: String

    func validate() throws {
        guard !location.readOnly else { throw ValidationError("rebase commits a cursor: it cannot run with --read-only") }
    }

    func run() throws {
        let ledger = try openLedger(location, writes: true)
        let before: UInt64
        let head: UInt64
        do {
            // Only an existing consumer: `consumer(named:)` would register a missing one.
            guard let info = try ledger.consumers.list().first(where: { $0.name == name }) else {
                printError("\(location.path): no consumer named '\(name)'")
                throw ExitCode(ExitStatus.problems)
            }
            before = info.cursor
            head = try ledger.consumers.consumer(named: name).rebase()
        } catch let error as LedgerError {
            throw fail(error)
        }
        try emit("Rebased consumer '\(name)' from \(before) to \(head).")
    }
}

struct DropConsumer: ParsableCommand, GuardedCommand {
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
        do { existed = try ledger.consumers.drop(named: name) } catch { throw fail(error) }
        guard existed else {
            printError("\(location.path): no consumer named '\(name)'")
            throw ExitCode(ExitStatus.problems)
        }
        try emit("Dropped consumer '\(name)'.")
    }
}

struct ListConsumers: ParsableCommand, GuardedCommand {
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
        do { consumers = try ledger.consumers.list() } catch { throw fail(error) }
        let now = Timestamp.now
        if json {
            try emit(try jsonLine(consumers.map { ConsumerOutput($0, now: now) }))
            return
        }
        if consumers.isEmpty {
            try emit("No consumers.")
            return
        }
        var lines = ["consumer                 cursor        lag   lease age"]
        for c in consumers {
            let age = Units.duration(micros: now.micros - c.lastSeen.micros)
            lines.append(c.name.padding(toLength: 20, withPad: " ", startingAt: 0)
                + String(c.cursor).leftPadded(11) + String(c.lag).leftPadded(11) + age.leftPadded(12))
        }
        try emit(lines.joined(separator: "\n"))
    }
}
