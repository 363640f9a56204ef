import Foundation
@_spi(LedgerSync) import InboxLedger
import Synchronization

/// The device side of sync (docs/sync.md): sends the ledger's shared events to the server
/// exactly once and appends the user's change feed, in the host app.
///
/// ```swift
/// let client = try SyncClient(ledger: ledger, configuration: SyncConfiguration(
///     server: server, token: token, stateFile: container + "/inbox.sync-state"))
/// let loops = Task { await client.run() }          // until cancelled; survives suspension
/// for await status in client.statusUpdates() { print(status.phase, status.upLag, status.downLag ?? 0) }
/// loops.cancel()
/// ```
///
/// An app calls ``enterForeground()``, ``enterBackground()`` and ``backgroundRefresh()`` at its
/// three moments instead (docs/sync.md, "In an app"). Up, the relay consumer's cursor is
/// committed only after the server acknowledged the batch; down, each feed entry is appended
/// under the key `sync-down-<user>-<seq>`, so a replay changes nothing. The logic of each
/// direction is a pure state machine (``UpStateMachine``, ``DownStateMachine``) with one retry
/// policy (``RetryPolicy``); this class performs their actions and derives ``SyncStatus`` from
/// them. The ledger's transient conditions (``Ledger/suspend(waitingUpTo:)``, a busy writer)
/// are waited through. A client may run any number of times, one run after another.
public final class SyncClient: Sendable {
    /// The device's ledger.
    public let ledger: Ledger
    /// What is shared and where.
    public let configuration: SyncConfiguration
    let transport: any SyncTransport
    let relay: Consumer
    let shared: Mutex<Shared>
    let lifecycle = Mutex(Lifecycle())

    struct Shared: Sendable {
        var status: SyncStatus
        var coalescer: StatusCoalescer
        var observers: [Int: AsyncStream<SyncStatus>.Continuation] = [:]
        var nextObserver = 0
        /// When a held-back status is due (a flush task sleeps until then).
        var wake: ContinuousClock.Instant?
        var user: String?
        var downCursor: UInt64 = 0
        /// The highest lost sequence counted in ``SyncStatus/eventsLost`` (no double count).
        var lostCountedThrough: UInt64 = 0
        /// The highest refused sequence counted in ``SyncStatus/eventsRefused`` (no double count).
        var refusedCountedThrough: UInt64 = 0
        /// The run (``SyncClient/run()`` or ``SyncClient/syncOnce()``) whose machines the status shows.
        var session = 0
        /// The token in use, and a refresh in flight (both directions share it).
        var token: String
        var tokenRefresh: Task<String, any Error>?

        init(status: SyncStatus, token: String) {
            self.status = status
            coalescer = StatusCoalescer(initial: status)
            self.token = token
        }
    }

    struct StateFile: Codable {
        var user: String?
        var downCursor: UInt64
        /// The ledger sequence of the last feed entry appended (its key names `downCursor`):
        /// how a restored ledger is recognised (RestoredLedger.swift).
        var appendedAt: UInt64?
    }

