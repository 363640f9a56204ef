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
    /// Events the relay reads per up batch (1–1000).
    public var batchSize = 500
    /// The most bytes one up request may take (its JSON body, bounded from above): a batch
    /// is sent in parts below it, each with at least one event. Keep it below the server's
    /// body limit (`ledger-server serve --max-body`, 1 MiB by default); a 413 still halves the
    /// part and retries. At least 64 KiB.
    public var maxBatchBytes = 512 * 1024
    /// How often the running client renews the relay consumer's lease (idle or offline), so
    /// compaction does not trim events it has not sent. Keep it well below the compaction
    /// policy's `consumerLeaseSeconds` (docs/operations.md, "Compaction").
    public var leaseRenewal: Duration = .seconds(60)
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
    /// Events trimmed before they were sent, declared lost to the server (docs/sync.md, "Up").
    public var eventsLost: UInt64 = 0
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
        /// The highest lost sequence counted in ``SyncStatus/eventsLost`` (no double count).
        var lostCountedThrough: UInt64 = 0
    }

    struct StateFile: Codable {
        var user: String?
        var downCursor: UInt64
        /// The ledger sequence of the last feed entry appended (its key names `downCursor`):
        /// how a restored ledger is recognised (RestoredLedger.swift).
        var appendedAt: UInt64?
    }

    /// A client for `ledger`: registers the relay consumer (durably, from the first retained
    /// event, if it is new) and reads the down cursor from the state file. `transport`
    /// defaults to ``HTTPSyncTransport`` to `configuration.server`.
    public init(ledger: Ledger, configuration: SyncConfiguration, transport: (any SyncTransport)? = nil) throws(SyncError) {
        guard (1...1000).contains(configuration.batchSize), (1...1000).contains(configuration.downPageSize),
              (0...30).contains(configuration.longPollSeconds), configuration.maxBatchBytes >= 65_536,
              configuration.leaseRenewal > .zero else {
            throw .rejected(status: 0, code: "configuration", message: "batchSize and downPageSize must be 1–1000, longPollSeconds 0–30, maxBatchBytes at least 65536, leaseRenewal positive")
        }
        self.ledger = ledger
        self.configuration = configuration
        self.transport = transport ?? HTTPSyncTransport(server: configuration.server, token: configuration.token)
        // From sequence 0: on a ledger already compacted, the first batch declares the trimmed
        // prefix lost to the server instead of starting past it (which the server, holding
        // nothing of this ledger, would answer with a gap).
        do { relay = try ledger.consumer(named: configuration.consumerName, startingAt: .origin) } catch { throw .ledger(error) }
        var initial = Shared()
        if let saved = try Self.readState(configuration.stateFile) {
            initial.user = saved.user
            initial.downCursor = try Self.downCursorHeld(by: ledger, saved: saved)
            initial.status.downCursor = initial.downCursor
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
            group.addTask { await self.leaseLoop() }
        }
        update { $0.up.phase = .idle; $0.down.phase = .idle }
    }

    /// Sends every pending batch, then applies every feed entry available now, once, without
    /// retrying (transient ledger conditions are still waited through), then sends once more
    /// if the feed brought anything (an empty batch that moves the relay past the feed's own
    /// events, so no lag is left). What `ledger sync` without `--watch` does. Events trimmed
    /// before they were sent are declared lost to the server and counted in
    /// ``SyncReport/eventsLost`` (docs/sync.md, "Up"); they do not stop the sync.
    ///
    /// Throws the first ``SyncError`` (nothing is lost: run it again): `.network`/`.server`
    /// (unreachable, 5xx), `.unauthorized`/`.forbidden` (401/403), `.rejected` (400, or a 413
    /// for a single event), `.gap` (the server lost acknowledged data), `.protocolViolation`,
    /// `.ledger`, `.stateFile`, `.cancelled`.
    ///
    /// ```swift
    /// let report = try await client.syncOnce()
    /// print("sent \(report.sent), received \(report.received)")
    /// ```
    public func syncOnce() async throws(SyncError) -> SyncReport {
        var report = SyncReport()
        try await sendPending(into: &report)
        update { $0.down.phase = .syncing }
        do {
            while true {
                let after = shared.withLock { $0.downCursor }
                let page = try await transport.fetch(after: after, limit: configuration.downPageSize, waitSeconds: 0)
                let applied = try await apply(page, after: after)
                report.received += applied
                if applied == 0 { break }
            }
        } catch {
            update { $0.down.phase = error.isRetryable ? .offline : .failed; $0.down.lastError = error.description }
            throw error
        }
        if report.received > 0 { try await sendPending(into: &report) }
        report.upCursor = try await waitingThroughTransient { try self.relay.cursor() }
        report.downCursor = shared.withLock { $0.downCursor }
        await refreshUpLag()
        return report
    }

    /// syncOnce's up half: every pending batch, once.
    func sendPending(into report: inout SyncReport) async throws(SyncError) {
        update { $0.up.phase = .syncing }
        do {
            while true {
                let next = try await readBatch()
                if next.batch.events.isEmpty && next.lostThrough == nil { break }
                let sent = try await sendInParts(next, retrying: false)
                report.sent += sent.sent
                report.duplicates += sent.duplicates
                report.eventsLost += sent.lost
                if next.batch.events.isEmpty { break }  // everything after the cursor was trimmed: declared, nothing to commit
            }
        } catch {
            update { $0.up.phase = error.isRetryable ? .offline : .failed; $0.up.lastError = error.description }
            await refreshUpLag()
            throw error
        }
        update { $0.up.phase = .idle; $0.up.lastError = nil }
    }

    func upLoop() async {
        while !Task.isCancelled {
            do {
                let next = try await readBatch()
                if !next.batch.events.isEmpty || next.lostThrough != nil {
                    _ = try await sendInParts(next, retrying: true)
                }
                if next.batch.events.isEmpty {
                    // Caught up (or everything after the cursor was trimmed and declared): wait for an append.
                    update { $0.up.phase = .idle }
                    await refreshUpLag()
                    let seen = max(next.batch.after, next.lostThrough ?? 0)
                    _ = try await waitingThroughTransient { try await self.ledger.waitForChange(after: seen) }
                }
            } catch {
                if error == .cancelled || Task.isCancelled { return }
                update { $0.up.phase = .failed; $0.up.lastError = error.description }
                await refreshUpLag()
                if !(await pause(configuration.maxBackoff)) { return }
            }
        }
    }

    /// Renews the relay consumer's lease every ``SyncConfiguration/leaseRenewal`` while the
    /// client runs (idle or offline), so compaction never trims what it has not sent yet.
    func leaseLoop() async {
        while await pause(configuration.leaseRenewal) {
            do {
                try await waitingThroughTransient { try self.relay.heartbeat() }
            } catch .ledger(.consumerConflict) {
                // The up loop committed in between: that renewed the lease too.
            } catch .cancelled {
                return
            } catch {
                update { $0.up.lastError = "renewing the relay's lease: \(error)" }
            }
            await refreshUpLag()
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
                update { $0.down.phase = error.isRetryable ? .offline : .failed; $0.down.lastError = error.description }
                if !(await pause(error.isRetryable ? jittered(backoff) : configuration.maxBackoff)) { return }
                if error.isRetryable { backoff = min(backoff * 2, configuration.maxBackoff) }
            }
        }
    }

    /// The relay's next batch, and what the device lost before it.
    struct UpBatch: Sendable {
        var batch: ConsumerBatch
        /// Set after a consumer gap: sequences `batch.after+1 … lostThrough` were trimmed
        /// before they were sent; the batch's events (the retained ones) follow them.
        var lostThrough: UInt64?
    }

    /// Reads the relay's next batch. After a consumer gap it does not rebase: the cursor stays
    /// where the server acknowledged, and the batch holds the retained events after the trim,
    /// with the trimmed sequences to declare lost — observed now, in the ledger, so nothing
    /// needs to persist across a crash.
    func readBatch() async throws(SyncError) -> UpBatch {
        let relay = self.relay, ledger = self.ledger, limit = configuration.batchSize
        return try await waitingThroughTransient { () throws -> UpBatch in
            do {
                return UpBatch(batch: try relay.next(limit: limit))
            } catch LedgerError.consumerGap(_, let cursor, let first) {
                // One snapshot each: every sequence between the cursor and the first event returned is trimmed.
                let events = try ledger.events(after: cursor, limit: limit)
                let lostThrough = (events.first?.sequence ?? first) - 1
                return UpBatch(batch: ConsumerBatch(after: cursor, events: events), lostThrough: lostThrough > cursor ? lostThrough : nil)
            }
        }
    }

    /// What ``sendInParts(_:retrying:)`` got acknowledged.
    struct Sent { var sent = 0, duplicates = 0, lost: UInt64 = 0 }

    /// Sends `next` in parts no larger than ``SyncConfiguration/maxBatchBytes`` (at least one
    /// event each), halving a part the server refuses as too large (413), committing each.
    func sendInParts(_ next: UpBatch, retrying: Bool) async throws(SyncError) -> Sent {
        var total = Sent()
        var after = next.batch.after
        var rest = next.batch.events[...]
        var lostThrough = next.lostThrough
        repeat {
            let envelope = SyncWire.UpRequest.envelopeSizeBound(ledger: ledger.metadata.ledgerID)
            var size = envelope, count = 0
            for event in rest {
                let bound = isShared(event) ? SyncWire.UpEvent(event).encodedSizeBound + 1 : 0
                if count > 0, size + bound > configuration.maxBatchBytes { break }
                size += bound
                count += 1
            }
            while true {
                let part = ConsumerBatch(after: after, events: Array(rest.prefix(count)))
                do {
                    let answer = try await sendAndCommit(part, lostThrough: lostThrough, retrying: retrying)
                    total.sent += answer.applied + answer.duplicates
                    total.duplicates += answer.duplicates
                    if let lostThrough { total.lost += countLost(after: after, through: lostThrough) }
                    after = max(part.through, lostThrough ?? 0)
                    break
                } catch .rejected(413, let code, let message) where count > 1 {
                    // The server's limit is below ours: halve, and try again at once.
                    count = (count + 1) / 2
                    update { $0.up.lastError = "rejected (413 \(code)): \(message); sending \(count) events at a time" }
                }
            }
            rest = rest.dropFirst(count)
            lostThrough = nil
        } while !rest.isEmpty
        return total
    }

    /// Counts the lost sequences `after+1 … through` not counted yet in this run, in ``SyncStatus/eventsLost``.
    func countLost(after: UInt64, through: UInt64) -> UInt64 {
        shared.withLock { s in
            let from = max(after, s.lostCountedThrough)
            guard through > from else { return 0 }
            s.lostCountedThrough = through
            let lost = through - from
            s.status.eventsLost += lost
            for observer in s.observers.values { observer.yield(s.status) }
            return lost
        }
    }

    /// Sends `batch`'s shared events (declaring `after+1 … lostThrough` lost) and commits the
    /// relay's cursor once the server holds them.
    func sendAndCommit(_ batch: ConsumerBatch, lostThrough: UInt64? = nil, retrying: Bool) async throws(SyncError) -> SyncWire.UpResponse {
        let through = max(batch.through, lostThrough ?? 0)
        let request = SyncWire.UpRequest(
            ledger: ledger.metadata.ledgerID, after: batch.after, through: through,
            events: batch.events.filter(isShared).map(SyncWire.UpEvent.init), lostThrough: lostThrough)
        update { $0.up.phase = .syncing }
        var backoff = configuration.initialBackoff
        var answer: SyncWire.UpResponse
        while true {
            do {
                answer = try await transport.send(request)
                break
            } catch {
                update { $0.up.phase = error.isRetryable ? .offline : .failed; $0.up.lastError = error.description }
                if case .rejected(413, _, _) = error, batch.events.count > 1 { throw error }  // the caller halves the batch
                await refreshUpLag()
                guard retrying, error != .cancelled else { throw error }
                guard await pause(error.isRetryable ? jittered(backoff) : configuration.maxBackoff) else { throw .cancelled }
                if error.isRetryable { backoff = min(backoff * 2, configuration.maxBackoff) }
            }
        }
        guard answer.acked >= through, answer.ledger == request.ledger else {
            throw .protocolViolation("the server acknowledged \(answer.acked) of ledger \(answer.ledger) for a batch through \(through) of \(request.ledger)")
        }
        // Only now: the server holds every event up to `through`. (A batch of no retained
        // events after a trim has nothing to commit: the next one moves the cursor over it.)
        if !batch.events.isEmpty {
            do {
                _ = try await relay.commit(batch)
            } catch is CancellationError {
                throw .cancelled  // the next run resends the batch: duplicates, applied once
            } catch LedgerError.consumerConflict {
                // Another instance of the relay committed this range first; the server holds it.
            } catch {
                throw .ledger(error as? LedgerError ?? .unexpected(path: ledger.path, operation: "commit the relay", reason: "\(error)"))
            }
        }
        update { s in
            s.up.phase = .idle
            s.eventsSent += answer.applied + answer.duplicates
            s.upCursor = max(s.upCursor, batch.through)
            s.up.lastError = nil
            s.up.lastSuccess = Timestamp(Date())
        }
        await refreshUpLag()
        return answer
    }

    /// Sets ``SyncStatus/upLag`` (and the cursor) from the ledger: the events after the
    /// relay's cursor. If they cannot be read now, the values stay as they were (they only
    /// feed the status).
    func refreshUpLag() async {
        let relay = self.relay, ledger = self.ledger
        let read: (UInt64, UInt64)?
        do {
            read = try await ledger.retryingTransient { () throws -> (UInt64, UInt64) in (try relay.cursor(), try ledger.headSequence()) }
        } catch {
            read = nil
        }
        guard let (cursor, head) = read else { return }
        update { s in
            s.upCursor = cursor
            s.upLag = head > cursor ? head - cursor : 0
        }
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
            let sequences = try await appendFeedPage(events, page: page)
            try saveState(user: page.user, downCursor: last.seq, appendedAt: sequences.last)
            shared.withLock { $0.user = page.user; $0.downCursor = last.seq }
        } else if known == nil {
            shared.withLock { $0.user = page.user }
        }
        let cursor = shared.withLock { $0.downCursor }
        update { s in
            s.down.phase = .idle
            s.changesReceived += page.changes.count
            s.downCursor = cursor
            s.downHead = max(page.head, cursor)
            s.down.lastError = nil
            s.down.lastSuccess = Timestamp(Date())
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

    func saveState(user: String, downCursor: UInt64, appendedAt: UInt64? = nil) throws(SyncError) {
        let path = configuration.stateFile
        do {
            let data = try JSONEncoder().encode(StateFile(user: user, downCursor: downCursor, appendedAt: appendedAt))
            try data.write(to: URL(fileURLWithPath: path), options: .atomic)
        } catch {
            throw .stateFile(path: path, reason: "cannot write the sync state: \(error)")
        }
    }
}
