#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Removes a temporary ledger's directory when the environment it belongs to closes, that is
/// when the last handle of the directory in this process is gone.
final class TemporaryLedgerDirectory: Sendable {
    let path: String

    init(path: String) { self.path = path }

    // The environment releases its attachments after closing its LMDB handle, so the files
    // are no longer mapped or locked here.
    deinit { FileSystem.removeDirectory(path) }
}

// The façade's members that belong to apps: typed events and temporary ledgers.

extension Ledger {
    /// Appends an app-defined event (``LedgerEvent``) and returns its sequence number.
    ///
    /// ```swift
    /// try ledger.append(NoteAdded(noteID: "n1", text: "Buy milk"), key: "note-n1")
    /// ```
    @discardableResult
    public func append<E: LedgerEvent>(_ event: E, key: String? = nil) throws(LedgerError) -> UInt64 {
        try append(NewEvent(event, key: key))
    }

    /// ``append(_:key:)-(E,_)`` without blocking the caller's thread (see ``append(_:)-(AppendRequest)``'s async form).
    @discardableResult
    public func append<E: LedgerEvent>(_ event: E, key: String? = nil) async throws(LedgerError) -> UInt64 {
        try Ledger.first(of: await append(AppendRequest([NewEvent(event, key: key)])), path: path)
    }

    /// A new, empty ledger in a private directory of its own (on tmpfs where there is one,
    /// else in the temporary directory), removed when its last handle in this process is
    /// released: for an app's unit tests and previews. Combine it with an injected
    /// ``LedgerOptions/clock`` to make expiry deterministic.
    ///
    /// ```swift
    /// import Testing
    /// import InboxLedger
    ///
    /// @Test func badgeCountsUnreadMessages() throws {
    ///     let ledger = try Ledger.temporary()
    ///     try ledger.append(.badgeAdjusted(.delta(2)))
    ///     #expect(try ledger.read { try $0.badge() } == 2)
    /// }
    /// ```
    ///
    /// `options.create` and `options.readOnly` are ignored (it is created, writable). Other
    /// processes can open ``path`` while this handle lives, like any ledger.
    public static func temporary(options: LedgerOptions = LedgerOptions(role: "test")) throws(LedgerError) -> Ledger {
        var options = options
        options.create = true
        options.readOnly = false
        var parents: [String] = []
        #if os(Linux)
        parents.append("/dev/shm")  // tmpfs: no disk writes, fsync is free
        #endif
        if let tmp = getenv("TMPDIR") { parents.append(String(cString: tmp)) }
        parents.append("/tmp")
        let directory: String
        switch FileSystem.makeTemporaryDirectory(prefix: "inbox-ledger-", in: parents) {
        case .made(let path): directory = path
        case .failed(let code):
            throw .storage(path: parents.last ?? "/tmp", operation: "create temporary directory", code: code, message: FileSystem.errorMessage(code))
        }
        let ledger: Ledger
        do { ledger = try Ledger(path: directory, options: options) } catch {
            FileSystem.removeDirectory(directory)
            throw error
        }
        _ = ledger.access.store.attachment(.temporaryDirectory) { TemporaryLedgerDirectory(path: directory) }
        return ledger
    }
}