    /// A client for `ledger`: registers the relay consumer (durably, from the first retained
    /// event, if it is new), reads the down cursor from the state file, and reads the events
    /// pending in the ledger (its first status: ``SyncStatus/upLag``; the down lag is unknown
    /// until the server's first answer). `transport` defaults to ``HTTPSyncTransport`` to
    /// `configuration.server`.
    public init(ledger: Ledger, configuration: SyncConfiguration, transport: (any SyncTransport)? = nil) throws(SyncError) {
        guard (1...SyncWire.Limits.eventsPerRequest).contains(configuration.batchSize), SyncWire.Limits.downPageSizes.contains(configuration.downPageSize),
              SyncWire.Limits.longPollSeconds.contains(configuration.longPollSeconds), configuration.maxBatchBytes >= 65_536,
              configuration.leaseRenewal > .zero, configuration.timeoutSeconds > 0 else {
            throw .rejected(status: 0, code: "configuration", message: "batchSize and downPageSize must be 1–1000, longPollSeconds 0–30, maxBatchBytes at least 65536, leaseRenewal and timeoutSeconds positive")
        }
        self.ledger = ledger
        self.configuration = configuration
        self.transport = transport ?? HTTPSyncTransport(server: configuration.server, token: configuration.token, timeoutSeconds: configuration.timeoutSeconds)
        // From sequence 0: on a ledger already compacted, the first batch declares the trimmed
        // prefix lost to the server instead of starting past it (which the server, holding
        // nothing of this ledger, would answer with a gap).
        var status = SyncStatus()
        do {
            relay = try ledger.consumers.consumer(named: configuration.consumerName, startingAt: .origin)
            // Every process of the ledger marks its events of these types shared from now on
            // (docs/sync.md, "Custom events on every device").
            try ledger.shareEventTypes(configuration.sharedTypes)
            status.upCursor = try relay.cursor()
            let head = try ledger.read({ try $0.head() })
            status.upLag = head > status.upCursor ? head - status.upCursor : 0
        } catch {
            throw .ledger(error)
        }
        let saved = try Self.readState(configuration.stateFile)
        status.downCursor = try saved.map { saved throws(SyncError) in try Self.downCursorHeld(by: ledger, saved: saved) } ?? 0
        var initial = Shared(status: status, token: configuration.token)
        initial.user = saved?.user
        initial.downCursor = status.downCursor
        shared = Mutex(initial)
    }

    // MARK: - Observation

