#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One-byte `fcntl` locks on `lock.mdb`: the byte LMDB locks and the two this layer adds, past
/// every pid (LMDB also locks the byte at each reader's pid). `fcntl` locks belong to the process,
/// are released by the kernel when it dies, and are all dropped when the process closes *any*
/// descriptor of the file — see ``OpenHandle`` and ``StorePreparation`` for how that is respected.
enum ByteLock {
    /// LMDB's: held shared by every process that has the environment open (docs/lmdb.md rule 20).
    static let environmentInUse: off_t = 0
    /// Preparers of the files exclude one another with it (rule 23).
    static let preparation = off_t(Int32.max) + 1
    /// The writer lock (``WriterLock``).
    static let writer = off_t(Int32.max) + 2

    /// `F_SETLK` of `type` (`F_WRLCK`, `F_UNLCK`) on `byte`: 0, or the errno.
    static func set(_ fd: Int32, _ type: Int32, at byte: off_t) -> Int32 {
        var lock = flock()
        lock.l_type = Int16(type)
        lock.l_whence = Int16(SEEK_SET)
        lock.l_start = byte
        lock.l_len = 1
        return fcntl(fd, F_SETLK, &lock) == 0 ? 0 : errno
    }

    /// The pid of another process holding a lock on `byte` that conflicts with one of `type`
    /// (`F_GETLK`, which needs no write access and does not see this process's own locks): with
    /// `F_WRLCK`, any lock; with `F_RDLCK`, an exclusive one. Nil when there is none.
    static func holder(_ fd: Int32, at byte: off_t, conflictingWith type: Int32 = F_WRLCK) throws(LMDBError) -> Int32? {
        var query = flock()
        query.l_type = Int16(type)
        query.l_whence = Int16(SEEK_SET)
        query.l_start = byte
        query.l_len = 1
        guard fcntl(fd, F_GETLK, &query) == 0 else { throw LMDBError(rawValue: errno) }
        return query.l_type == Int16(F_UNLCK) ? nil : query.l_pid
    }
}
