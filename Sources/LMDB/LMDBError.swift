import CLMDB

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An error of the LMDB layer: a code returned by the LMDB C library (an `MDB_*` code or a
/// system `errno`), or one of this layer's own conditions, which have cases of their own so
/// that no C code can be mistaken for them (a real `ETIMEDOUT` while opening is
/// `.code(ETIMEDOUT)`, never ``writeLockTimeout``).
///
/// Named codes let callers match errors without comparing raw integers:
///
/// ```swift
/// do {
///     try environment.write { txn in try txn.put(db, key: k, value: v, flags: .noOverwrite) }
/// } catch LMDBError.keyExists {
///     // already there
/// }
/// ```
public enum LMDBError: Error, Hashable, Sendable, CustomStringConvertible {
    /// A C return code: one of the `MDB_*` codes (negative) or an `errno` value (positive).
    case code(Int32)
    /// This layer's: the process is suspended (``Environment/suspendAll(waitingMilliseconds:)``);
    /// nothing was locked or touched.
    case suspended
    /// This layer's: another process held the writer lock past the write timeout
    /// (``Environment/writeLockHolder()`` names it); nothing was written.
    case writeLockTimeout

    /// The error of C return code `rawValue`.
    public init(rawValue: Int32) { self = .code(rawValue) }

    /// The C return code; for this layer's own conditions, a value no C call returns
    /// (−30600 suspended, −30601 write-lock timeout: below `MDB_LAST_ERRCODE`'s range, never an `errno`).
    public var rawValue: Int32 {
        switch self {
        case .code(let code): code
        case .suspended: -30_600
        case .writeLockTimeout: -30_601
        }
    }

    /// The library's own message for this code (`mdb_strerror`), or this layer's for its own conditions.
    public var message: String {
        switch self {
        case .suspended: return "the process's ledgers are suspended (call resume() first)"
        case .writeLockTimeout: return "another process held the write lock without progress for longer than the write timeout"
        case .code(let code):
            guard let cString = mdb_strerror(code) else { return "LMDB error \(code)" }
            return String(cString: cString)
        }
    }

    /// The code and its message.
    public var description: String {
        switch self {
        case .code(let code): "LMDB error \(code): \(message)"
        case .suspended, .writeLockTimeout: message
        }
    }

    /// `MDB_KEYEXIST`: key/data pair already exists.
    public static let keyExists = LMDBError(rawValue: MDB_KEYEXIST)
    /// `MDB_NOTFOUND`: key/data pair not found (end of data).
    public static let notFound = LMDBError(rawValue: MDB_NOTFOUND)
    /// `MDB_PAGE_NOTFOUND`: a requested page was not found (usually corruption).
    public static let pageNotFound = LMDBError(rawValue: MDB_PAGE_NOTFOUND)
    /// `MDB_CORRUPTED`: a located page was of the wrong type.
    public static let corrupted = LMDBError(rawValue: MDB_CORRUPTED)
    /// `MDB_PANIC`: an update of meta page data or a similar fatal error; the environment must be closed.
    public static let panic = LMDBError(rawValue: MDB_PANIC)
    /// `MDB_VERSION_MISMATCH`: the environment was written by an incompatible LMDB version.
    public static let versionMismatch = LMDBError(rawValue: MDB_VERSION_MISMATCH)
    /// `MDB_INVALID`: the file is not a valid LMDB file.
    public static let invalid = LMDBError(rawValue: MDB_INVALID)
    /// `MDB_MAP_FULL`: the environment's map size was reached.
    public static let mapFull = LMDBError(rawValue: MDB_MAP_FULL)
    /// `MDB_DBS_FULL`: the maximum number of named databases was reached.
    public static let databasesFull = LMDBError(rawValue: MDB_DBS_FULL)
    /// `MDB_READERS_FULL`: every reader slot is in use.
    public static let readersFull = LMDBError(rawValue: MDB_READERS_FULL)
    /// `MDB_TLS_FULL`: too many TLS keys in use.
    public static let threadLocalStorageFull = LMDBError(rawValue: MDB_TLS_FULL)
    /// `MDB_TXN_FULL`: the transaction has too many dirty pages.
    public static let transactionFull = LMDBError(rawValue: MDB_TXN_FULL)
    /// `MDB_CURSOR_FULL`: the cursor stack is too deep (internal error).
    public static let cursorFull = LMDBError(rawValue: MDB_CURSOR_FULL)
    /// `MDB_PAGE_FULL`: a page has no more space (internal error).
    public static let pageFull = LMDBError(rawValue: MDB_PAGE_FULL)
    /// `MDB_MAP_RESIZED`: another process grew the map beyond this process's mapping.
    public static let mapResized = LMDBError(rawValue: MDB_MAP_RESIZED)
    /// `MDB_INCOMPATIBLE`: the operation is incompatible with the database or its flags.
    public static let incompatible = LMDBError(rawValue: MDB_INCOMPATIBLE)
    /// `MDB_BAD_RSLOT`: invalid reuse of a reader slot.
    public static let badReaderSlot = LMDBError(rawValue: MDB_BAD_RSLOT)
    /// `MDB_BAD_TXN`: the transaction must abort, has a child, or is invalid.
    public static let badTransaction = LMDBError(rawValue: MDB_BAD_TXN)
    /// `MDB_BAD_VALSIZE`: an unsupported size of key, database name or data.
    public static let badValueSize = LMDBError(rawValue: MDB_BAD_VALSIZE)
    /// `MDB_BAD_DBI`: the database handle was changed unexpectedly.
    public static let badDatabase = LMDBError(rawValue: MDB_BAD_DBI)

    /// `ENOSPC`: the device is full.
    public static let noSpace = LMDBError(rawValue: ENOSPC)
    /// `EACCES`: permission denied.
    public static let permissionDenied = LMDBError(rawValue: EACCES)
    /// `EROFS`: the file system is read-only.
    public static let readOnlyFileSystem = LMDBError(rawValue: EROFS)
    /// `ENOENT`: no such file or directory.
    public static let noSuchFile = LMDBError(rawValue: ENOENT)
    /// `ENOMEM`: out of memory (or address space for the map).
    public static let outOfMemory = LMDBError(rawValue: ENOMEM)
    /// `ETIMEDOUT`: a system call timed out (never this layer's ``writeLockTimeout``).
    public static let timedOut = LMDBError(rawValue: ETIMEDOUT)
    /// `EBUSY`: a read-only opening that could not register as a reader, while other
    /// processes have the environment open (docs/lmdb.md rule 22).
    public static let busy = LMDBError(rawValue: EBUSY)
    /// `EAGAIN`: resource temporarily unavailable (e.g. a lock held by another process).
    public static let tryAgain = LMDBError(rawValue: EAGAIN)

    /// Lets `catch LMDBError.mapFull { ... }` match.
    public static func ~= (pattern: LMDBError, value: any Error) -> Bool {
        (value as? LMDBError) == pattern
    }
}

/// The one place where C return codes become Swift errors.
@inline(__always)
func check(_ code: Int32) throws(LMDBError) {
    if code != MDB_SUCCESS { throw LMDBError(rawValue: code) }
}
