import Foundation
import Testing
import TestSupport
@testable import LMDB
import LedgerThreads

/// The concurrency primitives (Sources/LMDB/Concurrency.swift). Every wait below is for the
/// event the test needs; the timeouts are safety nets that turn a lost wake-up into a failure
/// instead of a hang.
@Suite struct ConcurrencyTests {
    static let safetyNet = 120.0

    /// A waiter blocked on its predicate is released by the change that makes it true, and
    /// sees the value as that change left it.
    @Test func aWaiterWakesForTheChangeItWaitsFor() {
        let lock = ConditionLock(0)
        let done = ConditionLock<Int?>(nil)
        Thread.detachNewThread {
            let seen = lock.withLock(when: { $0 >= 3 }) { $0 }
            done.withLockWakingWaiters { $0 = seen }
        }
        for _ in 0..<3 { lock.withLockWakingWaiters { $0 += 1 } }
        let seen = done.withLock(when: { $0 != nil }, timeoutSeconds: Self.safetyNet) { value, _ in value }
        #expect(seen == 3)
    }

    /// A timed wait whose predicate never holds returns unsatisfied.
    @Test func aTimedWaitReportsWhetherItsPredicateHolds() {
        let lock = ConditionLock(false)
        #expect(lock.withLock(when: { $0 }, timeoutSeconds: 0.01) { _, satisfied in satisfied } == false)
        lock.withLockWakingWaiters { $0 = true }
        #expect(lock.withLock(when: { $0 }, timeoutSeconds: 0.01) { _, satisfied in satisfied } == true)
    }

    /// Work posted while the thread decides to stop is never lost: with no linger at all, the
    /// thread stops after nearly every job, and each post races that decision.
    @Test func noWakeUpIsLostWhileTheThreadStops() {
        let thread = DedicatedThread(lingerSeconds: 0)
        let queue = ConditionLock((pending: 0, done: 0))
        let posts = 2000
        for _ in 0..<posts {
            queue.withLock { $0.pending += 1 }
            thread.wake { thread in
                while true {
                    let took = queue.withLockWakingWaiters { q -> Bool in
                        guard q.pending > 0 else { return false }
                        q.pending -= 1
                        q.done += 1
                        return true
                    }
                    if took { thread.busy() } else if !thread.idle() { return }
                }
            }
        }
        let done = queue.withLock(when: { $0.done == posts }, timeoutSeconds: Self.safetyNet) { q, _ in q.done }
        #expect(done == posts)
    }

    /// A thread stops once it idled for its linger time, and the next wake starts it again.
    @Test func aThreadStopsAfterItsLingerAndStartsAgain() {
        let thread = DedicatedThread(lingerSeconds: 0.01)
        let runs = ConditionLock((started: 0, ended: 0))
        for round in 1...2 {
            thread.wake { thread in
                runs.withLockWakingWaiters { $0.started += 1 }
                while thread.idle() {}
                runs.withLockWakingWaiters { $0.ended += 1 }
            }
            let ended = runs.withLock(when: { $0.ended == round }, timeoutSeconds: Self.safetyNet) { r, _ in r.ended }
            #expect(ended == round)
        }
        #expect(runs.withLock { $0.started } == 2)
        #expect(!thread.isRunning)
    }

    /// An attachment key returns what it was made with; keys of one name and another type,
    /// or another name, reach other objects.
    @Test func attachmentKeysAreTyped() throws {
        final class A: Sendable {}
        final class B: Sendable {}
        let dir = TemporaryDirectory()
        let env = try Environment.open(directory: dir.path, configuration: config())
        let a = env.attachment(AttachmentKey<A>("k")) { A() }
        #expect(env.attachment(AttachmentKey<A>("k")) { A() } === a)
        let b = env.attachment(AttachmentKey<B>("k")) { B() }
        #expect(env.attachment(AttachmentKey<B>("k")) { B() } === b)
        #expect(env.attachment(AttachmentKey<A>("other")) { A() } !== a)
    }
}
