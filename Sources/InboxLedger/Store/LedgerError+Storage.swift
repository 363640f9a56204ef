import LMDB

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension LedgerError {
    /// Maps an error met during `operation` on the ledger at `path` (an LMDB error, a damaged
    /// projection row, a task's cancellation; a ledger error stays itself). A write that timed
    /// out waiting for the writer lock is best mapped by the store's writes (``LedgerStore/write(_:durability:_:)``),
    /// which can name the holder and the timeout; here it is `writerBusy` without them.
    static func from(_ error: any Error, path: String, operation: String, writeTimeout: Double? = nil) -> LedgerError {
        if let ledgerError = error as? LedgerError { return ledgerError }
        if error is CancellationError { return .cancelled }
        if case .malformed(let table, let key)? = error as? ProjectionError {
            // A damaged projection row is damage to the store, not a bug of this library.
            return .corruptStore(path: path, reason: "projection table '\(table.rawValue)' has a malformed row '\(key)' (\(operation))")
        }
        guard let lmdb = error as? LMDBError else {
            return .unexpected(path: path, operation: operation, reason: String(describing: error))
        }
        switch lmdb {
        // This layer's own conditions first, by their cases: no C code can stand for them.
        case .suspended: return .suspended
        case .writeLockTimeout: return .writerBusy(path: path, holder: nil, waitedSeconds: writeTimeout ?? LedgerOptions().writeTimeout)
        case .code: break
        }
        switch lmdb {
        case .mapFull: return .storeFull(path: path, reason: "the map reached its maximum size (raise maxMapSize)")
        case .readersFull: return .readerSlotsFull(path: path, slots: EnvironmentConfiguration().maxReaders)
        case .noSpace: return .storeFull(path: path, reason: "no space left on device")
        case LMDBError(rawValue: EIO) where (FileSystem.availableBytes(at: path) ?? .max) < 1 << 20:
            // LMDB reports a short write as EIO: on a device this full, that is the cause.
            return .storeFull(path: path, reason: "no space left on device (a write was cut short)")
        case .permissionDenied, LMDBError(rawValue: EPERM):
            // EPERM is what a sandbox or an unavailable data-protection class answers on Apple platforms.
            return .permissionDenied(path: path, reason: "\(lmdb.message) (open read-only to read it)")
        case .readOnlyFileSystem: return .permissionDenied(path: path, reason: "read-only file system (open read-only to read it)")
        case .corrupted, .pageNotFound, .panic: return .corruptStore(path: path, reason: lmdb.message)
        case .filesNotShared:
            return .filesNotShared(path: path, reason: FileSharing.refusal(directory: path) ?? "data.mdb or lock.mdb was linked, replaced or deleted while in use")
        case .invalid, .versionMismatch: return .notALedger(path: path, reason: lmdb.message)
        case .badTransaction:
            // The LMDB layer's refusal of a transaction whose closure returned: a snapshot kept
            // past its read (``Ledger/read(_:)-(_)``).
            return .invalidArgument(name: "snapshot", reason: "its read transaction has ended (\(operation)): take values out of the read's closure, never the snapshot")
        default: return .storage(path: path, operation: operation, code: lmdb.rawValue, message: lmdb.message)
        }
    }
}
