import Foundation
import InboxLedger
import Synchronization

/// What a ``SyncClient`` shares and where it keeps its down cursor.
///
/// ```swift
/// var configuration = SyncConfiguration(server: server, token: token, stateFile: container + "/inbox.sync-state")
/// configuration.sharedTypes.insert("com.example.note-saved")
/// ```
public struct SyncConfiguration: Sendable {
    /// The built-in types a device shares: read state, removals, widget actions, completions.
    public static let defaultSharedTypes: Set<String> = [
        BuiltInEventType.messageRead.rawValue, BuiltInEventType.messageRemoved.rawValue,
        BuiltInEventType.widgetAction.rawValue, BuiltInEventType.actionCompleted.rawValue,
    ]

    /// The server's base URL.
    public var server: URL
    /// The device's bearer token (docs/sync.md, "Authentication").
    public var token: String
    /// The file holding the down cursor (outside the ledger's directory, which holds only the
    /// ledger's own files). Losing it only costs a replay (docs/sync.md, "Failure modes").
    public var stateFile: String
    /// The event types sent up: ``defaultSharedTypes`` plus the custom types the app marks.
    public var sharedTypes: Set<String>
    /// The relay consumer's name.
    public var consumerName = "sync-relay"
    /// Events per up batch (1–1000).
    public var batchSize = 500
    /// Feed entries per down request (1–1000).
    public var downPageSize = 500
    /// How long a down request waits on the server for a change (0–30 s).
    public var longPollSeconds = 25
    /// The first retry's delay after a network or server failure; it doubles up to ``maxBackoff``.
    public var initialBackoff: Duration = .milliseconds(200)
    /// The longest delay between retries (and the delay after a refusal).
    public var maxBackoff: Duration = .seconds(30)

    /// Sync with `server` using `token`, keeping the down cursor in `stateFile`, sharing the
    /// default types plus `sharedCustomTypes`.
    public init(server: URL, token: String, stateFile: String, sharedCustomTypes: Set<String> = []) {
        self.server = server
        self.token = token
        self.stateFile = stateFile
        self.sharedTypes = Self.defaultSharedTypes.union(sharedCustomTypes)
    }
}

/// What one ``SyncClient/syncOnce()`` did.
public struct SyncReport: Hashable, Sendable {
    /// Shared events the server acknowledged (applied now or held already).
    public var sent = 0
    /// Of those, events the server already held (a resend).
    public var duplicates = 0
    /// Feed entries appended (replays included).
    public var received = 0
    /// The relay consumer's cursor afterwards.
    public var upCursor: UInt64 = 0
    /// The down cursor afterwards.
    public var downCursor: UInt64 = 0
}

/// The device side of sync (docs/sync.md): sends the ledger's shared events to the server
/// exactly once and appends the user's change feed, in the host app.
///
/// ```swift
/// let client = try SyncClient(ledger: ledger, configuration: SyncConfiguration(
///     server: server, token: token, stateFile: container + "/inbox.sync-state"))
/// let loops = Task { await client.run() }          // until cancelled; survives suspension
/// for await status in client.statusUpdates() { print(status.phase, status.upLag, status.downLag) }
/// loops.cancel()
/// ```
///
/// Up, the relay consumer's cursor is committed only after the server acknowledged the batch;
/// down, each feed entry is appended under the key `sync-down-<user>-<seq>`, so a replay changes
/// nothing. Network and server failures are retried with exponential backoff; the ledger's
/// transient conditions (``Ledger/suspend(waitingUpTo:)``, a busy writer) are waited through.
public final class SyncClient: Sendable {
    /// The device's ledger.
    public let ledger: Ledger
    /// What is shared and where.
    public let configuration: SyncConfiguration
    let transport: any SyncTransport
    let relay: Consumer
    let shared: Mutex<Shared>

    struct Shared: Sendable {
        var status = SyncStatus()
        var observers: [Int: AsyncStream<SyncStatus>.Continuation] = [:]
        var nextObserver = 0
        var user: String?
        var downCursor: UInt64 = 0
    }

