import LedgerThreads
/// One caller's batch waiting for a commit. Immutable: its outcome lives in the commit
/// queue's locked state, never in the request (a result once written outside the lock while
/// its owner read it inside was a torn read of the enum: a SIGSEGV in ledger-torture).
struct CommitRequest: Sendable {
    let events: [PreparedEvent]
    let origin: Origin
    let durability: LedgerDurability
    /// A consumer cursor to move in the same transaction (``Consumer/commit(_:appending:)``).
    let cursor: CursorCommit?
    /// The head the caller read before deciding (``Ledger/append(contentsOf:expectingHead:)``).
    let expectedHead: UInt64?
    /// The app projections of the handle that made the request (handles of one process may
    /// register different ones; one group commit serves them all).
    let projections: AppProjectionRegistry

    init(events: [PreparedEvent], origin: Origin, durability: LedgerDurability, cursor: CursorCommit? = nil, expectedHead: UInt64? = nil,
         projections: AppProjectionRegistry = .empty) {
        self.events = events
        self.origin = origin
        self.durability = durability
        self.cursor = cursor
        self.expectedHead = expectedHead
        self.projections = projections
    }
}

/// In-process group commit (docs/lmdb.md rule 12): concurrent appenders hand their batches to
/// one leader thread, which commits all of them in one write transaction (one or two syncs
/// for everyone) and then wakes each caller. The leader runs the whole transaction on its own
/// thread, start to end, so the writer lock is always released by the thread that took it.
final class CommitQueue: Sendable {
    /// Who waits for a request's outcome: a blocking caller (by ticket, in `outcomes`) or an
    /// async caller (its completion, called once, outside the lock).
    typealias Completion = @Sendable (Result<AppendReceipt, LedgerError>) -> Void
    typealias Commit = @Sendable ([CommitRequest]) -> [Result<AppendReceipt, LedgerError>]

    private struct Pending {
        var ticket: UInt64
        var request: CommitRequest
        var completion: Completion?
    }

    private struct State {
        /// Requests not yet taken by a leader, by ticket.
        var pending: [Pending] = []
        /// Outcomes published by leaders, until each blocking caller takes its own.
        var outcomes: [UInt64: Result<AppendReceipt, LedgerError>] = [:]
        var nextTicket: UInt64 = 0
        var leaderActive = false
        var lastReaderCheck = monotonicSeconds()
        /// How the async leader commits (the last async submitter's handle), held only while
        /// async requests wait, and whether its thread runs.
        var asyncCommit: Commit?
        /// Async requests no leader has taken yet (the ones a cancellation can still remove).
        var asyncPendingCount: Int { pending.reduce(0) { $0 + ($1.completion == nil ? 0 : 1) } }
    }

    /// How often a leader clears reader slots of dead processes (docs/lmdb.md rule 4).
    static let readerCheckInterval = 30.0

    /// Whether the reader table is due for a check; resets the clock when it is.
    func readerCheckDue() -> Bool {
        state.withLock { s in
            let now = monotonicSeconds()
            guard now - s.lastReaderCheck >= Self.readerCheckInterval else { return false }
            s.lastReaderCheck = now
            return true
        }
    }

    /// The queue's state, and the condition its waiters wait on: a caller waiting for its
    /// outcome, the async leader waiting for another leader to finish.
    private let state = ConditionLock(State())
    /// Leads the commits of async requests (a blocking caller may lead them too).
    private let asyncLeader = OffPoolWorker()

    /// Takes the next batch (up to `maxEvents` events, at least one request) if no leader is
    /// active, making the caller the leader.
    private static func takeBatch(_ s: inout State, maxEvents: Int) -> [Pending]? {
        if s.leaderActive || s.pending.isEmpty { return nil }
        s.leaderActive = true
        var taken = 0
        var count = 0
        for p in s.pending {
            if count > 0 && count + p.request.events.count > maxEvents { break }
            count += p.request.events.count
            taken += 1
        }
        let batch = Array(s.pending.prefix(taken))
        s.pending.removeFirst(taken)
        return batch
    }

