/// How an app projection folds the log when some events are shared with the user's other
/// devices (docs/semantics.md, "Custom events on every device"): what the user's feed placed
/// — other devices' events, the backend's, this device's own once the feed confirms them — and
/// this device's events of types it does not share form the **confirmed** state, in the order
/// they reach the log; this device's own **pending** shared events (``EventSource/shared``,
/// not settled yet) are applied on top of it, in log order. An `inbox.shared-settled` moves a
/// pending event to its feed position (or drops it, refused by the server); any confirmed
/// event that arrives while events are pending **rebases** them: the state goes back to the
/// confirmed one (each row's value before the pending events is kept beside the state, the
/// *undo* entries), the confirmed events are applied, and the pending ones are applied again.
/// A device that has caught up with the feed and has nothing pending therefore holds the fold
/// of the feed's order, whatever order its log holds the events in.
///
/// A stage rebases at most once: confirmed events are applied to the confirmed state, and the
/// pending events once, at its end.
enum AppProjectionFold {
    /// What a stage reads besides the events: the projection's pending list (its record), and
    /// the log, for the pending events a rebase applies again.
    struct Input {
        var pending: [UInt64]
        var log: AppProjectionLog?
    }

    static func stage<P: LedgerProjection>(_: P.Type, _ events: [Event], _ reader: AppProjectionReader, _ context: ProjectionApplyContext,
                                           _ input: Input) throws(LedgerError) -> AppProjectionChanges {
        var update = try ProjectionUpdate<P>(stored: reader, context: context)
        let before = update.document
        var queue = input.pending
        /// The state holds `queue` applied on top of the confirmed state, `undo` recording.
        var undo: ProjectionUndo<P>? = queue.isEmpty ? nil : ProjectionUndo(reader, stored: true)
        update.undo = undo
        var applied = false
        var last: Event?
        var skipped: [LedgerError] = []
        var chunk: [UInt64: Event]?

        func rejection(_ event: Event, _ error: any Error) -> LedgerError {
            // An event that does not decode says which field, once (not its sequence and type again).
            let reason = if case LedgerError.eventDecoding(_, _, let field, let why) = error { "\(field): \(why)" } else { "\(error)" }
            return .projectionRejected(name: P.name, sequence: event.sequence, type: event.type, reason: reason)
        }
        /// Applies `event`; with `skipping`, one that throws is undone and recorded as skipped
        /// (a replay's rule) instead of failing the stage.
        func apply(_ event: Event, _ placement: EventPlacement, skipping: Bool) throws(LedgerError) {
            update.placement = placement
            update.context = skipping ? .replaying : context
            last = event
            applied = true
            if skipping {
                let changed = update.changed, document = update.document
                do {
                    try P.apply(event, to: &update)
                } catch {
                    update.changed = changed
                    update.document = document
                    skipped.append(rejection(event, error))
                }
            } else {
                do { try P.apply(event, to: &update) } catch { throw rejection(event, error) }
            }
            if let failure = undo?.failure { throw failure }
        }
        func load(_ sequence: UInt64) throws(LedgerError) -> Event? {
            if chunk == nil { chunk = Dictionary(events.map { ($0.sequence, $0) }, uniquingKeysWith: { first, _ in first }) }
            if let event = chunk?[sequence] { return event }
            return try input.log?.event(at: sequence)
        }
        /// Back to the confirmed state: every row the pending events changed, and the document.
        func unwind() throws(LedgerError) {
            guard let current = undo else { return }
            for (key, row) in try current.confirmedRows() { update.changed[key] = .some(row) }
            update.document = try current.confirmedDocument()
            update.undo = nil
            undo = nil
        }
        /// Starts recording what the pending events change, from the state as it is now.
        func wind() {
            let fresh = ProjectionUndo<P>(reader, stored: false)
            fresh.document = update.document
            undo = fresh
            update.undo = fresh
        }

        for event in events {
            if event.type == DomainEvent.sharedSettledType {
                // Written by this library only, after validation: one that does not decode is damage, and settles nothing.
                guard case .sharedSettled(let settled)? = try? DomainEvent.decode(type: event.type, payload: event.payload),
                      let index = queue.firstIndex(of: settled.sequence) else { continue }
                try unwind()
                queue.remove(at: index)
                if let position = settled.position, let original = try load(settled.sequence), P.eventTypes.contains(original.baseType) {
                    try apply(original, .confirmed(feedPosition: position), skipping: true)
                }
                continue
            }
            guard P.eventTypes.contains(event.baseType) else { continue }
            switch event.source {
            case .shared:
                if undo == nil, !queue.isEmpty {
                    queue.append(event.sequence)  // after the rebase's pending events: applied with them, at the end
                    continue
                }
                if undo == nil { wind() }
                try apply(event, .pending, skipping: false)
                queue.append(event.sequence)
            case .local:
                if !queue.isEmpty { try unwind() }
                try apply(event, .local, skipping: false)
            case .feed(let origin):
                // Another device's: never this process's own append to refuse (a throw skips it,
                // the sync client's page is not refused).
                if !queue.isEmpty { try unwind() }
                try apply(event, .confirmed(feedPosition: origin.position), skipping: context == .appending)
            }
        }
        if undo == nil, !queue.isEmpty {
            // The rebase: the pending events again, on the confirmed state. One that throws now
            // is skipped (and leaves the list), unless it is being appended now.
            wind()
            var kept: [UInt64] = []
            for sequence in queue {
                guard let event = try load(sequence) else { continue }  // trimmed: nothing to apply again
                let appendedNow = context == .appending && chunk?[sequence] != nil
                let count = skipped.count
                try apply(event, .pending, skipping: !appendedNow)
                if skipped.count == count { kept.append(sequence) }
            }
            queue = kept
        }

        var changes = try encode(update, before: before, reader: reader, last: last, applied: applied)
        changes.skipped = skipped
        if queue != input.pending { changes.pending = queue }
        if queue.isEmpty {
            if !input.pending.isEmpty { changes.undo = AppProjectionUndoWrite(clearStored: true) }  // nothing pending: no undo
        } else if let undo {
            // Recording since the stored entries (only the new first changes), or from scratch
            // (after a rebase, or the first pending event): the stored entries replaced.
            var write = AppProjectionUndoWrite(clearStored: !undo.stored && !input.pending.isEmpty)
            for key in undo.recorded.keys.sorted() {
                write.rows.append((key, try ProjectionUndo<P>.encode(undo.recorded[key] ?? nil, key: key)))
            }
            if !undo.stored, let document = undo.document { write.document = try AppProjectionJSON.encode(document, projection: P.name) }
            if write.clearStored || !write.rows.isEmpty || write.document != nil { changes.undo = write }
        }
        return changes
    }

