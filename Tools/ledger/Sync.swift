import ArgumentParser
import Foundation
import InboxLedger
import InboxLedgerSync

/// `ledger sync DIR --server URL --token TOKEN [--watch]`: the device side of docs/sync.md.
struct Sync: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Sync a ledger with a ledger-server: send its shared events, apply the user's change feed.",
        discussion: """
            Once (the default): sends every pending batch, applies every feed entry available, prints
            what it did and exits 0; a failure exits 1 with the reason (nothing is lost: the relay
            cursor moves only after the server's acknowledgement, and a retry is applied once).
            With --watch: runs until killed, retrying with backoff, and prints a line per status
            change. The down cursor is kept in --state (default: DIR.sync-state beside the ledger).
            docs/sync.md describes the protocol.

            Example:
              ledger sync /tmp/inbox --server http://127.0.0.1:8080 --token "$TOKEN" --watch
            """
    )

    @OptionGroup var location: LedgerLocation

    @Option(help: "The server's base URL.")
    var server: String

    @Option(help: "The device token (default: $LEDGER_SYNC_TOKEN).")
    var token: String?

    @Option(help: "The sync state file (default: DIR.sync-state).")
    var state: String?

    @Option(name: .customLong("share"), help: "A custom event type to send up as well (repeatable).")
    var sharedTypes: [String] = []

    @Flag(help: "Keep syncing until killed; print every status change.")
    var watch = false

    @Flag(help: "Print JSON lines instead of text.")
    var json = false

    @Flag(help: "Create the ledger if it does not exist.")
    var create = false

    @Option(help: "Events per up batch (1–1000).")
    var batchSize = 500

    @Option(help: "Bytes per up request at most (at least 65536; default 524288).")
    var maxBatchBytes = 512 * 1024

    @Option(help: "Seconds between renewals of the relay consumer's lease while --watch runs (keep it below the compaction lease).")
    var leaseRenewal = 60.0

    @Option(help: "Seconds a request waits for the server's answer before it fails as timed out (a long poll: its wait plus this).")
    var timeout = 30.0

    func validate() throws {
        guard !location.readOnly else { throw ValidationError("sync appends and commits: it cannot run with --read-only") }
        guard URL(string: server)?.host != nil else { throw ValidationError("--server: expected a URL such as http://127.0.0.1:8080") }
        guard token ?? ProcessInfo.processInfo.environment["LEDGER_SYNC_TOKEN"] != nil else { throw ValidationError("--token or LEDGER_SYNC_TOKEN is required") }
        guard (1...1000).contains(batchSize) else { throw ValidationError("--batch-size must be 1–1000") }
        guard maxBatchBytes >= 65_536 else { throw ValidationError("--max-batch-bytes must be at least 65536") }
        guard leaseRenewal > 0 else { throw ValidationError("--lease-renewal must be positive") }
        guard timeout > 0, timeout.isFinite else { throw ValidationError("--timeout must be a positive number of seconds") }
    }

    func run() async throws {
        guard let url = URL(string: server), let token = token ?? ProcessInfo.processInfo.environment["LEDGER_SYNC_TOKEN"] else {
            throw ExitCode(ExitStatus.usage)
        }
        let ledger = try openLedger(location, role: "sync", writes: true, create: create)
        let directory = location.path.hasSuffix("/") ? String(location.path.dropLast()) : location.path
        var configuration = SyncConfiguration(server: url, token: token, stateFile: state ?? directory + ".sync-state",
                                              sharedCustomTypes: Set(sharedTypes))
        configuration.batchSize = batchSize
        configuration.maxBatchBytes = maxBatchBytes
        configuration.leaseRenewal = .milliseconds(Int64(leaseRenewal * 1000))
        configuration.timeoutSeconds = timeout
        let client: SyncClient
        do { client = try SyncClient(ledger: ledger, configuration: configuration) } catch { throw failure(error) }

        guard watch else {
            let report: SyncReport
            do { report = try await client.syncOnce() } catch { throw failure(error) }
            if json {
                try emit(try jsonLine(ReportOutput(report)))
            } else {
                try emit("sent \(report.sent) (\(report.duplicates) already held), received \(report.received); up cursor \(report.upCursor), down cursor \(report.downCursor)"
                    + (report.eventsLost > 0 ? "; \(report.eventsLost) events trimmed before they were sent, declared lost" : "")
                    + (report.eventsRefused > 0 ? "; \(report.eventsRefused) events the server refused, skipped and declared" : ""))
            }
            return
        }
        let loops = Task { await client.run() }
        for await status in client.statusUpdates() {
            if json {
                try emit(try jsonLine(StatusOutput(status)))
            } else {
                var line = "sync: \(status.phase.rawValue) sent=\(status.eventsSent) received=\(status.changesReceived) "
                    + "up-cursor=\(status.upCursor) up-lag=\(status.upLag) down-cursor=\(status.downCursor) "
                    + "down-lag=\(status.downLag.map(String.init) ?? "unknown")"
                if status.eventsLost > 0 { line += " lost=\(status.eventsLost)" }
                if status.eventsRefused > 0 { line += " refused=\(status.eventsRefused)" }
                if status.up.phase != status.down.phase { line += " up=\(status.up.phase.rawValue) down=\(status.down.phase.rawValue)" }
                if let error = status.lastError { line += " error=\(error)" }
                try emit(line)
            }
        }
        loops.cancel()
    }

    func failure(_ error: SyncError) -> ExitCode {
        if case .ledger(let ledgerError) = error { return fail(ledgerError) }
        printError("sync: \(error)")
        return ExitCode(ExitStatus.problems)
    }
}

struct ReportOutput: Encodable {
    var sent: Int, duplicates: Int, received: Int, upCursor: UInt64, downCursor: UInt64

    init(_ r: SyncReport) {
        sent = r.sent
        duplicates = r.duplicates
        received = r.received
        upCursor = r.upCursor
        downCursor = r.downCursor
    }
}

struct StatusOutput: Encodable {
    var phase: String, sent: Int, received: Int, upCursor: UInt64, upLag: UInt64, downCursor: UInt64, downLag: OrNull<UInt64>
    var error: OrNull<String>, errorKind: OrNull<String>

    init(_ s: SyncStatus) {
        phase = s.phase.rawValue
        sent = s.eventsSent
        received = s.changesReceived
        upCursor = s.upCursor
        upLag = s.upLag
        downCursor = s.downCursor
        downLag = OrNull(s.downLag)
        error = OrNull(s.lastError)
        errorKind = OrNull(s.error.map(errorKindName))
    }
}

/// The case of a ``SyncError`` as a word, for JSON (`offline`, `unauthorized`, …; `offline`
/// errors add their reason: `offline.timedOut`).
func errorKindName(_ error: SyncError) -> String {
    switch error {
    case .offline(let failure): "offline.\(failure.reason.rawValue)"
    case .server: "server"
    case .unauthorized: "unauthorized"
    case .forbidden: "forbidden"
    case .rejected: "rejected"
    case .eventRefused: "eventRefused"
    case .gap: "gap"
    case .protocolViolation: "protocolViolation"
    case .ledger: "ledger"
    case .stateFile: "stateFile"
    case .cancelled: "cancelled"
    }
}
