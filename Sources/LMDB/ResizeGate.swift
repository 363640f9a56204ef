#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A process-wide reader/writer gate around one environment (docs/lmdb.md rule 9).
///
/// Every transaction holds the gate shared for its whole life. Changing the map size
/// (`mdb_env_set_mapsize`) or the environment flags takes it exclusive, so it never
/// happens while a transaction of this process is active, which LMDB itself does not check.
/// Transactions are synchronous closures, so the lock is always released on the thread
/// that took it.
final class ResizeGate: @unchecked Sendable {
    // @unchecked: the pthread rwlock is the synchronisation primitive itself; it lives
    // at a stable heap address for the object's lifetime.
    private let lock: UnsafeMutablePointer<pthread_rwlock_t>

    init() {
        lock = .allocate(capacity: 1)
        lock.initialize(to: pthread_rwlock_t())
        pthread_rwlock_init(lock, nil)
    }

    deinit {
        pthread_rwlock_destroy(lock)
        lock.deallocate()
    }

    func withShared<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        pthread_rwlock_rdlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body()
    }

    func withExclusive<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        pthread_rwlock_wrlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body()
    }
}