    struct StateFile: Codable {
        var user: String?
        var downCursor: UInt64
    }

    /// A client for `ledger`: registers the relay consumer (durably, from the first retained
    /// event, if it is new) and reads the down cursor from the state file. `transport`
    /// defaults to ``HTTPSyncTransport`` to `configuration.server`.
    public init(ledger: Ledger, configuration: SyncConfiguration, transport: (any SyncTransport)? = nil) throws(SyncError) {
        guard (1...1000).contains(configuration.batchSize), (1...1000).contains(configuration.downPageSize),
              (0...30).contains(configuration.longPollSeconds) else {
            throw .rejected(status: 0, code: "configuration", message: "batchSize and downPageSize must be 1–1000, longPollSeconds 0–30")
        }
        self.ledger = ledger
        self.configuration = configuration
        self.transport = transport ?? HTTPSyncTransport(server: configuration.server, token: configuration.token)
        do { relay = try ledger.consumer(named: configuration.consumerName) } catch { throw .ledger(error) }
        var initial = Shared()
        if let saved = try Self.readState(configuration.stateFile) {
            initial.user = saved.user
            initial.downCursor = saved.downCursor
            initial.status.downCursor = saved.downCursor
        }
        shared = Mutex(initial)
    }

    // MARK: - Observation

    /// The status now, then every change, until the iterating task is cancelled. Slow readers
    /// get the latest status, never a backlog (like ``Ledger/widgetListUpdates(limit:)``).
    ///
    /// ```swift
    /// for await status in client.statusUpdates() { label = "\(status.phase) · \(status.upLag) to send" }
    /// ```
    public func statusUpdates() -> AsyncStream<SyncStatus> {
        AsyncStream(bufferingPolicy: .bufferingNewest(1)) { continuation in
            let id = shared.withLock { s in
                let id = s.nextObserver
                s.nextObserver += 1
                s.observers[id] = continuation
                continuation.yield(s.status)
                return id
            }
            continuation.onTermination = { [weak self] _ in
                _ = self?.shared.withLock { s in s.observers.removeValue(forKey: id) }
            }
        }
    }

    /// The status now.
    public var status: SyncStatus { shared.withLock { $0.status } }

    func update(_ change: (inout SyncStatus) -> Void) {
        shared.withLock { s in
            let before = s.status
            change(&s.status)
            if s.status != before { for observer in s.observers.values { observer.yield(s.status) } }
        }
    }

    // MARK: - Running

