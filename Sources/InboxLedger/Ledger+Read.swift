extension Ledger {
    /// Runs `body` with one snapshot of the ledger (one short read transaction) and returns
    /// what it computed: every value read from the snapshot agrees with every other, whatever
    /// other processes commit meanwhile. The only way to read; no lock stays held afterwards.
    ///
    /// ```swift
    /// let (head, list) = try ledger.read { snapshot in
    ///     (try snapshot.head(), try snapshot.widgetList(limit: 5))
    /// }
    /// ```
    ///
    /// Keep `body` short and free of other I/O: it runs inside the transaction (a read-only
    /// handle holds a reader slot meanwhile). The snapshot is valid only inside `body`. Errors
    /// are typed: what the snapshot throws arrives as it is; an error of another type that
    /// `body` throws arrives as ``LedgerError/unexpected(path:operation:reason:)`` naming it —
    /// decide on your own conditions outside the closure, with the values it returned.
    @inlinable
    public func read<T>(_ body: (LedgerSnapshot) throws -> T) throws(LedgerError) -> T {
        // Inlinable, over a read that is not generic: a caller's read is specialized for its
        // `T` (a generic call across the module cost a widget read 6 %, ledger-bench W4).
        var value: T?
        try readErased { snapshot in value = try body(snapshot) }
        guard let value else { throw .unexpected(path: path, operation: "read", reason: "the read's closure returned nothing") }
        return value
    }

    /// ``read(_:)-(_)`` without its result type: one snapshot given to `body`.
    @usableFromInline
    func readErased(_ body: (LedgerSnapshot) throws -> Void) throws(LedgerError) {
        try readSnapshot(body)
    }

    /// ``read(_:)-(_)`` without blocking the caller's thread: `body` runs on the directory's read
    /// thread, never on Swift's cooperative pool. A task cancelled before the read starts gets
    /// ``LedgerError/cancelled`` (nothing was read).
    ///
    /// ```swift
    /// @MainActor func refresh() async throws {
    ///     rows = try await ledger.read { try $0.widgetList(limit: 5) }.items
    /// }
    /// ```
    public func read<T: Sendable>(_ body: @escaping @Sendable (LedgerSnapshot) throws -> T) async throws(LedgerError) -> T {
        try await offPool { [self] () throws(LedgerError) in try readSnapshot(body) }
    }

    /// Waits until another append (from any process) moves the head past `sequence`, and
    /// returns the new head. Idle waiting costs no CPU to speak of (an inotify watch). A
    /// cancelled task gets ``LedgerError/cancelled``.
    ///
    /// ```swift
    /// var seen = try await ledger.read { try $0.head() }
    /// while true {
    ///     seen = try await ledger.waitForChange(after: seen)
    ///     refreshWidget()
    /// }
    /// ```
    public func waitForChange(after sequence: UInt64) async throws(LedgerError) -> UInt64 {
        try await waitForHead(after: sequence)
    }

    /// The heads the ledger moves to after `sequence`, as they happen (changes that come in
    /// quick succession may be reported once, with the latest head). It ends when the iterating
    /// task is cancelled. To follow a value rather than the head, use ``LedgerObservation``.
    public func changes(after sequence: UInt64) -> AsyncThrowingStream<UInt64, any Error> {
        AsyncThrowingStream { continuation in
            let task = Task {
                var seen = sequence
                do throws(LedgerError) {
                    while !Task.isCancelled {
                        seen = try await waitForChange(after: seen)
                        continuation.yield(seen)
                    }
                    continuation.finish()
                } catch {
                    if case .cancelled = error { continuation.finish() } else { continuation.finish(throwing: error) }
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}

/// Pages through a ledger's events, each page in its own short read transaction (no
/// transaction stays open between calls): for reading a whole log, which one snapshot should
/// not hold open.
///
/// ```swift
/// var iterator = EventIterator(ledger, after: cursor)
/// while let event = try iterator.next() { handle(event) }
/// ```
public struct EventIterator {
    private let access: LedgerAccess
    private let pageSize: Int
    /// The sequence of the last event returned (or the starting point).
    public private(set) var position: UInt64
    private var buffer: [Event] = []
    private var index = 0

    /// Iterates the events of `ledger` after `sequence`, fetching `pageSize` at a time.
    public init(_ ledger: Ledger, after sequence: UInt64 = 0, pageSize: Int = 512) {
        self.access = ledger.access
        self.position = sequence
        self.pageSize = max(1, pageSize)
    }

    /// The next event, or `nil` when the log has no more (call again later to see new ones).
    public mutating func next() throws(LedgerError) -> Event? {
        if index == buffer.count {
            let (position, pageSize) = (position, pageSize)
            buffer = try access.readSnapshot { snapshot in try snapshot.events(after: position, limit: pageSize) }
            index = 0
            if buffer.isEmpty { return nil }
        }
        let event = buffer[index]
        index += 1
        position = event.sequence
        return event
    }
}

extension LedgerAccess: LedgerAccessing {
    /// Itself.
    var access: LedgerAccess { self }
}

extension EventUpcaster {
    /// `event` upgraded by every upcaster of `upcasters` that applies, in turn.
    static func apply(_ upcasters: [EventUpcaster], to event: Event) throws(LedgerError) -> Event {
        guard !upcasters.isEmpty, BuiltInEventType(rawValue: event.type) == nil else { return event }
        let (name, stored) = EventTypeName.parse(event.type)
        var version = stored
        var result = event
        while let upcaster = upcasters.first(where: { $0.eventType == name && $0.fromVersion == version }) {
            do { result.payload = try upcaster.transform(result.payload) } catch {
                throw .eventDecoding(sequence: event.sequence, type: event.type, field: "data",
                                     reason: "the upcaster from version \(version) failed: \(error)")
            }
            version += 1
            result.type = EventTypeName.stored(name, version: version)
        }
        return result
    }
}
