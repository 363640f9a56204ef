import Synchronization

/// The lifetime of one directory's C environment in this process (docs/lmdb.md rules 1 and 9):
/// opened on demand, closed when idle, at a suspension or with the last handle, and reopened
/// by the next call, while every transaction holds ``ResizeGate`` shared — so the handle is
/// never closed, resized or replaced under a transaction of this process.
///
/// The one type that holds the `OpenHandle`: it is read only with the gate held shared and
/// replaced only with it held exclusive.
final class HandleLifetime: @unchecked Sendable {
    // @unchecked: `handle` is read only with `gate` held shared and replaced only with it held
    // exclusive (the methods below are the only access); the C environment may be used from any
    // thread (MDB_NOTLS). The flags are atomics.
    private var handle: OpenHandle?
    /// Mirrors `handle != nil` for the lock-free fast path of ``open(_:)``.
    private let openFlag = Atomic<Bool>(false)
    /// Set once the last handle is gone: nothing reopens it any more.
    private let finished = Atomic<Bool>(false)
    private let gate = ResizeGate()

    /// Whether the C environment is open now.
    var isOpen: Bool { openFlag.load(ordering: .acquiring) }

    /// Opens the C environment with `make` unless it is open (then, or when another thread
    /// opened it meanwhile, returns false), every transaction of the process excluded. Throws
    /// ``LMDBError/suspended`` (without blocking or locking anything) while the process is
    /// suspended, ``LMDBError/badTransaction`` once finished.
    func open(_ make: () throws(LMDBError) -> OpenHandle) throws(LMDBError) -> Bool {
        if EnvironmentRegistry.isSuspended { throw .suspended }
        if isOpen { return false }
        return try gate.withExclusive { () throws(LMDBError) -> Bool in
            if EnvironmentRegistry.isSuspended { throw .suspended }
            if handle != nil { return false }  // another thread opened it meanwhile
            if finished.load(ordering: .acquiring) { throw .badTransaction }
            handle = try make()
            openFlag.store(true, ordering: .releasing)
            return true
        }
    }

    /// Runs `body` with the open handle, the gate held shared for its whole length; nil when
    /// the environment is closed (closed since the caller opened it: open it again).
    func withShared<T>(_ body: (OpenHandle) throws(LMDBError) -> T) throws(LMDBError) -> T? {
        try gate.withShared { () throws(LMDBError) -> T? in
            guard let handle else { return nil }
            return try body(handle)
        }
    }

    /// Runs `body` with the handle (nil: closed), every transaction of the process excluded:
    /// changing the map size or the flags.
    func withExclusive<T>(_ body: (OpenHandle?) throws(LMDBError) -> T) throws(LMDBError) -> T {
        try gate.withExclusive { () throws(LMDBError) -> T in try body(handle) }
    }

    /// Closes the C environment with `free` once no transaction of the process is active,
    /// waiting at most `milliseconds` (nil: as long as it takes). Returns false if a transaction
    /// did not end in time (it stays open).
    @discardableResult
    func close(waitingMilliseconds milliseconds: Int?, _ free: (OpenHandle) -> Void) -> Bool {
        let close = { () -> Void in
            guard let opened = self.handle else { return }
            free(opened)
            self.handle = nil
            self.openFlag.store(false, ordering: .releasing)
        }
        if let milliseconds { return gate.withExclusive(within: milliseconds, close) != nil }
        gate.withExclusive(close)
        return true
    }

    /// Marks the environment finished (the last handle is gone): ``open(_:)`` refuses from now on.
    func finish() { finished.store(true, ordering: .releasing) }
}
