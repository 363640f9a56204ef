extension Ledger {
    /// What the widget shows: the top `limit` rows, unread count, badge and version, from one
    /// short read transaction (no log decoding, no lock held afterwards).
    ///
    /// The last list read in this process is kept: while the projection state is unchanged (one
    /// key read: any append changes it) and no message expired in between, the read returns
    /// the kept list instead of decoding the rows again.
    ///
    /// ```swift
    /// let list = try ledger.widgetList(limit: 5)
    /// for row in list.items { print(row.read ? " " : "•", row.title) }
    /// print("badge", list.badge)
    /// ```
    public func widgetList(limit: Int = 10, now: Timestamp? = nil) throws(LedgerError) -> WidgetList {
        let now = now ?? options.clock.now()
        return try read("read widget list") { tables in try widgetModel.list(tables.projections, limit: limit, now: now) }
    }

    /// The widget's list and its pending actions (up to `actionsLimit`) from ONE snapshot, so
    /// that the list's counts and the actions shown agree (`ledger widget`).
    package func widgetSnapshot(limit: Int = 10, actionsLimit: Int = 1000, now: Timestamp? = nil) throws(LedgerError) -> (list: WidgetList, actions: [PendingAction]) {
        let now = now ?? options.clock.now()
        return try read("read widget list") { tables in
            let store = tables.projections
            return (try widgetModel.list(store, limit: limit, now: now), try widgetModel.pendingActions(store, limit: actionsLimit))
        }
    }

    /// The widget's reads over this ledger's projections, with the list kept by the process.
    var widgetModel: WidgetReadModel { WidgetReadModel(cache: widgetCache, path: path) }

    /// The app badge at `now` (by default the ledger's ``LedgerOptions/clock``).
    public func badge(now: Timestamp? = nil) throws(LedgerError) -> Int {
        try widgetList(limit: 0, now: now).badge
    }

    /// Whether what the widget shows changed since `version` (a ``WidgetList/version`` it
    /// showed): one key read, O(1).
    public func hasChanged(since version: UInt64) throws(LedgerError) -> Bool {
        try currentVersion() != version
    }

    /// The current ``WidgetList/version``.
    public func currentVersion() throws(LedgerError) -> UInt64 {
        try read("read version") { tables in try ProjectionState.load(from: tables.projections).version }
    }

    /// A message with both read flags, or nil if the inbox does not hold it.
    public func message(id: String) throws(LedgerError) -> MessageState? {
        try read("read message") { tables in try widgetModel.message(tables.projections, id: id) }
    }

    /// Messages removed here or announced by pushes that no listing has settled yet, by id.
    /// Local read changes of messages the inbox holds are in ``message(id:)``'s `localRead`.
    ///
    /// ```swift
    /// for change in try ledger.localChanges() where change.kind == .removed {
    ///     print("archived here, the server still lists", change.id)
    /// }
    /// ```
    public func localChanges(limit: Int = 1000) throws(LedgerError) -> [LocalChange] {
        guard limit > 0 else { return [] }
        return try read("read local changes") { tables in try widgetModel.localChanges(tables.projections, limit: limit) }
    }

    /// Pending actions in the order they were recorded.
    public func pendingActions(limit: Int = 100) throws(LedgerError) -> [PendingAction] {
        guard limit > 0 else { return [] }
        return try read("read pending actions") { tables in try widgetModel.pendingActions(tables.projections, limit: limit) }
    }
}
