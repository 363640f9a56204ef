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
    private struct State {
        /// Requests not yet taken by a leader, by ticket.
        var pending: [(ticket: UInt64, request: CommitRequest)] = []
        /// Outcomes published by leaders, until each caller takes its own.
        var outcomes: [UInt64: Result<AppendReceipt, LedgerError>] = [:]
        var nextTicket: UInt64 = 0
        var leaderActive = false
        var lastReaderCheck = monotonicSeconds()
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

    /// Enqueues `request` and returns once a commit holding it (or its failure) is final.
    /// `commit` runs on the calling thread when this caller becomes the leader and returns one
    /// outcome per request of the batch, which are published under the lock.
    func submit(
        _ request: CommitRequest, maxEvents: Int, commit: ([CommitRequest]) -> [Result<AppendReceipt, LedgerError>]
    ) -> Result<AppendReceipt, LedgerError> {
        let ticket = state.withLock { s in
            s.nextTicket += 1
            s.pending.append((s.nextTicket, request))
            return s.nextTicket
        }
        while true {
            let batch: [(ticket: UInt64, request: CommitRequest)]? = state.withLock { s in
                if s.outcomes[ticket] != nil || s.leaderActive { return nil }
                s.leaderActive = true
                var taken = 0
                var count = 0
                for (_, r) in s.pending {
                    if count > 0 && count + r.events.count > maxEvents { break }
                    count += r.events.count
                    taken += 1
                }
                let batch = Array(s.pending.prefix(taken))
                s.pending.removeFirst(taken)
                return batch
            }
            if let batch {
                let outcomes = commit(batch.map(\.request))
                state.withLock { s in
                    for (entry, outcome) in zip(batch, outcomes) { s.outcomes[entry.ticket] = outcome }
                    s.leaderActive = false
                }
                wakeup.broadcast()
            } else {
                if let done = state.withLock({ $0.outcomes.removeValue(forKey: ticket) }) { return done }
                wakeup.wait { self.state.withLock { s in s.outcomes[ticket] != nil || !s.leaderActive } }
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