    /// Runs the up and down loops until the task is cancelled: sends each new batch of shared
    /// events as it is appended (by any process), and long-polls the feed. Failures are
    /// reported through ``statusUpdates()`` and retried; it returns only when cancelled.
    public func run() async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.upLoop() }
            group.addTask { await self.downLoop() }
        }
        update { $0.phase = .idle }
    }

    /// Sends every pending batch, then applies every feed entry available now, once, without
    /// retrying (transient ledger conditions are still waited through). What `ledger sync`
    /// without `--watch` does.
    ///
    /// ```swift
    /// let report = try await client.syncOnce()
    /// print("sent \(report.sent), received \(report.received)")
    /// ```
    public func syncOnce() async throws(SyncError) -> SyncReport {
        var report = SyncReport()
        update { $0.phase = .syncing }
        do {
            while true {
                let batch = try await waitingThroughTransient { try await self.relay.next(limit: self.configuration.batchSize) }
                if batch.events.isEmpty { break }
                let answer = try await sendAndCommit(batch, retrying: false)
                report.sent += answer.applied + answer.duplicates
                report.duplicates += answer.duplicates
            }
            while true {
                let after = shared.withLock { $0.downCursor }
                let page = try await transport.fetch(after: after, limit: configuration.downPageSize, waitSeconds: 0)
                let applied = try await apply(page, after: after)
                report.received += applied
                if applied == 0 { break }
            }
        } catch {
            update { $0.phase = error.isRetryable ? .offline : .failed; $0.lastError = error.description }
            throw error
        }
        report.upCursor = status.upCursor
        report.downCursor = shared.withLock { $0.downCursor }
        update { $0.phase = .idle; $0.lastError = nil }
        return report
    }

    func upLoop() async {
        while !Task.isCancelled {
            do {
                for try await batch in relay.batches(limit: configuration.batchSize) {
                    _ = try await sendAndCommit(batch, retrying: true)
                }
                return  // cancelled
            } catch LedgerError.consumerGap(_, let cursor, let first) {
                // Compaction trimmed events the relay had not sent: they cannot reach the server.
                let lost = first > cursor + 1 ? first - cursor - 1 : 0
                do {
                    _ = try relay.rebase()
                    update { $0.eventsLost += lost; $0.lastError = "\(lost) events were trimmed before they were sent" }
                } catch {
                    update { $0.phase = .failed; $0.lastError = "rebasing the relay: \(error)" }
                    if !(await pause(configuration.maxBackoff)) { return }
                }
            } catch {
                if error is CancellationError || Task.isCancelled { return }
                let failure = error as? SyncError ?? .ledger(error as? LedgerError ?? .unexpected(path: ledger.path, operation: "sync", reason: "\(error)"))
                update { $0.phase = .failed; $0.lastError = failure.description }
                if !(await pause(configuration.maxBackoff)) { return }
            }
        }
    }

    func downLoop() async {
        var backoff = configuration.initialBackoff
        while !Task.isCancelled {
            let after = shared.withLock { $0.downCursor }
            do {
                let page = try await transport.fetch(after: after, limit: configuration.downPageSize, waitSeconds: configuration.longPollSeconds)
                _ = try await apply(page, after: after)
                backoff = configuration.initialBackoff
            } catch .cancelled {
                return
            } catch {
                update { $0.phase = error.isRetryable ? .offline : .failed; $0.lastError = error.description }
                if !(await pause(error.isRetryable ? jittered(backoff) : configuration.maxBackoff)) { return }
                if error.isRetryable { backoff = min(backoff * 2, configuration.maxBackoff) }
            }
        }
    }

    /// Sends `batch`'s shared events and commits the relay's cursor once the server holds them.
    func sendAndCommit(_ batch: ConsumerBatch, retrying: Bool) async throws(SyncError) -> SyncWire.UpResponse {
        let request = SyncWire.UpRequest(
            ledger: ledger.metadata.ledgerID, after: batch.after, through: batch.through,
            events: batch.events.filter(isShared).map(SyncWire.UpEvent.init))
        update { $0.phase = .syncing }
        var backoff = configuration.initialBackoff
        var answer: SyncWire.UpResponse
        while true {
            do {
                answer = try await transport.send(request)
                break
            } catch {
                update { $0.phase = error.isRetryable ? .offline : .failed; $0.lastError = error.description }
                guard retrying, error != .cancelled else { throw error }
                guard await pause(error.isRetryable ? jittered(backoff) : configuration.maxBackoff) else { throw .cancelled }
                if error.isRetryable { backoff = min(backoff * 2, configuration.maxBackoff) }
            }
        }
        guard answer.acked >= batch.through, answer.ledger == request.ledger else {
            throw .protocolViolation("the server acknowledged \(answer.acked) of ledger \(answer.ledger) for a batch through \(batch.through) of \(request.ledger)")
        }
        // Only now: the server holds every event up to `through`.
        do {
            _ = try await relay.commit(batch)
        } catch is CancellationError {
            throw .cancelled  // the next run resends the batch: duplicates, applied once
        } catch LedgerError.consumerConflict {
            // Another instance of the relay committed this range first; the server holds it.
        } catch {
            throw .ledger(error as? LedgerError ?? .unexpected(path: ledger.path, operation: "commit the relay", reason: "\(error)"))
        }
        // The head only feeds the lag shown; if it cannot be read now, the lag stays as it was.
        var head: UInt64?
        do { head = try await ledger.headSequence() } catch { head = nil }
        update { s in
            s.phase = .idle
            s.eventsSent += answer.applied + answer.duplicates
            s.upCursor = max(s.upCursor, batch.through)
            if let head { s.upLag = head > s.upCursor ? head - s.upCursor : 0 }
            s.lastError = nil
            s.lastSuccess = Timestamp(Date())
        }
        return answer
    }

    /// Appends one answer's changes in one append, each under its feed key, then stores the
    /// down cursor. Returns the number of changes.
    func apply(_ page: SyncWire.DownResponse, after: UInt64) async throws(SyncError) -> Int {
        let known = shared.withLock { $0.user }
        if let known, known != page.user {
            // A different user than the state file's: its cursor does not apply.
            shared.withLock { $0.user = page.user; $0.downCursor = 0 }
            try saveState(user: page.user, downCursor: 0)
            return page.changes.isEmpty ? 0 : 1  // fetch again from 0
        }
        var previous = after
        for change in page.changes {
            guard change.seq > previous else {
                throw .protocolViolation("feed sequence \(change.seq) after \(previous): out of order")
            }
            previous = change.seq
        }
        if let last = page.changes.last {
            let events = page.changes.map {
                NewEvent(type: $0.type, payload: Array($0.payload.utf8), key: SyncWire.downKey(user: page.user, seq: $0.seq))
            }
            _ = try await waitingThroughTransient { try await self.ledger.append(contentsOf: events) }
            try saveState(user: page.user, downCursor: last.seq)
            shared.withLock { $0.user = page.user; $0.downCursor = last.seq }
        } else if known == nil {
            shared.withLock { $0.user = page.user }
        }
        let cursor = shared.withLock { $0.downCursor }
        update { s in
            s.phase = .idle
            s.changesReceived += page.changes.count
            s.downCursor = cursor
            s.downHead = max(page.head, cursor)
            s.lastError = nil
            s.lastSuccess = Timestamp(Date())
        }
        return page.changes.count
    }

    func isShared(_ event: Event) -> Bool {
        if let key = event.key, key.hasPrefix(SyncWire.downKeyPrefix) { return false }  // came down: never echoed
        return configuration.sharedTypes.contains(event.type)
    }

    // MARK: - Helpers

    /// Runs `body`, waiting through the ledger's transient conditions (suspension, a busy writer).
    func waitingThroughTransient<T: Sendable>(_ body: @Sendable () async throws -> T) async throws(SyncError) -> T {
        do {
            return try await ledger.retryingTransient(body)
        } catch let error as LedgerError {
            throw .ledger(error)
        } catch is CancellationError {
            throw .cancelled
        } catch {
            throw .ledger(.unexpected(path: ledger.path, operation: "sync", reason: "\(error)"))
        }
    }

    /// Sleeps; false if cancelled.
    func pause(_ duration: Duration) async -> Bool {
        do {
            try await Task.sleep(for: duration)
            return true
        } catch {
            return false
        }
    }

    func jittered(_ duration: Duration) -> Duration { duration * Double.random(in: 0.75...1.25) }

    static func readState(_ path: String) throws(SyncError) -> StateFile? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        do {
            return try JSONDecoder().decode(StateFile.self, from: Data(contentsOf: URL(fileURLWithPath: path)))
        } catch {
            throw .stateFile(path: path, reason: "unreadable sync state (delete it to replay the feed from the start): \(error)")
        }
    }

    func saveState(user: String, downCursor: UInt64) throws(SyncError) {
        let path = configuration.stateFile
        do {
            let data = try JSONEncoder().encode(StateFile(user: user, downCursor: downCursor))
            try data.write(to: URL(fileURLWithPath: path), options: .atomic)
        } catch {
            throw .stateFile(path: path, reason: "cannot write the sync state: \(error)")
        }
    }
}
