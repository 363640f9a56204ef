import CLMDB

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An error returned by the LMDB C library (an `MDB_*` code or a system `errno`).
///
/// Named codes let callers match errors without comparing raw integers:
///
/// ```swift
/// do {
///     try environment.write { txn in try txn.put(db, key: k, value: v, options: .noOverwrite) }
/// } catch LMDBError.keyExists {
///     // already there
/// }
/// ```
public struct LMDBError: Error, RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The C return code: one of the `MDB_*` codes (negative) or an `errno` value (positive).
    public let rawValue: Int32

    /// The error of C return code `rawValue`.
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// The library's own message for this code (`mdb_strerror`), or this layer's for its own codes.
    public var message: String {
        if self == .suspended { return "the process's ledgers are suspended (call resume() first)" }
        if self == .writeLockTimeout { return "another process held the write lock for longer than the write timeout" }
        guard let cString = mdb_strerror(rawValue) else { return "LMDB error \(rawValue)" }
        return String(cString: cString)
    }

    /// The code and its message.
    public var description: String { "LMDB error \(rawValue): \(message)" }

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
    /// This layer's own code: the process is suspended (``Environment/suspendAll(waitingMilliseconds:)``);
    /// nothing was locked or touched.
    public static let suspended = LMDBError(rawValue: -30_600)
    /// `ETIMEDOUT` from a write: another process held the writer lock past the write timeout
    /// (``Environment/writeLockHolder()`` names it).
    public static let writeLockTimeout = LMDBError(rawValue: ETIMEDOUT)
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
