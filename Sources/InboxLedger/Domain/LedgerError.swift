/// Everything that can go wrong with a ledger, each case saying what and where.
///
/// ```swift
/// do {
///     try ledger.append(NewEvent(type: "", payload: []))
/// } catch {
///     print(error)   // a LedgerError: invalid event #0: type: must be 1–128 bytes, got 0
/// }
/// ```
public enum LedgerError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The path exists but is not a ledger (no `data.mdb`, not LMDB, or no ledger metadata).
    case notALedger(path: String, reason: String)
    /// The ledger was written by a newer format than this library reads.
    case newerFormat(path: String, found: UInt32, supported: UInt32)
    /// The ledger's projections were built by newer rules than this library's: the handle is
    /// open read-only (reads are right; a write by these rules would not be) — thrown by writes.
    case newerProjections(path: String, found: UInt32, supported: UInt32)
    /// This library's projection rules differ from the ones the stored projections were built
    /// with, and the log no longer holds every event a rebuild needs (it was trimmed). Nothing
    /// was written; ``LedgerOptions/projectionUpgrade`` says how to proceed (docs/operations.md).
    case projectionUpgradeNeeded(path: String, stored: UInt32, supported: UInt32, reason: String)
    /// The process may not open the store as asked (permissions, read-only file system).
    case permissionDenied(path: String, reason: String)
    /// A write was attempted through a read-only ledger.
    case readOnly(path: String)
    /// An event of a batch failed validation; `index` is its position in the batch.
    case invalidEvent(index: Int, field: String, reason: String)
    /// An argument that is not an event is invalid (an origin role, a consumer name, a cursor
    /// move); `name` says which.
    case invalidArgument(name: String, reason: String)
    /// An event is larger than the configured maximum.
    case eventTooLarge(index: Int, size: Int, limit: Int)
    /// The idempotency key was already used for an event with different content.
    case idempotencyConflict(key: String, existingSequence: UInt64)
    /// The consumer is not registered (``Ledger/consumer(named:startingAt:)`` registers it).
    case unknownConsumer(name: String)
    /// Events after the consumer's cursor were trimmed; rebase it (docs/semantics.md).
    case consumerGap(name: String, cursor: UInt64, firstAvailable: UInt64)
    /// A conditional append (``Ledger/append(contentsOf:expectingHead:)``) found the head moved:
    /// another append committed after the caller read `expected`. Nothing was written.
    case headMoved(expected: UInt64, actual: UInt64)
    /// Another instance of the consumer committed since this batch was read; nothing was written.
    case consumerConflict(name: String, expected: UInt64, actual: UInt64)
    /// A stored event could not be decoded as the type asked for (``Event/decode(as:)``):
    /// `field` is the path of the offending field (`data.title`, `type`).
    case eventDecoding(sequence: UInt64, type: String, field: String, reason: String)
    /// A stored record failed its checksum or could not be decoded.
    case corruptRecord(sequence: UInt64, reason: String)
    /// The store's files are damaged (truncated, or LMDB reports corruption).
    case corruptStore(path: String, reason: String)
    /// `data.mdb` or `lock.mdb` is not the file every process coordinates through: linked,
    /// symlinked, renamed, replaced or deleted while in use (a backup, restore or sync tool), so
    /// two writers could overwrite each other's commits or a write could go to a file no path
    /// names. `reason` says which file and what happened; nothing was written
    /// (docs/operations.md, "Files moved under a running ledger").
    case filesNotShared(path: String, reason: String)
    /// The map reached its configured maximum, or the device is full.
    case storeFull(path: String, reason: String)
    /// The process's ledgers are suspended (``Ledger/suspend(waitingUpTo:)``): nothing was
    /// locked, read or written. Call ``Ledger/resume()`` first.
    case suspended
    /// Another process held the write lock without progress for ``LedgerOptions/writeTimeout``
    /// (for example a process stopped or suspended inside its write): nothing was written.
    /// `holder` is its pid when it can be told.
    case writerBusy(path: String, holder: Int32?, waitedSeconds: Double)
    /// Every reader slot of the ledger's lock file (`slots` of them, one value in every process)
    /// is held by a live process, and a read-only handle needs one to read: nothing was read.
    /// Writable handles never get it (they read without a slot, docs/operations.md).
    case readerSlotsFull(path: String, slots: Int)
    /// Any other storage failure, with LMDB's or the system's message.
    case storage(path: String, operation: String, code: Int32, message: String)
    /// A failure that is neither LMDB's nor the system's: a broken invariant of this library
    /// (please report it) or an error of a type it does not know.
    case unexpected(path: String, operation: String, reason: String)
    /// An app projection refused an event of the append (its apply threw, or its state cannot
    /// be stored): nothing of the append was written.
    case projectionRejected(name: String, sequence: UInt64?, type: String?, reason: String)
    /// An app projection cannot be read by this handle: not registered, another version
    /// stored, not built yet, or failed (the reason says which).
    case projectionUnavailable(name: String, reason: String)
    /// An app projection is being built (in steps, by a writable handle that registers it) and
    /// has applied the log only through `through`: the same read succeeds once it is done.
    case projectionBuilding(name: String, through: UInt64)
    /// The task of an async call was cancelled before the call's work started: nothing was
    /// read or written (an append whose commit had started returns its committed result).
    case cancelled

    /// What happened and where, in one line a person can act on.
    public var description: String {
        switch self {
        case .notALedger(let path, let reason): "\(path): not a ledger: \(reason)"
        case .newerFormat(let path, let found, let supported):
            "\(path): written by a newer format (version \(found)); this library reads up to version \(supported)"
        case .newerProjections(let path, let found, let supported):
            "\(path): projections were built by a newer library (rules version \(found)); this library applies version \(supported), so the ledger is open read-only"
        case .projectionUpgradeNeeded(let path, let stored, let supported, let reason):
            "\(path): projections were built by rules version \(stored) and this library applies version \(supported), but \(reason); nothing was written"
        case .eventDecoding(let seq, let type, let field, let reason): "event \(seq) (\(type)): \(field): \(reason)"
        case .permissionDenied(let path, let reason): "\(path): permission denied: \(reason)"
        case .readOnly(let path): "\(path): the ledger is open read-only"
        case .invalidEvent(let index, let field, let reason): "invalid event #\(index): \(field): \(reason)"
        case .invalidArgument(let name, let reason): "invalid \(name): \(reason)"
        case .eventTooLarge(let index, let size, let limit): "invalid event #\(index): \(size) bytes exceeds the \(limit)-byte limit"
        case .idempotencyConflict(let key, let seq):
            "idempotency key '\(key)' was already used by event \(seq) with different content"
        case .unknownConsumer(let name): "consumer '\(name)' is not registered"
        case .consumerGap(let name, let cursor, let first):
            "consumer '\(name)' is at \(cursor) but the log starts at \(first): events it has not read were trimmed"
        case .headMoved(let expected, let actual):
            "the head moved from \(expected) to \(actual) since it was read: another append committed first; nothing was written"
        case .consumerConflict(let name, let expected, let actual):
            "consumer '\(name)' moved from \(expected) to \(actual) since this batch was read; nothing was written"
        case .corruptRecord(let seq, let reason): "corrupt record at sequence \(seq): \(reason)"
        case .corruptStore(let path, let reason): "\(path): corrupt store: \(reason)"
        case .filesNotShared(let path, let reason): "\(path): files not shared: \(reason); nothing was written"
        case .storeFull(let path, let reason): "\(path): store full: \(reason)"
        case .suspended: "ledgers are suspended in this process (call Ledger.resume() first); nothing was done"
        case .writerBusy(let path, let holder, let waited):
            "\(path): writer busy: \(holder.map { "process \($0)" } ?? "another process") held the write lock without progress for \(waited) s (stopped or suspended inside its write?); nothing was written"
        case .readerSlotsFull(let path, let slots):
            "\(path): all \(slots) reader slots are held by live processes (`ledger inspect` lists them by pid); nothing was read: close ledgers in other processes or retry once some exit (slots of dead processes are reclaimed automatically; a writable opening needs no slot)"
        case .storage(let path, let operation, let code, let message): "\(path): \(operation) failed: \(message) (code \(code))"
        case .unexpected(let path, let operation, let reason): "\(path): \(operation) failed unexpectedly: \(reason)"
        case .projectionRejected(let name, let sequence, let type, let reason):
            // The sequence is the one the event would have had: refused, it was never assigned.
            "projection '\(name)' refused \(type.map { "the append's \($0) event (it would have been \(sequence.map(String.init) ?? "?"))" } ?? "the append"): \(reason); nothing was written"
        case .projectionUnavailable(let name, let reason): "projection '\(name)' cannot be read: \(reason)"
        case .projectionBuilding(let name, let through):
            "projection '\(name)' is being built (through \(through)): it can be read once its build is done (by a writable handle that registers it: in the background, or in projections.build() when it builds only when asked)"
        case .cancelled: "the task was cancelled before the call started; nothing was done"
        }
    }

    /// Whether nothing was done and the same call may succeed later unchanged: the process is
    /// suspended, another process held the write lock too long, or live processes held every
    /// reader slot.
    public var isTransient: Bool {
        switch self {
        case .suspended, .writerBusy, .readerSlotsFull, .projectionBuilding: true
        case .notALedger, .newerFormat, .permissionDenied, .readOnly, .invalidEvent, .eventTooLarge, .idempotencyConflict,
             .unknownConsumer, .consumerGap, .consumerConflict, .headMoved, .corruptRecord, .corruptStore, .storeFull, .storage,
             .invalidArgument, .unexpected, .newerProjections, .projectionUpgradeNeeded, .eventDecoding, .filesNotShared,
             .projectionRejected, .projectionUnavailable, .cancelled: false
        }
    }
}
