/// What to append, and on which condition: the one value every append of a ``Ledger`` is
/// made of (``Ledger/append(_:)-(AppendRequest)``). The other `append` forms build one.
///
/// ```swift
/// let head = try ledger.headSequence()
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
    /// Limits on what an event may contain.
    public enum Limits {
        /// Longest type name, in bytes.
        public static let maxTypeBytes = EventLimits.maxTypeBytes
        /// Longest idempotency key, in bytes (LMDB keys are at most 511 bytes).
        public static let maxKeyBytes = EventLimits.maxKeyBytes
    }

    /// Appends `request`'s events atomically (all or none, in order) and returns the receipt:
    /// each event's sequence (the original one for an idempotent retry), which were replays,
    /// what the projections noticed. Blocks until the commit is on disk as ``durability``
    /// promises; concurrent callers in this process share commits. Every other `append` is
    /// this one.
    ///
    /// ```swift
    /// let receipt = try ledger.append(AppendRequest(.badgeAdjusted(.delta(1)), key: "push-4711"))
    /// let counted = !receipt.isReplay   // false when the push was delivered before
    /// ```
    @discardableResult
    public func append(_ request: AppendRequest) throws(LedgerError) -> AppendReceipt {
        if request.isEmpty, request.expectedHead == nil { return AppendReceipt(sequences: [], notes: []) }
        return try log.submit(prepare(request), cursor: nil, expectedHead: request.expectedHead)
    }

    /// The request's events validated (``EventLog/prepare(_:)``).
    func prepare(_ request: AppendRequest) throws(LedgerError) -> [PreparedEvent] {
        switch request.events {
        case .json(let events): try log.prepare(events)
        case .typed(let events): try log.prepare(domain: events)
        }
    }

    /// Appends one event and returns its sequence number (or, for an idempotency key seen
    /// before with the same content, the original event's sequence number).
    ///
    /// ```swift
    /// let seq = try ledger.append(NewEvent(type: "message.read", payload: Array(#"{"ids":["m1"],"read":true}"#.utf8)))
    /// ```
    @discardableResult
    public func append(_ event: NewEvent) throws(LedgerError) -> UInt64 {
        try Ledger.first(of: append(AppendRequest([event])), path: path)
    }

    /// Appends a domain event (see ``DomainEvent``).
    ///
    /// ```swift
    /// try ledger.append(.badgeAdjusted(.delta(1)), key: "push-4711")
    /// ```
    @discardableResult
    public func append(_ event: DomainEvent, key: String? = nil) throws(LedgerError) -> UInt64 {
        try Ledger.first(of: append(AppendRequest(event, key: key)), path: path)
    }

    /// Appends `events` atomically: all of them are committed, in order, or none is.
    /// Returns their sequence numbers in order. Blocks until the commit is on disk as
    /// ``Ledger/durability`` promises; concurrent callers in this process share commits.
    @discardableResult
    public func append(contentsOf events: [NewEvent]) throws(LedgerError) -> [UInt64] {
        try appendWithReceipt(contentsOf: events).sequences
    }

    /// Appends domain events atomically (all or none, in order), each validated on its typed
    /// fields and encoded once; returns their sequence numbers.
    ///
    /// ```swift
    /// try ledger.append(contentsOf: [.badgeAdjusted(.set(0)), .messageRead(ReadChange(ids: ["m1"], read: true))])
    /// ```
    @discardableResult
    public func append(contentsOf events: some Collection<DomainEvent>) throws(LedgerError) -> [UInt64] {
        try append(AppendRequest(events)).sequences
    }

    /// ``append(_:key:)-(DomainEvent,_)``, returning the receipt: whether a keyed append was a
    /// replay of one already committed (``AppendReceipt/isReplay``; nothing was written) and
    /// what the projections noticed.
    ///
    /// ```swift
    /// let receipt = try ledger.appendWithReceipt(.badgeAdjusted(.delta(1)), key: "push-4711")
    /// let counted = !receipt.isReplay   // false when the push was delivered before
    /// ```
    public func appendWithReceipt(_ event: DomainEvent, key: String? = nil) throws(LedgerError) -> AppendReceipt {
        try append(AppendRequest(event, key: key))
    }

    /// As ``append(contentsOf:)``, also returning which events were replays
    /// (``AppendReceipt/replayed``) and what the projections noticed.
    public func appendWithReceipt(contentsOf events: [NewEvent]) throws(LedgerError) -> AppendReceipt {
        try append(AppendRequest(events))
    }

    /// Appends `events` only if the log's head is still `expectingHead` when they commit — the
    /// optimistic-concurrency check of event stores (read, decide, write): if any process
    /// appended in between, nothing is written and ``LedgerError/headMoved(expected:actual:)``
    /// says where the head is now. Returns their sequence numbers.
    ///
    /// ```swift
    /// let head = try ledger.headSequence()
    /// let list = try ledger.widgetList(limit: 5)                 // decide on what was read…
    /// try ledger.append(contentsOf: [decision], expectingHead: head) // …and write only if still true
    /// ```
    @discardableResult
    public func append(contentsOf events: [NewEvent], expectingHead: UInt64) throws(LedgerError) -> [UInt64] {
        try append(AppendRequest(events, expectingHead: expectingHead)).sequences
    }

    /// ``append(contentsOf:expectingHead:)`` for one domain event.
    @discardableResult
    public func append(_ event: DomainEvent, key: String? = nil, expectingHead: UInt64) throws(LedgerError) -> UInt64 {
        try Ledger.first(of: append(AppendRequest(event, key: key, expectingHead: expectingHead)), path: path)
    }

    /// The sequence of a one-event append.
    static func first(of receipt: AppendReceipt, path: String) throws(LedgerError) -> UInt64 {
        guard let first = receipt.sequences.first else {
            throw .unexpected(path: path, operation: "append", reason: "the commit assigned no sequence")
        }
        return first
    }
}
