import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import LedgerThreads

/// The cross-process writer lock taken around every write transaction: a write lock on
/// ``ByteLock/writer`` of `lock.mdb` (LMDB's own writer mutex cannot time out). A process stopped
/// inside its write transaction keeps it, so others give up after their timeout and can name it;
/// a killed one loses it at once. `fcntl` locks belong to the process, so the threads of one
/// process share it: the first takes it, the last releases it.
///
/// A waiter gives up only when the writers made no progress for a whole timeout
/// (``WriterProgress``): while transactions commit, or the holder runs (only descheduled on a
/// busy machine, or waiting for the disk), it waits on — up to ``runningHolderLimit`` timeouts
/// for one holder that runs without committing (a write that never ends).
final class WriterLock: Sendable {
    /// Writers of this process inside their write (holding the lock).
    private let holders = Mutex<Int>(0)

    /// How many timeouts a waiter grants one holder that keeps running without committing.
    static let runningHolderLimit = 12

    /// Takes the lock, waiting while the writers make progress; `look` reads the progress
    /// signals (called only while waiting, once per timeout).
    func acquire(_ fd: Int32, timeoutMilliseconds: Int, look: () -> WriterProgress) throws(LMDBError) {
        if fd < 0 { return }  // lock.mdb not writable: no write will succeed anyway
        var deadline = monotonicMilliseconds() + timeoutMilliseconds
        var pause: UInt32 = 50
        var earlier: WriterProgress?
        /// When the holder began running without committing (for ``runningHolderLimit``).
        var runningSince: Int?
        while true {
            let taken = try holders.withLock { (count: inout Int) throws(LMDBError) -> Bool in
                if count > 0 { count += 1; return true }
                let code = ByteLock.set(fd, F_WRLCK, at: ByteLock.writer)
                guard code == 0 else {
                    guard code == EAGAIN || code == EACCES || code == EINTR else { throw LMDBError(rawValue: code) }
                    return false
                }
                count = 1
                return true
            }
            if taken { return }
            // A suspension waits for the transactions in flight: this one has not begun.
            if EnvironmentRegistry.isSuspended { throw .suspended }
            let now = monotonicMilliseconds()
            if earlier == nil { earlier = look() }
            if now > deadline, let before = earlier {  // ">": never less than the timeout
                let current = look()
                switch current.verdict(since: before) {
                case .committing:
                    runningSince = nil
                case .holderRunning:
                    let since = runningSince ?? (now - timeoutMilliseconds)
                    runningSince = since
                    if now - since >= timeoutMilliseconds * Self.runningHolderLimit { throw .writeLockTimeout }
                case .stalled:
                    throw .writeLockTimeout
                }
                earlier = current
                deadline = now + timeoutMilliseconds
            }
            usleep(pause)
            pause = min(pause * 2, 2000)
        }
    }

    func release(_ fd: Int32) {
        if fd < 0 { return }
        holders.withLock { count in
            count -= 1
            if count == 0 { _ = ByteLock.set(fd, F_UNLCK, at: ByteLock.writer) }
        }
    }

    /// The pid holding the lock in another process, if any.
    static func holder(_ fd: Int32) -> Int32? {
        guard fd >= 0 else { return nil }
        return (try? ByteLock.holder(fd, at: ByteLock.writer)) ?? nil  // a failed query names nobody
    }
}