    /// The changed rows and document of `update`, encoded (and the decoded ones kept in the
    /// read cache when few).
    private static func encode<P: LedgerProjection>(_ update: ProjectionUpdate<P>, before: P.Document, reader: AppProjectionReader, last: Event?,
                                                    applied: Bool) throws(LedgerError) -> AppProjectionChanges {
        func refuse(_ reason: String) -> LedgerError { .projectionRejected(name: P.name, sequence: last?.sequence, type: last?.type, reason: reason) }
        var changes = AppProjectionChanges()
        // The keys sorted as a [String], not the (key, row) pairs: a sort over a type that
        // depends on P runs unspecialized (value-witness copies per comparison), ~44,000
        // instructions an event in a batch of 1,000 (ledger-bench W9-B).
        var keys = Array(update.changed.keys)
        keys.sort()
        for key in keys {
            guard let row = update.changed[key] ?? nil else { changes.rows.append((key, nil)); continue }
            let order = P.order(of: row, key: key)?.bytes ?? []
            guard order.count <= AppProjectionKeys.maxOrderBytes else {
                throw refuse("the order of row '\(key)' encodes to \(order.count) bytes, more than \(AppProjectionKeys.maxOrderBytes)")
            }
            let json = try AppProjectionJSON.encode(row, projection: P.name, sequence: last?.sequence, type: last?.type)
            guard json.count <= AppProjectionKeys.maxRowBytes else {
                throw refuse("row '\(key)' encodes to \(json.count) bytes of JSON, more than \(AppProjectionKeys.maxRowBytes)")
            }
            let value = AppProjectionRow.encode(order: order, json: json)
            // The next read of these bytes needs no decoding; a large batch's rows would
            // only push the cache's earlier entries out (it holds 1,024).
            if keys.count <= AppProjectionCache.rowsKeptPerApply { reader.cache?.store(at: reader.space.row(key), value, row) }
            changes.rows.append((key, (value, order)))
        }
        let unstored = try !reader.hasDocument()
        if applied, update.document != before || unstored {
            let document = try AppProjectionJSON.encode(update.document, projection: P.name, sequence: last?.sequence, type: last?.type)
            guard document.count <= AppProjectionKeys.maxDocumentBytes else {
                throw refuse("the document encodes to \(document.count) bytes of JSON, more than \(AppProjectionKeys.maxDocumentBytes)")
            }
            reader.cache?.store(at: reader.space.document, document, update.document)
            changes.document = document
        }
        return changes
    }
}