    /// Commits `batch` as its leader and hands every outcome to its owner.
    private func lead(_ batch: [Pending], commit: ([CommitRequest]) -> [Result<AppendReceipt, LedgerError>]) {
        let outcomes = commit(batch.map(\.request))
        var completions: [(Completion, Result<AppendReceipt, LedgerError>)] = []
        state.withLockWakingWaiters { s in
            for (entry, outcome) in zip(batch, outcomes) {
                if let completion = entry.completion { completions.append((completion, outcome)) } else { s.outcomes[entry.ticket] = outcome }
            }
            s.leaderActive = false
        }
        for (completion, outcome) in completions { completion(outcome) }
    }

    /// What a waiting caller does next.
    private enum Step {
        /// Its outcome is published: return it.
        case done(Result<AppendReceipt, LedgerError>)
        /// No leader was active: it leads this batch.
        case lead([Pending])
        /// Wait again.
        case again
    }

    /// Enqueues `request` and returns once a commit holding it (or its failure) is final.
    /// `commit` runs on the calling thread when this caller becomes the leader and returns one
    /// outcome per request of the batch, which are published under the lock.
    func submit(
        _ request: CommitRequest, maxEvents: Int, commit: ([CommitRequest]) -> [Result<AppendReceipt, LedgerError>]
    ) -> Result<AppendReceipt, LedgerError> {
        let ticket = state.withLock { s in
            s.nextTicket += 1
            s.pending.append(Pending(ticket: s.nextTicket, request: request, completion: nil))
            return s.nextTicket
        }
        while true {
            // Until this request's outcome is published or no leader is active (then this
            // caller leads the next batch, which holds its request).
            let next = state.withLock(when: { s in s.outcomes[ticket] != nil || !s.leaderActive }) { s -> Step in
                if let done = s.outcomes.removeValue(forKey: ticket) { return .done(done) }
                return Self.takeBatch(&s, maxEvents: maxEvents).map(Step.lead) ?? .again
            }
            switch next {
            case .done(let outcome): return outcome
            case .lead(let batch): lead(batch, commit: commit)
            case .again: continue
            }
        }
    }

    /// Enqueues `request` for an async caller and returns its ticket (for ``cancel(_:)``) at
    /// once; `completion` gets the outcome. The commit runs on this queue's leader thread (or
    /// on a blocking caller's, which takes it into its group), never on the caller's.
    func submitAsync(_ request: CommitRequest, maxEvents: Int, commit: @escaping Commit, completion: @escaping Completion) -> UInt64 {
        let ticket = state.withLock { s -> UInt64 in
            s.nextTicket += 1
            s.pending.append(Pending(ticket: s.nextTicket, request: request, completion: completion))
            s.asyncCommit = commit
            return s.nextTicket
        }
        asyncLeader.post { self.leadAsyncRequests(maxEvents: maxEvents) }
        return ticket
    }

    /// Whether a leader holds a batch, and how many async requests wait for one (what a test
    /// waits for before it cancels: only those can be withdrawn).
    var progress: (leading: Bool, asyncWaiting: Int) { state.withLock { ($0.leaderActive, $0.asyncPendingCount) } }

    /// Withdraws an async request no leader has taken yet, completing it with
    /// ``LedgerError/cancelled``; a request a commit already holds gets that commit's outcome.
    func cancel(_ ticket: UInt64) {
        let completion = state.withLock { s -> Completion? in
            guard let index = s.pending.firstIndex(where: { $0.ticket == ticket }) else { return nil }
            return s.pending.remove(at: index).completion
        }
        completion?(.failure(.cancelled))
    }

    /// What the async leader does next.
    private enum AsyncStep {
        /// No async request waits.
        case finished
        case lead([Pending], Commit)
        case again
    }

    /// A job of the async leader: leads commits while async requests wait, waiting for any
    /// other leader to finish first. Jobs posted while one runs find nothing left and return.
    private func leadAsyncRequests(maxEvents: Int) {
        while true {
            // Another leader is active: sleep until it finishes (it wakes the waiters).
            let next = state.withLock(when: { s in s.asyncPendingCount == 0 || !s.leaderActive }) { s -> AsyncStep in
                guard s.asyncPendingCount > 0 else {
                    // Do not keep the submitter's handle (and so its files) alive while nothing waits.
                    s.asyncCommit = nil
                    return .finished
                }
                guard let commit = s.asyncCommit, let batch = Self.takeBatch(&s, maxEvents: maxEvents) else { return .again }
                return .lead(batch, commit)
            }
            switch next {
            case .finished: return
            case .lead(let batch, let commit): lead(batch, commit: commit)
            case .again: continue
            }
        }
    }
}