    /// The status now, then its changes, coalesced, until the iterating task is cancelled: a
    /// change of phase or error at once (except `syncing → idle`, shown once the direction has
    /// stayed idle for 1 s), counters at most 4 times a second, the last state always
    /// (``StatusCoalescer``). Slow readers get the latest status, never a backlog.
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
                continuation.yield(s.coalescer.published)
                return id
            }
            continuation.onTermination = { [weak self] _ in
                _ = self?.shared.withLock { s in s.observers.removeValue(forKey: id) }
            }
        }
    }

    /// The status now, exactly (not coalesced).
    public var status: SyncStatus { shared.withLock { $0.status } }

    /// Changes the status — only if `session` is the current run's, when given — and offers it
    /// to the coalescer.
    func update(session: Int? = nil, _ change: (inout SyncStatus) -> Void) {
        shared.withLock { s in
            guard session.map({ $0 == s.session }) ?? true else { return }
            change(&s.status)
            offer(&s)
        }
    }

    /// Delivers what the coalescer lets through now, and schedules a flush for what it holds back.
    func offer(_ s: inout Shared) {
        let decision = s.coalescer.offer(s.status, at: .now)
        if let status = decision.deliver { for observer in s.observers.values { observer.yield(status) } }
        guard let wake = decision.wakeAt, s.wake.map({ wake < $0 }) ?? true else { return }
        s.wake = wake
        Task { [weak self] in
            _ = await Self.pause(until: wake)
            self?.shared.withLock { s in
                if let due = s.wake, due <= .now { s.wake = nil }
                self?.offer(&s)
            }
        }
    }

    // MARK: - Running

    /// Runs the up and down directions until the task is cancelled: sends each new batch of
    /// shared events as it is appended (by any process), and long-polls the feed. Failures are
    /// reported through ``statusUpdates()`` and retried as ``RetryPolicy`` says; a direction
    /// the policy stops (a 4xx, a gap, a 401 the token provider could not fix) stays `failed`
    /// while the other goes on. Returns only when cancelled, leaving both directions `stopped`
    /// (or `failed`): cancelling is never a failure. Call it again for the next run.
    public func run() async {
        let session = beginSession()
        await withTaskGroup(of: Void.self) { group in
            group.addTask { _ = await self.driveUp(.continuous, session: session) }
            group.addTask { _ = await self.driveDown(.continuous, session: session) }
            group.addTask { await self.leaseLoop() }
        }
    }

    /// Sends every pending batch, then applies every feed entry available now, once, without
    /// retrying (transient ledger conditions are still waited through; a 401 asks the token
    /// provider once), then sends once more if the feed brought anything (an empty batch that
    /// moves the relay past the feed's own events, so no lag is left). What `ledger sync`
    /// without `--watch` does. Events trimmed before they were sent are declared lost to the
    /// server and counted in ``SyncReport/eventsLost`` (docs/sync.md, "Up"); they do not stop
    /// the sync.
    ///
    /// Throws the first ``SyncError`` (nothing is lost: run it again); a cancelled task throws
    /// ``SyncError/cancelled`` at once and leaves the status `stopped`, not `failed`.
    ///
    /// ```swift
    /// let report = try await client.syncOnce()
    /// print("sent \(report.sent), received \(report.received)")
    /// ```
    public func syncOnce() async throws(SyncError) -> SyncReport {
        let session = beginSession()
        var report = SyncReport()
        try await sendPending(session: session, into: &report)
        let (outcome, received) = await driveDown(.once, session: session)
        report.received = received
        try Self.check(outcome)
        if received > 0 { try await sendPending(session: session, into: &report) }
        report.upCursor = try await waitingThroughTransient { try self.relay.cursor() }
        report.downCursor = shared.withLock { $0.downCursor }
        return report
    }

    /// syncOnce's up half: every pending batch, once.
    func sendPending(session: Int, into report: inout SyncReport) async throws(SyncError) {
        let (outcome, sent) = await driveUp(.once, session: session)
        report.sent += sent.sent
        report.duplicates += sent.duplicates
        report.eventsLost += sent.lost
        report.eventsRefused += sent.refused
        try Self.check(outcome)
    }

    static func check(_ outcome: UpStateMachine.Outcome) throws(SyncError) {
        switch outcome {
        case .caughtUp: return
        case .cancelled: throw .cancelled
        case .stopped(let error): throw error
        }
    }

    /// Starts a run: from now on the status shows its machines (a run that is still ending
    /// no longer writes its phases); both directions `stopped` until its machines start.
    func beginSession() -> Int {
        shared.withLock { s in
            s.session += 1
            s.status.up.phase = .stopped
            s.status.down.phase = .stopped
            offer(&s)
            return s.session
        }
    }

    // MARK: - The one driver

    /// Performs a direction machine's actions from `first` until it finishes, and returns how
    /// it ended: before each action it tells the machine of a cancelled task and shows the
    /// machine's phase and error in the status's `direction` (the run `session`'s only); it
    /// performs the pause, the token refresh and the end the same for both directions (the
    /// token a refresh replaces: the one in use when the failed step began), and hands the
    /// direction's own work to `perform`, which returns the machine's next action.
    /// `beforePause` runs before each pause and at the end (the up direction reads its lag).
    func drive<Machine: DirectionStateMachine>(
        _ machine: inout Machine, from first: Machine.Action, session: Int,
        shownIn direction: WritableKeyPath<SyncStatus, SyncStatus.Direction>,
        beforePause: () async -> Void = {},
        perform: (Machine.Work, inout Machine) async -> Machine.Action
    ) async -> DirectionOutcome {
        var action = first
        var tokenUsed = currentToken
        while true {
            if Task.isCancelled { action = machine.cancelled() }
            update(session: session) { [machine] s in
                s[keyPath: direction].phase = machine.phase
                s[keyPath: direction].error = machine.lastError
            }
            switch Machine.step(action) {
            case .finish(let outcome):
                await beforePause()
                return outcome
            case .perform(let work):
                tokenUsed = currentToken
                action = await perform(work, &machine)
            case .sleep(let delay):
                await beforePause()
                action = await Self.pause(for: jittered(delay)) ? machine.slept() : machine.cancelled()
            case .refreshToken:
                do {
                    try await refreshToken(refused: tokenUsed)
                    action = machine.tokenRefreshed()
                } catch {
                    action = machine.failed(error)
                }
            }
        }
    }

    // MARK: - The up direction

    /// What the up direction got acknowledged.
    struct Sent { var sent = 0, duplicates = 0, lost: UInt64 = 0, refused: UInt64 = 0 }

    /// Performs the up machine's actions until it finishes.
    func driveUp(_ mode: UpStateMachine.Mode, session: Int) async -> (UpStateMachine.Outcome, Sent) {
        let settings = UpStateMachine.Settings(
            ledgerID: ledger.metadata.ledgerID, sharedTypes: configuration.sharedTypes,
            maxBatchBytes: configuration.maxBatchBytes, policy: policy, mode: mode)
        var machine = UpStateMachine(settings: settings, lastError: shared.withLock { $0.status.up.error })
        var sent = Sent()
        /// Performs the up direction's own work; returns the machine's next action.
        func perform(_ work: UpStateMachine.Work, on machine: inout UpStateMachine) async -> UpStateMachine.Action {
            let action: UpStateMachine.Action
            switch work {
            case .read:
                do {
                    let next = try await readBatch()
                    action = machine.read(next.batch, lostThrough: next.lostThrough)
                } catch {
                    action = machine.failed(error)
                }
            case .waitForAppend(let after):
                await refreshUpLag()
                do {
                    _ = try await waitingThroughTransient { try await self.ledger.waitForChange(after: after) }
                    action = machine.appended()
                } catch {
                    action = machine.failed(error)
                }
            case .send(let part):
                do {
                    let answer = try await transport.send(part.request)
                    update { $0.up.lastSuccess = Timestamp(Date()) }
                    action = machine.answered(answer)
                } catch {
                    action = machine.failed(error)
                }
            case .commit(let part, let answer):
                do {
                    try await settleRefused(part)
                    try await commit(part.batch)
                    let lost = part.lostThrough.map { countLost(after: part.batch.after, through: $0) } ?? 0
                    sent.sent += answer.applied + answer.duplicates
                    sent.duplicates += answer.duplicates
                    sent.lost += lost
                    sent.refused += countRefused(part.request.refused ?? [])
                    update { s in
                        s.eventsSent += answer.applied + answer.duplicates
                        s.upCursor = max(s.upCursor, part.batch.through)
                    }
                    action = machine.committed()
                } catch {
                    action = machine.failed(error)
                }
                await refreshUpLag()
            }
            return action
        }
        let first = machine.start()
        let outcome = await drive(&machine, from: first, session: session, shownIn: \.up, beforePause: refreshUpLag, perform: perform)
        return (outcome, sent)
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
            let read: UpBatch
            do {
                read = UpBatch(batch: try relay.next(limit: limit))
            } catch LedgerError.consumerGap(_, let cursor, let first) {
                // One snapshot each: every sequence between the cursor and the first event returned is trimmed.
                let events = try ledger.read({ try $0.events(after: cursor, limit: limit) })
                let lostThrough = (events.first?.sequence ?? first) - 1
                read = UpBatch(batch: ConsumerBatch(after: cursor, events: events), lostThrough: lostThrough > cursor ? lostThrough : nil)
            }
            // The server must never hold an event a power cut could take back from this ledger
            // (an extension's `.singleSync` append): its sequence would be reused by another event.
            try ledger.makeDurable(.durable)
            return read
        }
    }

    /// Commits the relay's cursor through `batch` once the server holds it. (A batch of no
    /// retained events after a trim has nothing to commit: the next one moves the cursor over it.)
    func commit(_ batch: ConsumerBatch) async throws(SyncError) {
        guard !batch.events.isEmpty else { return }
        let relay = self.relay
        do {
            // Through a suspension (the app going to the background mid-commit) until the run is
            // cancelled: `.cancelled`, never "ledgers are suspended" in the status (issue 40).
            // A cancelled commit: the next run resends the batch — duplicates, applied once.
            _ = try await waitingThroughTransient { try await relay.commit(batch) }
        } catch .ledger(.consumerConflict) {
            // Another instance of the relay committed this range first; the server holds it.
        }
    }

    /// Appends an `inbox.shared-settled` without position for each shared event of `part` the
    /// server refused (no device will apply it: the app projections drop it here too), before
    /// the cursor moves past it; keyed, so a resend after a crash appends nothing again.
    func settleRefused(_ part: UpStateMachine.Part) async throws(SyncError) {
        guard let refused = part.request.refused, !refused.isEmpty else { return }
        let set = Set(refused)
        var settlements: [NewEvent] = []
        for event in part.batch.events where set.contains(event.sequence) && event.source == .shared {
            do {
                settlements.append(try NewEvent.settled(SharedSettlement(sequence: event.sequence, position: nil),
                                                        key: SyncWire.refusedKey(seq: event.sequence)))
            } catch {
                throw .ledger(error)
            }
        }
        guard !settlements.isEmpty else { return }
        let request = AppendRequest(settlements)
        _ = try await waitingThroughTransient { try await self.ledger.append(request) }
    }

    /// Counts the lost sequences `after+1 … through` not counted yet, in ``SyncStatus/eventsLost``.
    func countLost(after: UInt64, through: UInt64) -> UInt64 {
        shared.withLock { s in
            let from = max(after, s.lostCountedThrough)
            guard through > from else { return 0 }
            s.lostCountedThrough = through
            let lost = through - from
            s.status.eventsLost += lost
            offer(&s)
            return lost
        }
    }

    /// Counts the refused sequences of an acknowledged part not counted yet, in ``SyncStatus/eventsRefused``.
    func countRefused(_ refused: [UInt64]) -> UInt64 {
        guard let last = refused.last else { return 0 }
        return shared.withLock { s in
            let new = UInt64(refused.count { $0 > s.refusedCountedThrough })
            s.refusedCountedThrough = max(s.refusedCountedThrough, last)
            s.status.eventsRefused += new
            if new > 0 { offer(&s) }
            return new
        }
    }

    /// Renews the relay consumer's lease every ``SyncConfiguration/leaseRenewal`` while the
    /// client runs (idle or offline), so compaction never trims what it has not sent yet.
    func leaseLoop() async {
        while await Self.pause(for: configuration.leaseRenewal) {
            do {
                try await waitingThroughTransient { try self.relay.heartbeat() }
            } catch .ledger(.consumerConflict) {
                // The up direction committed in between: that renewed the lease too.
            } catch .cancelled {
                return
            } catch {
                update { $0.up.error = error }  // shown until the up direction's next step
            }
            await refreshUpLag()
        }
    }

    /// Sets ``SyncStatus/upLag`` (and the cursor) from the ledger: the events after the
    /// relay's cursor. If they cannot be read now, the values stay as they were (they only
    /// feed the status).
    func refreshUpLag() async {
        let relay = self.relay, ledger = self.ledger
        let read: (UInt64, UInt64)?
        do {
            read = try await ledger.retryingTransient { () throws -> (UInt64, UInt64) in (try relay.cursor(), try ledger.read({ try $0.head() })) }
        } catch {
            read = nil
        }
        guard let (cursor, head) = read else { return }
        update { s in
            s.upCursor = cursor
            s.upLag = head > cursor ? head - cursor : 0
        }
    }

    // MARK: - The down direction

    /// Performs the down machine's actions until it finishes; returns the entries appended.
    func driveDown(_ mode: DownStateMachine.Mode, session: Int) async -> (DownStateMachine.Outcome, Int) {
        let settings = DownStateMachine.Settings(
            pageSize: configuration.downPageSize, longPollSeconds: configuration.longPollSeconds, policy: policy, mode: mode)
        var machine = DownStateMachine(settings: settings, lastError: shared.withLock { $0.status.down.error })
        var received = 0
        /// Performs the down direction's own work; returns the machine's next action.
        func perform(_ work: DownStateMachine.Work, on machine: inout DownStateMachine) async -> DownStateMachine.Action {
            let action: DownStateMachine.Action
            switch work {
            case .fetch(let after, let limit, let wait):
                do {
                    action = machine.fetched(try await transport.fetch(after: after, limit: limit, waitSeconds: wait))
                } catch {
                    action = machine.failed(error)
                }
            case .apply(let page, let after):
                do {
                    received += try await apply(page, after: after)
                    action = machine.applied(cursor: shared.withLock { $0.downCursor }, head: page.head)
                } catch {
                    action = machine.failed(error)
                }
            }
            return action
        }
        let first = machine.start(after: shared.withLock { $0.downCursor })
        let outcome = await drive(&machine, from: first, session: session, shownIn: \.down, perform: perform)
        return (outcome, received)
    }

    /// Appends one answer's changes in one append, each under its feed key, then stores the
    /// down cursor. Returns the number of changes appended.
    func apply(_ page: SyncWire.DownResponse, after: UInt64) async throws(SyncError) -> Int {
        let known = shared.withLock { $0.user }
        if let known, known != page.user {
            // A different user than the state file's: its cursor does not apply.
            try saveState(user: page.user, downCursor: 0)
            shared.withLock { $0.user = page.user; $0.downCursor = 0 }
            update { $0.downCursor = 0 }
            guard after == 0 else { return 0 }  // read after the other user's cursor: fetch again from 0
        }
        var previous = after
        for change in page.changes {
            guard change.seq > previous else {
                throw .protocolViolation("feed sequence \(change.seq) after \(previous): out of order")
            }
            previous = change.seq
        }
        if let last = page.changes.last {
            let events = try await feedEvents(page)
            let sequences = try await appendFeedPage(events, page: page)
            // The state file may not get ahead of the ledger (a `.singleSync` ledger's last
            // commit can be undone by a power cut, the file's rename not).
            let ledger = self.ledger
            try await waitingThroughTransient { try ledger.makeDurable(.durable) }
            try saveState(user: page.user, downCursor: last.seq, appendedAt: sequences.last)
            shared.withLock { $0.user = page.user; $0.downCursor = last.seq }
        } else if known == nil {
            shared.withLock { $0.user = page.user }
        }
        let cursor = shared.withLock { $0.downCursor }
        update { s in
            s.changesReceived += page.changes.count
            s.downCursor = cursor
            s.downHead = max(page.head, cursor)
            s.down.lastSuccess = Timestamp(Date())
        }
        return page.changes.count
    }

    // MARK: - The token

    /// The token requests use now.
    var currentToken: String { shared.withLock { $0.token } }

    /// Asks ``SyncConfiguration/tokenProvider`` for a token to replace `refused` and gives it
    /// to the transport. Both directions share one refresh; a token already replaced (by the
    /// other direction) is not refreshed again.
    func refreshToken(refused: String) async throws(SyncError) {
        guard let provider = configuration.tokenProvider else { throw .unauthorized("no token provider") }
        let refresh: Task<String, any Error>? = shared.withLock { s in
            guard s.token == refused else { return nil }
            if let inFlight = s.tokenRefresh { return inFlight }
            let task = Task { try await provider(refused) }
            s.tokenRefresh = task
            return task
        }
        guard let refresh else { return }
        let token: String
        do {
            token = try await withTaskCancellationHandler { try await refresh.value } onCancel: { refresh.cancel() }
        } catch {
            shared.withLock { s in if s.tokenRefresh == refresh { s.tokenRefresh = nil } }
            if Task.isCancelled { throw .cancelled }
            throw .unauthorized("the token provider failed: \(error)")
        }
        shared.withLock { s in
            if s.tokenRefresh == refresh { s.tokenRefresh = nil }
            s.token = token
        }
        transport.useToken(token)
    }

    // MARK: - Helpers

    var policy: RetryPolicy {
        RetryPolicy(initialBackoff: configuration.initialBackoff, maxBackoff: configuration.maxBackoff,
                    canRefreshToken: configuration.tokenProvider != nil)
    }

    /// Runs `body`, waiting through the ledger's transient conditions (suspension, a busy writer).
    func waitingThroughTransient<T: Sendable>(_ body: @Sendable () async throws -> T) async throws(SyncError) -> T {
        do {
            return try await ledger.retryingTransient(body)
        } catch LedgerError.cancelled {
            throw .cancelled
        } catch let error as LedgerError {
            throw .ledger(error)
        } catch is CancellationError {
            throw .cancelled
        } catch {
            throw .ledger(.unexpected(path: ledger.path, operation: "sync", reason: "\(error)"))
        }
    }

    /// Sleeps; false if cancelled.
    static func pause(for duration: Duration) async -> Bool {
        do {
            try await Task.sleep(for: duration)
            return true
        } catch {
            return false
        }
    }

    /// Sleeps until `deadline`; false if cancelled.
    static func pause(until deadline: ContinuousClock.Instant) async -> Bool {
        do {
            try await Task.sleep(until: deadline, clock: .continuous)
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