/// The log a fold reads pending events from (a rebase applies them again), upcast as the
/// handle reads every event.
struct AppProjectionLog {
    let tables: StoreTransaction
    let registry: AppProjectionRegistry

    func event(at sequence: UInt64) throws(LedgerError) -> Event? {
        do {
            guard let event = try tables.events.event(at: sequence) else { return nil }
            return try registry.upcast([event]).first
        } catch let error as LedgerError {
            throw error
        } catch {
            throw .unexpected(path: tables.path, operation: "read a pending event", reason: "\(error)")
        }
    }
}

/// What a row and the document were before the pending shared events of a projection (its
/// *undo* entries: `U ‖ key` and `u` in its space, docs/format.md), the ones stored and those
/// this stage records, each row's first change only.
final class ProjectionUndo<P: LedgerProjection>: ProjectionRowRecorder {
    let reader: AppProjectionReader
    /// Whether the stored entries are this state's (false: a rebase restored and cleared them,
    /// or nothing was pending).
    let stored: Bool
    /// The rows first changed in this stage, with their value before (nil: absent).
    var recorded: [String: P.Row?] = [:]
    /// The document before, recorded when the pending events start in this stage.
    var document: P.Document?
    /// Rows whose stored entry was looked up.
    private var storedHas: [String: Bool] = [:]
    /// A read that failed while recording (``ProjectionUpdate/removeRow(_:)`` does not throw):
    /// thrown after the apply.
    var failure: LedgerError?

    init(_ reader: AppProjectionReader, stored: Bool) {
        self.reader = reader
        self.stored = stored
    }

    /// Records `key`'s value before its first change (`current`), unless recorded already.
    func recordFirst(_ key: String, _ current: () throws -> P.Row?) {
        guard failure == nil, recorded.index(forKey: key) == nil else { return }
        do {
            if stored {
                let has: Bool
                if let known = storedHas[key] {
                    has = known
                } else {
                    has = try reader.raw(reader.space.undoRow(key)) != nil
                    storedHas[key] = has
                }
                if has { return }
            }
            recorded[key] = .some(try current())
        } catch let error as LedgerError {
            failure = error
        } catch {
            failure = .unexpected(path: reader.path, operation: "record a row of projection '\(P.name)'", reason: "\(error)")
        }
    }

    /// Every row the pending events changed, with its confirmed value (nil: absent).
    func confirmedRows() throws(LedgerError) -> [(String, P.Row?)] {
        var rows = recorded.map { ($0.key, $0.value) }
        guard stored else { return rows }
        try reader.scanRaw(from: reader.space.undoRowPrefix) { key, value throws(LedgerError) in
            rows.append((key, try Self.decode(value, key: key, path: reader.path)))
        }
        return rows
    }

    /// The document before the pending events.
    func confirmedDocument() throws(LedgerError) -> P.Document {
        if let document { return document }
        guard let bytes = try reader.raw(reader.space.undoDocument) else {
            throw .corruptStore(path: reader.path, reason: "app projection '\(P.name)' has pending shared events but no undo document")
        }
        return try AppProjectionJSON.decode(P.Document.self, bytes[...], projection: P.name, what: "the document before the pending events")
    }

    /// `0x00` (absent) or the row as stored (``AppProjectionRow``).
    static func encode(_ row: P.Row?, key: String) throws(LedgerError) -> [UInt8] {
        guard let row else { return [0x00] }
        let json = try AppProjectionJSON.encode(row, projection: P.name)
        return AppProjectionRow.encode(order: P.order(of: row, key: key)?.bytes ?? [], json: json)
    }

    static func decode(_ bytes: [UInt8], key: String, path: String) throws(LedgerError) -> P.Row? {
        if bytes == [0x00] { return nil }
        guard let row = AppProjectionRow.decode(bytes) else {
            throw .corruptStore(path: path, reason: "app projection '\(P.name)': the undo entry of row '\(key)' is malformed")
        }
        return try AppProjectionJSON.decode(P.Row.self, row.json, projection: P.name, what: "the undo entry of row '\(key)'")
    }
}
