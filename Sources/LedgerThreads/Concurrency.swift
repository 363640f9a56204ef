#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// The package's concurrency primitives for threads (not tasks): a lock that owns the value it
// guards and lets threads wait for it to change, and the one kind of dedicated thread the
// package starts. A module of their own below the LMDB layer (its idle close uses them) and the
// ledger (group commit, change monitor, off-pool reads): neither owns them.

/// A mutex and a condition variable that own the value they guard (swift-nio's
/// `ConditionLock` shape): the value is reachable only inside the closures below, with the lock
/// held, so no code can read it unlocked or wait on a condition of some other lock's state.
///
/// Whoever changes the value so that a waiter's predicate may hold uses
/// ``withLockWakingWaiters(_:)``; a waiter re-checks its predicate after every wake-up, under
/// the lock, so a change between its check and its wait is never lost.
package final class ConditionLock<Value> {
    // The value lives at a stable heap address like the mutex: reached through the pointer, a
    // predicate borrows it in place (a stored property was copied for every check, and its
    // copy-on-write arrays with it) and no exclusivity check runs (the mutex is the check).
    private let value: UnsafeMutablePointer<Value>
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let cond = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    package init(_ value: Value) {
        self.value = UnsafeMutablePointer<Value>.allocate(capacity: 1)
        self.value.initialize(to: value)
        mutex.initialize(to: pthread_mutex_t())
        cond.initialize(to: pthread_cond_t())
        Self.check(pthread_mutex_init(mutex, nil), "pthread_mutex_init")
        Self.check(pthread_cond_init(cond, nil), "pthread_cond_init")
    }

    deinit {
        pthread_cond_destroy(cond)
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
        cond.deallocate()
        value.deinitialize(count: 1)
        value.deallocate()
    }

    /// A pthread call's result, which can only be an error through a bug (swift-nio's rule).
    private static func check(_ code: Int32, _ call: StaticString) {
        precondition(code == 0, "\(call) failed: \(code)")
    }

    /// Runs `body` with the value, the lock held.
    package func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        Self.check(pthread_mutex_lock(mutex), "pthread_mutex_lock")
        defer { Self.check(pthread_mutex_unlock(mutex), "pthread_mutex_unlock") }
        return try body(&value.pointee)
    }

    /// Runs `body` with the value, the lock held, then wakes every waiter to re-check its
    /// predicate.
    package func withLockWakingWaiters<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        Self.check(pthread_mutex_lock(mutex), "pthread_mutex_lock")
        defer {
            Self.check(pthread_cond_broadcast(cond), "pthread_cond_broadcast")
            Self.check(pthread_mutex_unlock(mutex), "pthread_mutex_unlock")
        }
        return try body(&value.pointee)
    }

    /// Blocks the calling thread until `predicate` holds of the value, then runs `body` with
    /// the value, the lock still held.
    package func withLock<R>(when predicate: (Value) -> Bool, _ body: (inout Value) -> R) -> R {
        Self.check(pthread_mutex_lock(mutex), "pthread_mutex_lock")
        defer { Self.check(pthread_mutex_unlock(mutex), "pthread_mutex_unlock") }
        while !predicate(value.pointee) { Self.check(pthread_cond_wait(cond, mutex), "pthread_cond_wait") }
        return body(&value.pointee)
    }

    /// Blocks the calling thread until `predicate` holds of the value or `timeoutSeconds`
    /// passed, then runs `body` with the value (the lock still held) and whether the
    /// predicate holds.
    package func withLock<R>(when predicate: (Value) -> Bool, timeoutSeconds: Double, _ body: (inout Value, _ satisfied: Bool) -> R) -> R {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let total = Int(now.tv_nsec) + Int(max(0, timeoutSeconds) * 1_000_000_000)
        var deadline = timespec(tv_sec: now.tv_sec + total / 1_000_000_000, tv_nsec: total % 1_000_000_000)
        Self.check(pthread_mutex_lock(mutex), "pthread_mutex_lock")
        defer { Self.check(pthread_mutex_unlock(mutex), "pthread_mutex_unlock") }
        while !predicate(value.pointee) {
            let code = pthread_cond_timedwait(cond, mutex, &deadline)
            if code == ETIMEDOUT { break }
            precondition(code == 0, "pthread_cond_timedwait failed: \(code)")
        }
        let satisfied = predicate(value.pointee)
        return body(&value.pointee, satisfied)
    }
}

