import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Keeps LMDB's files off descriptors 0, 1 and 2 (docs/lmdb.md rule 28).
///
/// A process started with its standard descriptors closed (`cmd >&- 2>&-`, some launchers and
/// daemons) gets them back from its next `open` calls: LMDB's `lock.mdb` and `data.mdb` would
/// become descriptors 1 and 2, and whatever the process prints — an error message, a log line —
/// would be written into the store. Like SQLite, which never lets a database file take a
/// descriptor below 3, every opening first fills a closed 0, 1 or 2 with `/dev/null`.
enum StandardDescriptors {
    /// Serialises the filling within the process (two threads must not both fill one slot).
    private static let filling = Mutex<Void>(())

    /// Opens `/dev/null` on each of descriptors 0–2 that is closed. Throws `EBADF` when one is
    /// closed and `/dev/null` cannot be opened (then nothing of the store may be opened).
    static func ensureOpen() throws(LMDBError) {
        guard (0...2).contains(where: isClosed) else { return }  // the common case: three fcntl calls
        try filling.withLock { (_: inout Void) throws(LMDBError) in
            while (0...2).contains(where: isClosed) {
                // `open` returns the lowest free descriptor: the lowest closed of 0–2. Not
                // close-on-exec: a child started from here gets them as its standard descriptors.
                let fd = open("/dev/null", O_RDWR)
                guard fd >= 0 else { throw LMDBError(rawValue: EBADF) }
                if fd > 2 {
                    // Another thread took the free slot meanwhile (with its own file): nothing to fill.
                    close(fd)
                    return
                }
            }
        }
    }

    private static func isClosed(_ fd: Int32) -> Bool {
        fcntl(fd, F_GETFD) == -1 && errno == EBADF
    }
}

extension Environment {
    /// Opens `/dev/null` on each of descriptors 0–2 that is closed (docs/lmdb.md rule 28). Every
    /// opening does it first; a program that opens files or pipes of its own before its first
    /// environment (a pipe would take descriptor 1, and its output would go nowhere) calls this
    /// at its start. Throws `EBADF` when one is closed and `/dev/null` cannot be opened.
    public static func ensureStandardDescriptors() throws(LMDBError) { try StandardDescriptors.ensureOpen() }
}
