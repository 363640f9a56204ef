#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import LedgerThreads

/// Makes a directory's files safe for LMDB to map, just before `mdb_env_open` (docs/lmdb.md,
/// rules 22–24). Runs only while this process has the environment closed — under the registry's
/// lock when it first opens, under the environment's exclusive gate when it reopens — because
/// closing a descriptor of `lock.mdb` drops every `fcntl` lock of the process on it, LMDB's too.
///
/// - When no other process has the environment open (nobody holds byte 0 of `lock.mdb`, the
///   lock LMDB takes at open), the opener finishes an interrupted
///   creation — a `data.mdb` with nothing ever committed in it is emptied, so LMDB creates it
///   afresh — and allocates `lock.mdb` for real: LMDB only `ftruncate`s it to size and maps it,
///   so on a full disk its first store into the map is a SIGBUS; an allocation fails cleanly
///   with `ENOSPC` instead.
/// - A reader that cannot open `lock.mdb` for writing (a read-only mount) cannot hold a reader
///   slot, so writers elsewhere may reuse pages under it: refused with `EBUSY` while another
///   process has the environment open.
enum StorePreparation {
    /// The size LMDB 0.9 gives a new `lock.mdb`: `sizeof(MDB_txninfo)` (three cache lines)
    /// plus one 64-byte `MDB_reader` per slot after the first (mdb.c, `mdb_env_setup_locks`).
    static func lockFileSize(maxReaders: Int) -> Int { 192 + (maxReaders - 1) * 64 }

    static func prepare(directory: String, configuration: EnvironmentConfiguration) throws(LMDBError) {
        // Before this layer or LMDB opens any file of the store (docs/lmdb.md rule 28).
        try StandardDescriptors.ensureOpen()
        let lockPath = directory + "/lock.mdb"
        var fd = open(lockPath, O_RDWR | O_CLOEXEC)
        if fd < 0, errno == ENOENT {
            // lock.mdb is about to be created: a data file linked here is refused first, so
            // nothing is written in this directory (an existing lock.mdb is checked after
            // mdb_env_open, with the identity of the files LMDB opened).
            try FileSharing.refuseLinkedFiles(directory: directory, dataPath: directory + "/data.mdb", lockPath: lockPath)
            fd = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, mode_t(configuration.fileMode))
        }
        guard fd >= 0 else {
            let code = errno
            guard code == EROFS || code == EACCES || code == EPERM else { throw LMDBError(rawValue: code) }
            if configuration.readOnly { try refuseBesideLiveWriters(lockPath) }
            return  // LMDB reports what it cannot open
        }
        defer { close(fd) }
        var s = stat_t()
        guard fstat(fd, &s) == 0 else { throw LMDBError(rawValue: errno) }
        guard (s.st_mode & S_IFMT) == S_IFREG else { throw LMDBError(rawValue: EINVAL) }
        try waitForInitialiser(fd, timeoutMilliseconds: configuration.openRetryMilliseconds)
        // Preparers exclude one another with a lock of their own (a byte past every pid, so
        // never one LMDB locks); byte 0 — LMDB's — is only queried, never taken: holding it
        // would make a concurrent mdb_env_open fall back to a shared, non-exclusive open of a
        // file that nobody has initialised yet.
        guard try lockPreparation(fd, timeoutMilliseconds: configuration.openRetryMilliseconds) else { return }
        defer { _ = ByteLock.set(fd, F_UNLCK, at: ByteLock.preparation) }
        guard try ByteLock.holder(fd, at: ByteLock.environmentInUse) == nil else { return }  // another process has the environment open
        // The first opener through this lock.mdb: nobody may have data.mdb open through another (rule 29).
        try FileSharing.refuseDataFileInUse(directory: directory)
        if !configuration.readOnly { try finishInterruptedCreation(directory + "/data.mdb") }
        guard fstat(fd, &s) == 0 else { throw LMDBError(rawValue: errno) }
        let size = max(Int(s.st_size), lockFileSize(maxReaders: configuration.maxReaders))
        try allocate(fd, size: size)
    }

    /// LMDB's first opener holds byte 0 exclusively while it initialises the lock file, and
    /// every other `mdb_env_open` waits for it without a timeout: an opener stopped (or suspended)
    /// right there would hang them all. Waits for such a holder at most `timeoutMilliseconds`,
    /// then throws `EBUSY` (``LMDBError/busy``). It narrows the window to the instant between
    /// this check and LMDB's own lock; it cannot close it.
    private static func waitForInitialiser(_ fd: Int32, timeoutMilliseconds: Int) throws(LMDBError) {
        let deadline = monotonicMilliseconds() + timeoutMilliseconds
        while try ByteLock.holder(fd, at: ByteLock.environmentInUse, conflictingWith: F_RDLCK) != nil {
            if monotonicMilliseconds() >= deadline { throw .busy }
            usleep(1000)
        }
    }

    /// Takes the preparation lock, retrying for up to `timeoutMilliseconds` (a stopped process
    /// could hold it); false when it could not be had, and preparation is skipped.
    private static func lockPreparation(_ fd: Int32, timeoutMilliseconds: Int) throws(LMDBError) -> Bool {
        let deadline = monotonicMilliseconds() + timeoutMilliseconds
        while true {
            let code = ByteLock.set(fd, F_WRLCK, at: ByteLock.preparation)
            if code == 0 { return true }
            guard code == EAGAIN || code == EACCES || code == EINTR else { throw LMDBError(rawValue: code) }
            if monotonicMilliseconds() >= deadline { return false }
            usleep(1000)
        }
    }

    /// Empties a `data.mdb` in which nothing was ever committed (``DataFileProbe/unfinishedCreation(fileSize:)``).
    private static func finishInterruptedCreation(_ path: String) throws(LMDBError) {
        let fd = open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else {
            if errno == ENOENT { return }
            throw LMDBError(rawValue: errno)
        }
        defer { close(fd) }
        guard let size = DataFileProbe.unfinishedCreationSize(fd: fd), size > 0 else { return }
        guard ftruncate(fd, 0) == 0, fsync(fd) == 0 else { throw LMDBError(rawValue: errno) }
    }

    /// Gives `fd` real blocks for its first `size` bytes (growing it to `size` if shorter).
    private static func allocate(_ fd: Int32, size: Int) throws(LMDBError) {
        #if os(Linux)
        let code = posix_fallocate(fd, 0, off_t(size))
        if code == 0 { return }
        guard code == EOPNOTSUPP || code == EINVAL else { throw LMDBError(rawValue: code) }
        #endif
        // No fallocate here: write the zeros (the lock file is LMDB's to initialise; nobody
        // else has it open while this process holds the write lock on byte 0).
        let zeros = [UInt8](repeating: 0, count: size)
        var done = 0
        while done < size {
            let n = zeros.withUnsafeBytes { raw -> Int in
                guard let base = raw.baseAddress else { return 0 }
                return pwrite(fd, base + done, size - done, off_t(done))
            }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { throw LMDBError(rawValue: n < 0 ? errno : EIO) }
            done += n
        }
    }

    /// Throws `EBUSY` when another process holds a lock on `lock.mdb` (has the environment
    /// open).
    private static func refuseBesideLiveWriters(_ lockPath: String) throws(LMDBError) {
        let fd = open(lockPath, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        defer { close(fd) }
        if try ByteLock.holder(fd, at: ByteLock.environmentInUse) != nil { throw .busy }
    }
}
