import LMDB
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

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

    init(events: [PreparedEvent], origin: Origin, durability: LedgerDurability, cursor: CursorCommit? = nil, expectedHead: UInt64? = nil) {
        self.events = events
        self.origin = origin
        self.durability = durability
        self.cursor = cursor
        self.expectedHead = expectedHead
    }
}

/// In-process group commit (docs/lmdb.md rule 12): concurrent appenders hand their batches to
/// one leader thread, which commits all of them in one write transaction (one or two syncs
/// for everyone) and then wakes each caller. The leader runs the whole transaction on its own
/// thread, start to end, so the writer lock is always released by the thread that took it.
final class CommitQueue: Sendable {
    /// Who waits for a request's outcome: a blocking caller (by ticket, in `outcomes`) or an
    /// async caller (its completion, called once, outside the lock).
    typealias Completion = @Sendable (Result<AppendReceipt, any Error>) -> Void
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

    private let state = Mutex(State())
    private let wakeup = Condition()
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
        var completions: [(Completion, Result<AppendReceipt, any Error>)] = []
        state.withLock { s in
            for (entry, outcome) in zip(batch, outcomes) {
                if let completion = entry.completion { completions.append((completion, outcome.mapError { $0 })) } else { s.outcomes[entry.ticket] = outcome }
            }
            s.leaderActive = false
        }
        wakeup.broadcast()
        for (completion, outcome) in completions { completion(outcome) }
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
            let batch = state.withLock { s -> [Pending]? in
                if s.outcomes[ticket] != nil { return nil }
                return Self.takeBatch(&s, maxEvents: maxEvents)
            }
            if let batch {
                lead(batch, commit: commit)
            } else {
                if let done = state.withLock({ $0.outcomes.removeValue(forKey: ticket) }) { return done }
                wakeup.wait { self.state.withLock { s in s.outcomes[ticket] != nil || !s.leaderActive } }
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
    /// `CancellationError`; a request a commit already holds gets that commit's outcome.
    func cancel(_ ticket: UInt64) {
        let completion = state.withLock { s -> Completion? in
            guard let index = s.pending.firstIndex(where: { $0.ticket == ticket }) else { return nil }
            return s.pending.remove(at: index).completion
        }
        completion?(.failure(CancellationError()))
    }

    /// A job of the async leader: leads commits while async requests wait, waiting for any
    /// other leader to finish first. Jobs posted while one runs find nothing left and return.
    private func leadAsyncRequests(maxEvents: Int) {
        while true {
            let next = state.withLock { s -> (batch: [Pending], commit: Commit)?? in
                guard s.asyncPendingCount > 0 else {
                    // Do not keep the submitter's handle (and so its files) alive while nothing waits.
                    s.asyncCommit = nil
                    return .some(nil)
                }
                guard let commit = s.asyncCommit, let batch = Self.takeBatch(&s, maxEvents: maxEvents) else { return nil }
                return .some((batch, commit))
            }
            switch next {
            case .some(nil):
                return
            case .some(let work?):
                lead(work.batch, commit: work.commit)
            case .none:
                // Another leader is active: sleep until it finishes (it broadcasts).
                wakeup.wait { self.state.withLock { s in s.asyncPendingCount == 0 || !s.leaderActive } }
            }
        }
    }
}

/// A condition variable for threads (not tasks): `wait` blocks the calling thread until
/// `predicate` holds after a `broadcast`.
final class Condition: @unchecked Sendable {
    // @unchecked: the pthread mutex and condition synchronise themselves; they live at stable
    // heap addresses for the object's lifetime.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let cond = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var generation = 0

    init() {
        mutex.initialize(to: pthread_mutex_t())
        cond.initialize(to: pthread_cond_t())
        Condition.check(pthread_mutex_init(mutex, nil), "pthread_mutex_init")
        Condition.check(pthread_cond_init(cond, nil), "pthread_cond_init")
    }

    deinit {
        pthread_cond_destroy(cond)
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
        cond.deallocate()
    }

    /// A pthread call's result, which can only be an error through a bug (swift-nio's rule).
    private static func check(_ code: Int32, _ call: StaticString) {
        precondition(code == 0, "\(call) failed: \(code)")
    }

    func broadcast() {
        Condition.check(pthread_mutex_lock(mutex), "pthread_mutex_lock")
        generation &+= 1
        Condition.check(pthread_cond_broadcast(cond), "pthread_cond_broadcast")
        Condition.check(pthread_mutex_unlock(mutex), "pthread_mutex_unlock")
    }

    /// Blocks until `predicate()` is true or `timeoutSeconds` passed; returns whether it is true.
    @discardableResult
    func wait(timeoutSeconds: Double, until predicate: () -> Bool) -> Bool {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let total = Int(now.tv_nsec) + Int(timeoutSeconds * 1_000_000_000)
        var deadline = timespec(tv_sec: now.tv_sec + total / 1_000_000_000, tv_nsec: total % 1_000_000_000)
        Condition.check(pthread_mutex_lock(mutex), "pthread_mutex_lock")
        defer { Condition.check(pthread_mutex_unlock(mutex), "pthread_mutex_unlock") }
        while !predicate() {
            let seen = generation
            while generation == seen {
                let code = pthread_cond_timedwait(cond, mutex, &deadline)
                if code == ETIMEDOUT { return predicate() }
                precondition(code == 0, "pthread_cond_timedwait failed: \(code)")
            }
        }
        return true
    }

    /// Blocks until `predicate()` is true. The predicate is re-checked after every broadcast;
    /// a broadcast between the check and the wait is not lost (generation counter).
    func wait(until predicate: () -> Bool) {
        Condition.check(pthread_mutex_lock(mutex), "pthread_mutex_lock")
        while !predicate() {
            let seen = generation
            while generation == seen { Condition.check(pthread_cond_wait(cond, mutex), "pthread_cond_wait") }
        }
        Condition.check(pthread_mutex_unlock(mutex), "pthread_mutex_unlock")
    }
}
