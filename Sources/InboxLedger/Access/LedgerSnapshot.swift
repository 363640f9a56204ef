/// One read transaction's view of a ledger: every value read from it agrees with every other
/// (the head, the events, the widget's list, the app's projections), whatever other processes
/// commit meanwhile. Given to the closure of ``Ledger/read(_:)-(_)``; valid only inside it.
///
/// ```swift
/// let (head, list, actions) = try ledger.read { snapshot in
///     (try snapshot.head(), try snapshot.widgetList(limit: 5), try snapshot.pendingActions())
/// }
/// ```
///
/// A snapshot holds an LMDB read transaction: keep the closure short (it pins the pages it
/// sees, and a read-only handle holds a reader slot for its length), take values out of it,
/// and never keep the snapshot itself — used after its closure returned, each call throws
/// ``LedgerError/invalidArgument(name:reason:)`` instead of touching a closed transaction.
public struct LedgerSnapshot {
    let tables: StoreTransaction
    let access: LedgerAccess
    /// Where an observation collects when a value read stops being true by itself (nil for a
    /// plain read: nothing to collect, nothing allocated).
    let expiry: SnapshotExpiry?

    /// Notes, for an observation, that what was read changes soon without the head moving (a
    /// projection being built or caught up).
    func refreshSoon() {
        guard let expiry else { return }
        expiry.refresh(at: Timestamp(micros: access.options.clock.now().micros + SnapshotExpiry.buildRefreshMicros))
    }

    /// The sequence number of the last event ever appended (0 for an empty ledger): the head to
    /// pass to ``AppendRequest/expectedHead`` when deciding on what this snapshot shows.
    public func head() throws(LedgerError) -> UInt64 {
        try run("read head") { try tables.head() }
    }

    /// The lowest sequence still in the log (`head() + 1` when the log is empty).
    public func firstSequence() throws(LedgerError) -> UInt64 {
        try run("read first") { try tables.firstSequence() }
    }

    /// The number of events in the log.
    public func count() throws(LedgerError) -> Int {
        try run("count events") { try tables.events.count() }
    }

    /// The event at `sequence`, or nil if there is none (never appended, or trimmed). Throws
    /// ``LedgerError/corruptRecord(sequence:reason:)`` if the record fails its checksum.
    public func event(at sequence: UInt64) throws(LedgerError) -> Event? {
        guard let event = try run("read event", { try tables.events.event(at: sequence) }) else { return nil }
        return try access.upcast(event)
    }

    /// Up to `limit` events with sequence numbers greater than `sequence`, in order.
    ///
    /// ```swift
    /// let recent = try ledger.read { try $0.events(after: cursor, limit: 100) }
    /// ```
    public func events(after sequence: UInt64 = 0, limit: Int = 1000) throws(LedgerError) -> [Event] {
        try access.upcast(run("read events") { try tables.events.events(after: sequence, limit: limit) })
    }

    /// What the widget shows: the top `limit` rows, unread count, badge and version (no log
    /// decoding). While the projection state is unchanged and no message expired, the list
    /// this process read last is returned instead of decoding the rows again.
    ///
    /// ```swift
    /// let list = try ledger.read { try $0.widgetList(limit: 5) }
    /// for row in list.items { print(row.read ? " " : "•", row.title) }
    /// ```
    public func widgetList(limit: Int = 10, now: Timestamp? = nil) throws(LedgerError) -> WidgetList {
        let now = now ?? access.options.clock.now()
        let list = try run("read widget list") { try widgetModel.list(tables.projections, limit: limit, now: now) }
        expiry?.refresh(at: list.nextExpiry)
        return list
    }

    /// The app badge at `now` (by default the ledger's ``LedgerOptions/clock``).
    public func badge(now: Timestamp? = nil) throws(LedgerError) -> Int {
        try widgetList(limit: 0, now: now).badge
    }

