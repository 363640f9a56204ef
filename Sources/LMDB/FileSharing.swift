import CLMDB
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One data file, one lock table (docs/lmdb.md rule 29).
///
/// LMDB coordinates writers and readers only through the `lock.mdb` beside the `data.mdb` it
/// opened. When the files are linked, symlinked, renamed, replaced or deleted while processes
/// use them (backup and restore tools, sync clients), two processes can write one data file
/// through two lock tables — overwritten commits, SIGSEGV — or a process can keep writing a file
/// no path names any more (its acknowledged events vanish with it). This layer therefore:
///
/// - at every opening, refuses a `data.mdb` or `lock.mdb` that is a symbolic link or has more
///   than one hard link, and a `data.mdb` another process has open through another `lock.mdb`
///   (every open environment holds a shared `flock` on its `data.mdb`; the first opener of a
///   lock table checks that no one does);
/// - before every write transaction, checks that the paths still name the files it opened
///   (two `lstat`s against the device and inode recorded at open): a file deleted, renamed over
///   or linked since is refused before anything is written.
///
/// Refusals throw ``LMDBError/filesNotShared``; ``FileSharing/refusal(directory:)`` says why.
struct FileIdentity: Sendable, Equatable {
    var dataDevice: UInt64
    var dataInode: UInt64
    var lockDevice: UInt64
    var lockInode: UInt64

    /// The identity of the files LMDB opened: `data.mdb` from LMDB's own descriptor, `lock.mdb`
    /// from its path just after `mdb_env_open` (this layer's own descriptor is opened by path too).
    static func capture(env: OpaquePointer, directory: String) throws(LMDBError) -> FileIdentity {
        var fd: Int32 = -1
        try check(mdb_env_get_fd(env, &fd))
        var data = stat_t(), lock = stat_t()
        guard fstat(fd, &data) == 0 else { throw LMDBError(rawValue: errno) }
        guard lstat(directory + "/lock.mdb", &lock) == 0 else {
            throw FileSharing.refuse(directory, errno == ENOENT ? "lock.mdb disappeared while the environment was being opened" : "lock.mdb cannot be examined: \(String(cString: strerror(errno)))")
        }
        return FileIdentity(dataDevice: UInt64(data.st_dev), dataInode: UInt64(data.st_ino),
                            lockDevice: UInt64(lock.st_dev), lockInode: UInt64(lock.st_ino))
    }

    /// Why the files of `directory` are no longer (or never were) the ones every process shares,
    /// or nil. Two `lstat` calls.
    func problem(directory: String) -> String? {
        if let problem = Self.problem(directory + "/data.mdb", name: "data.mdb", device: dataDevice, inode: dataInode) { return problem }
        return Self.problem(directory + "/lock.mdb", name: "lock.mdb", device: lockDevice, inode: lockInode)
    }

    private static func problem(_ path: String, name: String, device: UInt64, inode: UInt64) -> String? {
        var s = stat_t()
        guard lstat(path, &s) == 0 else {
            let code = errno
            return code == ENOENT
                ? "\(name) was deleted or renamed away while this process had it open: processes opening the ledger now would use other files"
                : "\(name) cannot be examined: \(String(cString: strerror(code)))"
        }
        if (s.st_mode & S_IFMT) != S_IFLNK, UInt64(s.st_dev) != device || UInt64(s.st_ino) != inode {
            return "\(name) was replaced (another file renamed over it, or restored) since this process opened it: processes opening the ledger now use another file"
        }
        return linkProblem(s, name: name)
    }

    /// Why a file with status `s` (from `lstat`) cannot be one every process shares — a symbolic
    /// link, or more than one hard link — or nil.
    static func linkProblem(_ s: stat_t, name: String) -> String? {
        if (s.st_mode & S_IFMT) == S_IFLNK {
            return "\(name) is a symbolic link: processes opening the directory it points into coordinate through another lock table"
        }
        if s.st_nlink > 1 {
            return "\(name) has \(s.st_nlink) hard links: a process opening it through another directory would coordinate through another lock table"
        }
        return nil
    }
}

