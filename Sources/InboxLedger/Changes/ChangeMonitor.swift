import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import LedgerThreads

/// Wakes waiters when the ledger's head moves, whichever process appended.
///
/// One per directory per process. While anyone waits, a watcher thread sleeps in `poll` on an
/// inotify watch of `data.mdb` (LMDB writes the file on every commit, the meta page last), and
/// re-reads the head on each change (and every 200 µs for 20 ms after it); a 250 ms timeout is the
/// safety net. The thread exits two seconds after the last waiter left. On platforms without
/// inotify the watcher polls the head every 20 ms.
final class ChangeMonitor: Sendable {
    private struct Waiter {
        var after: UInt64
        var continuation: CheckedContinuation<UInt64, any Error>
    }

    private struct State {
        var waiters: [Int: Waiter] = [:]
        var nextID = 0
        /// How to read the head, held only while someone waits: the monitor is attached to
        /// the environment, and keeping a ledger handle for good would keep the environment open.
        var readHead: (@Sendable () -> Result<UInt64, LedgerError>)?
    }

    private let state = Mutex(State())
    private let dataFile: String
    /// The watcher: runs while anyone waits, and ``lingerSeconds`` after the last waiter left.
    private let watcher = DedicatedThread(lingerSeconds: lingerSeconds)

    init(dataFile: String) {
        self.dataFile = dataFile
    }

    /// Returns the head as soon as it is greater than `sequence`.
    /// A transient failure to read the head (a suspended process, a busy writer) keeps waiting;
    /// any other fails every waiter with it instead of leaving them asleep for ever.
    func wait(after sequence: UInt64, readHead: @escaping @Sendable () -> Result<UInt64, LedgerError>) async throws -> UInt64 {
        switch readHead() {
        case .success(let head) where head > sequence: return head
        case .failure(let error) where !error.isTransient: throw error
        case .success, .failure: break
        }
        let id = state.withLock { s -> Int in
            s.nextID += 1
            return s.nextID
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<UInt64, any Error>) in
                let registered = state.withLock { s -> Bool in
                    if Task.isCancelled {
                        continuation.resume(throwing: CancellationError())
                        return false
                    }
                    s.waiters[id] = Waiter(after: sequence, continuation: continuation)
                    s.readHead = readHead
                    return true
                }
                // Blocks in `poll`, off the cooperative pool.
                if registered { watcher.wake { thread in self.watch(on: thread) } }
                // The head may have moved between the first check and the registration.
                self.check()
            }
        } onCancel: {
            let waiter = state.withLock { s in
                defer { if s.waiters.isEmpty { s.readHead = nil } }
                return s.waiters.removeValue(forKey: id)
            }
            waiter?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Called after a commit in this process: wakes waiters without waiting for the watcher.
    func poke() {
        if state.withLock({ $0.waiters.isEmpty }) { return }
        check()
    }

    /// Resumes every waiter the current head satisfies, or fails every waiter with a read error
    /// that is not transient.
    private func check() {
        guard let readHead = state.withLock({ $0.readHead }) else { return }
        let head: UInt64
        switch readHead() {
        case .success(let value): head = value
        case .failure(let error):
            guard !error.isTransient else { return }
            let failed = state.withLock { s -> [CheckedContinuation<UInt64, any Error>] in
                defer { s.waiters = [:]; s.readHead = nil }
                return s.waiters.values.map(\.continuation)
            }
            for continuation in failed { continuation.resume(throwing: error) }
            return
        }
        let ready = state.withLock { s -> [CheckedContinuation<UInt64, any Error>] in
            let ids = s.waiters.filter { $0.value.after < head }.map(\.key)
            let ready = ids.compactMap { s.waiters.removeValue(forKey: $0)?.continuation }
            if s.waiters.isEmpty { s.readHead = nil }
            return ready
        }
        for continuation in ready { continuation.resume(returning: head) }
    }

    /// How long the watcher thread outlives its last waiter: a consumer that waits again right
    /// after each wake-up keeps one thread and one watch instead of starting a new one per event.
    static let lingerSeconds = 2.0
    /// The re-checks after a file event: every `quickCheckMicros` µs, `quickCheckCount` times.
    static let quickCheckMicros: UInt32 = 200
    static let quickCheckCount = 100

    private func watch(on thread: DedicatedThread) {
        #if canImport(Glibc)
        let fd = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
        if fd >= 0 { _ = inotify_add_watch(fd, dataFile, UInt32(IN_MODIFY)) }
        defer { if fd >= 0 { close(fd) } }
        var buffer = [UInt8](repeating: 0, count: 4096)
        #endif
        // A commit between a waiter's registration and the watch above raised no event: look
        // once now (without this, such a waiter slept until the 250 ms safety net).
        check()
        // After a file event, look again every 200 µs for 20 ms: LMDB publishes a commit to
        // readers (the transaction id in lock.mdb) just *after* its last write to data.mdb, so
        // the check that an event triggers can still see the old head, and no further event
        // will come for that commit. (A 2 ms re-check made the wake-up's p99 3.5 ms; a check is
        // one short read transaction, about 2 µs.)
        var quickChecks = 0
        while true {
            if state.withLock({ $0.waiters.isEmpty }) {
                // Nobody waits: linger (events meanwhile stay queued on the watch) or stop.
                if thread.idle() { continue }
                return
            }
            thread.busy()
            #if canImport(Glibc)
            if fd >= 0 {
                if quickChecks > 0 {
                    usleep(Self.quickCheckMicros)
                    quickChecks -= 1
                    // Events of later commits meanwhile: consume them and keep looking.
                    if buffer.withUnsafeMutableBytes({ read(fd, $0.baseAddress, $0.count) }) > 0 { quickChecks = Self.quickCheckCount }
                } else {
                    var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                    if poll(&pfd, 1, 250) > 0 {
                        _ = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                        quickChecks = Self.quickCheckCount
                    }
                }
            } else {
                usleep(20_000)
            }
            #else
            usleep(20_000)
            #endif
            check()
        }
    }
}