// @unchecked: `value` is only touched with `mutex` held; the value, the pthread mutex and the
// condition live at stable heap addresses for the object's lifetime. Only for a Sendable value:
// what the closures hand out crosses threads.
extension ConditionLock: @unchecked Sendable where Value: Sendable {}

/// One OS thread, started on demand, for work that blocks and so must stay off Swift's
/// cooperative pool (a write transaction, `poll`, a periodic check). It runs its body while
/// there is work and lingers a while after the last before it exits; ``wake()`` starts it
/// again, or wakes it from its lingering.
///
/// The body is a loop (one per thread) that calls ``busy()`` after each round that did work and ``idle()``
/// after each that found none, and returns when ``idle()`` (or ``stopUnlessWoken()``) says
/// so. The decision to stop and ``wake()`` take the same lock, so work posted before a
/// ``wake()`` is always seen: by this thread, or by the one the wake starts.
package final class DedicatedThread: Sendable {
    private struct State {
        var running = false
        /// A ``wake()`` since the thread last waited.
        var woken = false
        /// When the thread last did work (monotonic seconds).
        var busySince = 0.0
    }

    private let state = ConditionLock(State())
    /// How long the thread waits for work before it exits (``idle()``).
    package let lingerSeconds: Double

    /// A thread, not started yet.
    package init(lingerSeconds: Double) {
        self.lingerSeconds = lingerSeconds
    }

    /// Starts the thread running `body` if it is not running, else wakes it if it waits.
    /// `body` gets this object for its ``busy()`` and ``idle()`` calls; what it captures lives
    /// as long as the thread runs.
    package func wake(running body: @escaping @Sendable (DedicatedThread) -> Void) {
        let start = state.withLockWakingWaiters { s -> Bool in
            if s.running {
                s.woken = true
                return false
            }
            s.running = true
            s.woken = false
            s.busySince = monotonicSeconds()
            return true
        }
        if start { detachThread { body(self) } }
    }

    /// Whether the thread runs (started and not yet decided to stop).
    package var isRunning: Bool { state.withLock { $0.running } }

    /// On the thread: a round did work; the linger time counts from now.
    package func busy() {
        state.withLock { $0.busySince = monotonicSeconds() }
    }

    /// On the thread: a round found nothing to do. Waits for a ``wake()`` up to what remains of
    /// the linger time and returns true (look for work again), or returns false when the
    /// thread lingered long enough: it no longer runs, and the body must return.
    package func idle() -> Bool {
        let lingered = state.withLock { s -> Bool in
            if s.woken { return false }
            return monotonicSeconds() - s.busySince >= lingerSeconds
        }
        if lingered { return !stopUnlessWoken() }
        let remaining = state.withLock { lingerSeconds - (monotonicSeconds() - $0.busySince) }
        waitForWake(timeoutSeconds: remaining)
        return true
    }

    /// On the thread: waits until a ``wake()`` or `timeoutSeconds` passed; returns whether it
    /// was woken.
    @discardableResult
    package func waitForWake(timeoutSeconds: Double) -> Bool {
        state.withLock(when: { $0.woken }, timeoutSeconds: timeoutSeconds) { s, woken in
            s.woken = false
            return woken
        }
    }

    /// On the thread: stops (returns true: the body must return) unless a ``wake()`` came
    /// since it last waited, in which case it keeps running and returns false.
    package func stopUnlessWoken() -> Bool {
        state.withLock { s in
            if s.woken {
                s.woken = false
                s.busySince = monotonicSeconds()
                return false
            }
            s.running = false
            return true
        }
    }
}

/// Starts `body` on a new detached OS thread (on the calling thread if none can be created).
private func detachThread(_ body: @escaping @Sendable () -> Void) {
    final class Box: Sendable {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
    var thread = pthread_t()
    let box = Unmanaged.passRetained(Box(body)).toOpaque()
    let started = pthread_create(&thread, nil, { context in
        guard let context else { return nil }
        Unmanaged<Box>.fromOpaque(context).takeRetainedValue().body()
        return nil
    }, box)
    if started == 0 { pthread_detach(thread) } else {
        Unmanaged<Box>.fromOpaque(box).takeRetainedValue().body()
    }
}
