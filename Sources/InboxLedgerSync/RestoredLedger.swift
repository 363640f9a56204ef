import InboxLedger

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
