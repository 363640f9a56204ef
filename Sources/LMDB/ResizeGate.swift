#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import LedgerThreads

/// A process-wide reader/writer gate around one environment (docs/lmdb.md rule 9).
///
/// Every transaction holds the gate shared for its whole life. Changing the map size
/// (`mdb_env_set_mapsize`), the environment flags, or closing and reopening the C environment
/// (suspension, idle close) takes it exclusive, so none of that happens while a transaction of
/// this process is active, which LMDB itself does not check. Transactions are synchronous
/// closures, so the lock is always released on the thread that took it.
final class ResizeGate: @unchecked Sendable {
    // @unchecked: the pthread rwlock is the synchronisation primitive itself; it lives
    // at a stable heap address for the object's lifetime.
    private let lock: UnsafeMutablePointer<pthread_rwlock_t>

    init() {
        lock = .allocate(capacity: 1)
        lock.initialize(to: pthread_rwlock_t())
        let code = pthread_rwlock_init(lock, nil)
        precondition(code == 0, "pthread_rwlock_init failed: \(code)")
    }

    deinit {
        pthread_rwlock_destroy(lock)
        lock.deallocate()
    }

    func withShared<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        let code = pthread_rwlock_rdlock(lock)
        precondition(code == 0, "pthread_rwlock_rdlock failed: \(code)")
        defer { pthread_rwlock_unlock(lock) }
        return try body()
    }

    func withExclusive<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        let code = pthread_rwlock_wrlock(lock)
        precondition(code == 0, "pthread_rwlock_wrlock failed: \(code)")
        defer { pthread_rwlock_unlock(lock) }
        return try body()
    }

    /// Runs `body` holding the gate exclusive if it can be had within `milliseconds` (0: only
    /// if free now); nil otherwise. Polls (`pthread_rwlock_timedwrlock` does not exist on every
    /// platform); callers stop new transactions from starting first, so it only waits for the
    /// ones in flight.
    func withExclusive<T, E: Error>(within milliseconds: Int, _ body: () throws(E) -> T) throws(E) -> T? {
        let deadline = monotonicMilliseconds() + milliseconds
        while true {
            let code = pthread_rwlock_trywrlock(lock)
            if code == 0 { break }
            precondition(code == EBUSY, "pthread_rwlock_trywrlock failed: \(code)")
            if monotonicMilliseconds() >= deadline { return nil }
            usleep(500)
        }
        defer { pthread_rwlock_unlock(lock) }
        return try body()
    }
}
