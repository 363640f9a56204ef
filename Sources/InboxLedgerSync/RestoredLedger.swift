@_spi(LedgerSync) import InboxLedger

// The client's two answers to the server's new rules (docs/sync.md, "Failure modes"): a ledger
// restored from a backup (or copied) while its state file was not gets the feed again, and a
// feed entry this ledger cannot append stops the down side with an error naming it.

extension SyncClient {
    /// The down cursor the state file holds, if the ledger still holds the entry it names;
    /// else 0 (replay the feed: every entry is keyed, so what the ledger has is a no-op). The
    /// state file lives outside the ledger's directory, so restoring the directory from a
    /// backup leaves a cursor ahead of the ledger: without this check the entries appended
    /// between the backup and the restore would never come down again.
    static func downCursorHeld(by ledger: Ledger, saved: StateFile) throws(SyncError) -> UInt64 {
        guard saved.downCursor > 0, let user = saved.user, let at = saved.appendedAt else { return saved.downCursor }
        do {
            if let event = try ledger.read({ try $0.event(at: at) }) {
                return event.key == SyncWire.downKey(user: user, seq: saved.downCursor) ? saved.downCursor : 0
            }
            // Not there: trimmed by compaction (the ledger has moved past it), or never written here.
            return at < (try ledger.read({ try $0.firstSequence() })) ? saved.downCursor : 0
        } catch {
            throw .ledger(error)
        }
    }

    /// The events one page of feed entries appends, each under its entry's key
    /// (`sync-down-<user>-<seq>`): a built-in entry as it is; another device's (or the
    /// backend's) custom event with its origin's envelope (``NewEvent/fromFeed(type:payload:key:time:role:origin:)``);
    /// this ledger's own shared event, which it holds already, as the `inbox.shared-settled`
    /// that places it. An own entry whose event this ledger no longer holds as it was sent (a
    /// ledger restored from a backup reuses its sequences) is appended like another device's.
    func feedEvents(_ page: SyncWire.DownResponse) async throws(SyncError) -> [NewEvent] {
        let ledgerID = ledger.metadata.ledgerID
        let own = page.changes.compactMap { $0.origin?.ledger == ledgerID ? $0.origin?.seq : nil }
        var held: [UInt64: Event] = [:]
        if !own.isEmpty {
            let ledger = self.ledger
            held = try await waitingThroughTransient {
                try ledger.read { snapshot in
                    var found: [UInt64: Event] = [:]
                    for seq in own { if let event = try snapshot.event(at: seq) { found[seq] = event } }
                    return found
                }
            }
        }
        var events: [NewEvent] = []
        events.reserveCapacity(page.changes.count)
        for change in page.changes {
            let key = SyncWire.downKey(user: page.user, seq: change.seq)
            guard let bytes = change.payloadBytes else {
                throw .protocolViolation("feed entry \(change.seq) of \(page.user) (\(change.type)): payloadBase64 is not base64")
            }
            guard let origin = change.origin else {
                events.append(NewEvent(type: change.type, payload: bytes, key: key))
                continue
            }
            if origin.ledger == ledgerID, let mine = held[origin.seq], mine.type == change.type, mine.payload == bytes,
               mine.timestampMicros == origin.time {
                do {
                    events.append(try NewEvent.settled(SharedSettlement(sequence: origin.seq, position: change.seq), key: key))
                } catch {
                    throw .ledger(error)
                }
                continue
            }
            events.append(NewEvent.fromFeed(type: change.type, payload: bytes, key: key, time: origin.time, role: origin.role,
                                            origin: FeedOrigin(ledger: origin.ledger, sequence: origin.seq, key: origin.key, position: change.seq)))
        }
        return events
    }

    /// Appends one page of feed entries (one append: all or nothing). An entry the ledger
    /// refuses stops here with an error naming its feed sequence and type: nothing of the page
    /// is applied and the cursor stays, so nothing is skipped; an operator repairs the entry on
    /// the server (docs/operations.md, "A feed entry no device can apply").
    func appendFeedPage(_ events: [NewEvent], page: SyncWire.DownResponse) async throws(SyncError) -> [UInt64] {
        do {
            return try await waitingThroughTransient { try await self.ledger.append(AppendRequest(events)).sequences }
        } catch .ledger(.invalidEvent(let index, let field, let reason)) where page.changes.indices.contains(index) {
            let entry = page.changes[index]
            throw .protocolViolation("feed entry \(entry.seq) of \(page.user) (\(entry.type)) cannot be applied: \(field): \(reason); nothing from it on was applied — it needs an operator (docs/operations.md, \"A feed entry no device can apply\")")
        }
    }
}
