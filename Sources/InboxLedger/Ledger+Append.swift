/// What to append, and on which condition: the one value every append of a ``Ledger`` is
/// made of (``Ledger/append(_:)-(AppendRequest)``). The conveniences build one.
///
/// ```swift
/// let head = try ledger.read { try $0.head() }
/// let request = AppendRequest(.badgeAdjusted(.delta(1)), key: "push-4711", expectingHead: head)
/// let receipt = try ledger.append(request)
/// print(receipt.sequences, receipt.isReplay)
/// ```
public struct AppendRequest: Sendable {
    /// The events, as JSON bytes (``NewEvent``) or typed (``DomainEvent``, each with its key).
    enum Events: Sendable {
        case json([NewEvent])
        case typed([(event: DomainEvent, key: String?)])
    }

    let events: Events
    /// Append only if the log's head is still this when the events commit
    /// (``LedgerError/headMoved(expected:actual:)`` otherwise, nothing written); nil: always.
    public var expectedHead: UInt64?

    /// `events` (JSON payloads, each with its own idempotency key), all or none, in order.
    public init(_ events: [NewEvent], expectingHead: UInt64? = nil) {
        self.events = .json(events)
        self.expectedHead = expectingHead
    }

    /// One typed event with an optional idempotency key.
    public init(_ event: DomainEvent, key: String? = nil, expectingHead: UInt64? = nil) {
        self.events = .typed([(event, key)])
        self.expectedHead = expectingHead
    }

    /// Typed events without keys, all or none, in order.
    public init(_ events: some Collection<DomainEvent>, expectingHead: UInt64? = nil) {
        self.events = .typed(events.map { ($0, nil) })
        self.expectedHead = expectingHead
    }

    /// Whether the request holds no event.
    var isEmpty: Bool {
        switch events {
        case .json(let e): e.isEmpty
        case .typed(let e): e.isEmpty
        }
    }
}

extension Ledger {
    /// Limits on what an event and a handle may contain.
    public enum Limits {
        /// Longest type name, in bytes.
        public static let maxTypeBytes = EventLimits.maxTypeBytes
        /// Longest idempotency key, in bytes (LMDB keys are at most 511 bytes).
        public static let maxKeyBytes = EventLimits.maxKeyBytes
        /// The longest origin role, in bytes of UTF-8 (``LedgerOptions/role``).
        public static let maxRoleBytes = EventLimits.maxRoleBytes
    }

    /// Appends `request`'s events atomically (all or none, in order) and returns the receipt:
    /// each event's sequence (the original one for an idempotent retry), which were replays,
    /// what the projections noticed. Blocks until the commit is on disk as ``durability``
    /// promises; concurrent callers in this process share commits. Every append is this one.
    ///
    /// ```swift
    /// let receipt = try ledger.append(AppendRequest(.badgeAdjusted(.delta(1)), key: "push-4711"))
    /// let counted = !receipt.isReplay   // false when the push was delivered before
    /// ```
    ///
    /// Read, decide, write: with ``AppendRequest/expectedHead`` set, nothing is written if any
    /// process appended since (``LedgerError/headMoved(expected:actual:)``).
    @discardableResult
    public func append(_ request: AppendRequest) throws(LedgerError) -> AppendReceipt {
        if request.isEmpty, request.expectedHead == nil { return AppendReceipt(sequences: [], notes: []) }
        return try log.submit(prepare(request), cursor: nil, expectedHead: request.expectedHead)
    }

    /// ``append(_:)-(AppendRequest)`` without blocking the caller's thread: the commit is led by
    /// the commit queue's thread, grouped with every other append of the process, never on
    /// Swift's cooperative pool. A task cancelled before its commit starts gets
    /// ``LedgerError/cancelled`` and nothing is written; once the commit has started, the call
    /// returns its committed result.
    ///
    /// ```swift
    /// let receipt = try await ledger.append(AppendRequest(.badgeAdjusted(.delta(1)), key: "push-4711"))
    /// ```
    @discardableResult
    public func append(_ request: AppendRequest) async throws(LedgerError) -> AppendReceipt {
        if request.isEmpty, request.expectedHead == nil { return AppendReceipt(sequences: [], notes: []) }
        return try await log.submitAsync(prepare(request), cursor: nil, expectedHead: request.expectedHead)
    }

    /// Appends a domain event (see ``DomainEvent``) with an optional idempotency key and
    /// returns its sequence number (the original one when the key was seen before with the
    /// same content).
    ///
    /// ```swift
    /// try ledger.append(.badgeAdjusted(.delta(1)), key: "push-4711")
    /// ```
    @discardableResult
    public func append(_ event: DomainEvent, key: String? = nil) throws(LedgerError) -> UInt64 {
        try Ledger.first(of: append(AppendRequest(event, key: key)), path: path)
    }

    /// ``append(_:key:)-(DomainEvent,_)`` without blocking the caller's thread.
    ///
    /// ```swift
    /// @MainActor func markAllRead(_ ids: [String]) async throws {
    ///     try await ledger.append(.messageRead(ReadChange(ids: ids, read: true)))
    /// }
    /// ```
    @discardableResult
    public func append(_ event: DomainEvent, key: String? = nil) async throws(LedgerError) -> UInt64 {
        try Ledger.first(of: await append(AppendRequest(event, key: key)), path: path)
    }

    /// Appends one event given as JSON (``NewEvent``, its key inside) and returns its sequence.
    ///
    /// ```swift
    /// try ledger.append(NewEvent(type: "message.read", payload: Array(#"{"ids":["m1"],"read":true}"#.utf8)))
    /// ```
    @discardableResult
    public func append(_ event: NewEvent) throws(LedgerError) -> UInt64 {
        try Ledger.first(of: append(AppendRequest([event])), path: path)
    }

    /// Appends `events` (JSON) atomically, all or none, in order; returns their sequences.
    @discardableResult
    public func append(contentsOf events: [NewEvent]) throws(LedgerError) -> [UInt64] {
        try append(AppendRequest(events)).sequences
    }

    /// The request's events validated (``EventLog/prepare(_:)``).
    func prepare(_ request: AppendRequest) throws(LedgerError) -> [PreparedEvent] {
        switch request.events {
        case .json(let events): try log.prepare(events)
        case .typed(let events): try log.prepare(domain: events)
        }
    }

    /// The sequence of a one-event append.
    static func first(of receipt: AppendReceipt, path: String) throws(LedgerError) -> UInt64 {
        guard let first = receipt.sequences.first else {
            throw .unexpected(path: path, operation: "append", reason: "the commit assigned no sequence")
        }
        return first
    }
}
