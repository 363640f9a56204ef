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
    /// signals (called only while waiting, every ``WriterWait/lookEvery`` milliseconds).
    func acquire(_ fd: Int32, timeoutMilliseconds: Int, look: () -> WriterProgress) throws(LMDBError) {
        if fd < 0 { return }  // lock.mdb not writable: no write will succeed anyway
        var wait = WriterWait(timeoutMilliseconds: timeoutMilliseconds, now: monotonicMilliseconds())
        var pause: UInt32 = 50
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
            if wait.lookDue(at: now), !wait.record(look(), at: now) { throw .writeLockTimeout }
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

/// A waiter's rule, apart from the lock and the clock (so ``WriterProgressTests`` drives it with
/// a clock of its own): look at the writers' progress every ``lookEvery`` milliseconds, and give
/// up when no look saw them move for a whole timeout — or one holder ran without committing
/// for ``WriterLock/runningHolderLimit`` timeouts.
///
/// Looking often, not once per timeout, is what bounds the wait: a waiter already waiting when
/// the holder stops gives up one timeout after the last movement it saw, plus at most one
/// ``lookEvery``, not after up to two timeouts (issue 40). Movement between two looks a timeout
/// apart is movement between some two consecutive looks in between (commits and CPU time only
/// grow), so a slow holder is waited for exactly as before.
struct WriterWait {
    /// The write timeout.
    let timeout: Int
    /// Milliseconds between two looks: a quarter of the timeout, at most 250 and at least 10.
    let lookEvery: Int
    /// The previous look (nil before the first).
    private var last: WriterProgress?
    /// When the next look is due.
    private var nextLook: Int
    /// When a look last saw the writers move (the start of the wait before any did).
    private var movedAt: Int
    /// Since when the holder has been running without committing (nil: it is not).
    private var runningSince: Int?

    init(timeoutMilliseconds: Int, now: Int) {
        timeout = timeoutMilliseconds
        lookEvery = max(10, min(250, timeoutMilliseconds / 4))
        nextLook = now
        movedAt = now
    }

    /// Whether a look is due at `now`.
    func lookDue(at now: Int) -> Bool { now >= nextLook }

    /// Takes the look made at `now`: true to go on waiting, false to give up.
    mutating func record(_ look: WriterProgress, at now: Int) -> Bool {
        defer {
            last = look
            nextLook = now + lookEvery
        }
        guard let earlier = last else { return true }  // the first look: what the next ones compare with
        switch look.verdict(since: earlier) {
        case .committing:
            movedAt = now
            runningSince = nil
            return true
        case .holderRunning:
            movedAt = now
            let since = runningSince ?? (now - lookEvery)
            runningSince = since
            return now - since < timeout * WriterLock.runningHolderLimit
        case .stalled:
            return now - movedAt <= timeout  // gives up past the timeout, never before it
        }
    }
}