    /// The current ``WidgetList/version``: one key read. A widget compares it with the version
    /// it showed to tell whether anything it shows changed.
    public func widgetVersion() throws(LedgerError) -> UInt64 {
        try run("read version") { try ProjectionState.load(from: tables.projections).version }
    }

    /// A message with both read flags, or nil if the inbox does not hold it.
    public func message(id: String) throws(LedgerError) -> MessageState? {
        try run("read message") { try widgetModel.message(tables.projections, id: id) }
    }

    /// Messages removed here or announced by pushes that no listing has settled yet, by id.
    /// Local read changes of messages the inbox holds are in ``message(id:)``'s `localRead`.
    ///
    /// ```swift
    /// for change in try ledger.read({ try $0.localChanges() }) where change.kind == .removed {
    ///     print("archived here, the server still lists", change.id)
    /// }
    /// ```
    public func localChanges(limit: Int = 1000) throws(LedgerError) -> [LocalChange] {
        guard limit > 0 else { return [] }
        return try run("read local changes") { try widgetModel.localChanges(tables.projections, limit: limit) }
    }

    /// Pending widget actions in the order they were recorded: what a host app's queue shows.
    public func pendingActions(limit: Int = 100) throws(LedgerError) -> [PendingAction] {
        guard limit > 0 else { return [] }
        return try run("read pending actions") { try widgetModel.pendingActions(tables.projections, limit: limit) }
    }

    /// The app projection `P` (registered by this handle, ``LedgerOptions/projections``) as of
    /// this snapshot: its stored state, with the events appended since by processes that do
    /// not keep it applied in memory (never written by a read), so it agrees with ``head()``.
    ///
    /// ```swift
    /// let open = try ledger.read { try $0.projection(TaskList.self).rows(limit: 10) }
    /// ```
    public func projection<P: LedgerProjection>(_ projection: P.Type) throws(LedgerError) -> ProjectionSnapshot<P> {
        try ProjectionSnapshot(P.self, in: self)
    }

    private var widgetModel: WidgetReadModel { WidgetReadModel(cache: access.widgetCache, path: access.path) }

    /// `body`, its errors mapped as the store maps them. The transaction refuses every use once
    /// its read ended (the LMDB layer's rule), which arrives as a snapshot used out of its read.
    func run<T>(_ operation: String, _ body: () throws -> T) throws(LedgerError) -> T {
        do { return try body() } catch { throw LedgerError.from(error, path: access.path, operation: operation) }
    }
}

@available(*, unavailable, message: "a snapshot is one thread's read transaction: read inside the closure")
extension LedgerSnapshot: Sendable {}

/// The earliest moment a value read from a snapshot stops being true without a commit (a
/// message's expiry): what ``LedgerObservation`` waits for besides commits.
final class SnapshotExpiry {
    /// How soon an observation looks again at a projection being built or caught up (whose
    /// steps do not move the head it waits on).
    static let buildRefreshMicros: Int64 = 100_000

    private(set) var moment: Timestamp?

    /// Notes that a value read changes by itself at `moment` (nil: never).
    func refresh(at moment: Timestamp?) {
        guard let moment else { return }
        self.moment = min(self.moment ?? moment, moment)
    }
}

extension LedgerAccessing {
    /// `body` given one snapshot (one read transaction): ``Ledger/read(_:)-(_)``, ``EventIterator``.
    /// An error `body` throws that is not a ``LedgerError`` arrives as
    /// ``LedgerError/unexpected(path:operation:reason:)`` naming it (``Ledger/read(_:)-(_)``).
    func readSnapshot<T>(_ body: (LedgerSnapshot) throws -> T, expiry: SnapshotExpiry? = nil) throws(LedgerError) -> T {
        try read("read") { tables in
            do {
                return try body(LedgerSnapshot(tables: tables, access: access, expiry: expiry))
            } catch let error as LedgerError {
                throw error
            } catch {
                throw LedgerError.unexpected(path: access.path, operation: "read", reason: "the read's closure threw \(String(reflecting: error))")
            }
        }
    }
}