/// Refusals of this layer's file-sharing checks, with their reasons.
public enum FileSharing {
    private static let refusals = Mutex<[String: String]>([:])

    /// The reason of the last ``LMDBError/filesNotShared`` thrown for `directory` in this process.
    public static func refusal(directory: String) -> String? { refusals.withLock { $0[directory] } }

    /// Records why `directory` is refused and returns the error to throw.
    static func refuse(_ directory: String, _ reason: String) -> LMDBError {
        refusals.withLock { $0[directory] = reason }
        return .filesNotShared
    }

    /// At the first opening through a lock table (no process holds `lock.mdb`): refuses a
    /// `data.mdb` that another process (or another environment of this one) has open — it can
    /// only be through another `lock.mdb`, a link or a replaced or deleted lock file.
    /// Refuses a `data.mdb` or `lock.mdb` that already exists as a symbolic link or with more
    /// than one hard link, before this layer or LMDB creates or writes anything in `directory`
    /// (the check after `mdb_env_open` catches what changes in between).
    static func refuseLinkedFiles(directory: String, dataPath: String, lockPath: String) throws(LMDBError) {
        try refuseLinked(dataPath, name: "data.mdb", directory: directory)
        try refuseLinked(lockPath, name: "lock.mdb", directory: directory)
    }

    private static func refuseLinked(_ path: String, name: String, directory: String) throws(LMDBError) {
        var s = stat_t()
        guard lstat(path, &s) == 0 else {
            if errno == ENOENT { return }
            throw refuse(directory, "\(name) cannot be examined: \(String(cString: strerror(errno)))")
        }
        if let problem = FileIdentity.linkProblem(s, name: name) { throw refuse(directory, problem) }
    }

    static func refuseDataFileInUse(directory: String) throws(LMDBError) {
        let fd = openFile(directory + "/data.mdb", O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else {
            if errno == ENOENT { return }
            throw LMDBError(rawValue: errno)
        }
        defer { close(fd) }
        if flock(fd, LOCK_EX | LOCK_NB) == 0 { return }  // released by the close
        let code = errno
        guard code == EWOULDBLOCK || code == EAGAIN else { throw LMDBError(rawValue: code) }
        throw refuse(directory, "another process has data.mdb open through another lock.mdb (a hard or symbolic link to it, or lock.mdb deleted or replaced while it was in use): two lock tables would let two writers overwrite each other's commits")
    }

    /// Marks `data.mdb` as in use by this open environment: a shared `flock` on a duplicate of
    /// LMDB's descriptor (the very file LMDB opened; LMDB never `flock`s). Returns the duplicate,
    /// to be closed before `mdb_env_close`.
    static func holdDataFile(env: OpaquePointer) throws(LMDBError) -> Int32 {
        var fd: Int32 = -1
        try check(mdb_env_get_fd(env, &fd))
        let held = fcntl(fd, F_DUPFD_CLOEXEC, 3)
        guard held >= 0 else { throw LMDBError(rawValue: errno) }
        while flock(held, LOCK_SH) != 0 {
            guard errno == EINTR else {
                let code = errno
                close(held)
                throw LMDBError(rawValue: code)
            }
        }
        return held
    }

    /// Ends ``holdDataFile(env:)`` (before the environment closes, so that no other process
    /// ever sees the lock without LMDB's own on `lock.mdb`).
    static func releaseDataFile(_ fd: Int32) {
        guard fd >= 0 else { return }
        _ = flock(fd, LOCK_UN)
        close(fd)
    }
}

extension LMDBError {
    /// This layer's: the directory's `data.mdb` or `lock.mdb` is not the file every process
    /// coordinates through (linked, symlinked, renamed, replaced or deleted while in use);
    /// nothing was written. ``FileSharing/refusal(directory:)`` says which and how.
    public static let filesNotShared = LMDBError(rawValue: -30_610)
}
