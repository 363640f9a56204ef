import Foundation
import InboxLedger
import InboxLedgerSync
import PostgresNIO

// Issue 23 (an outside trial of sync): events a device lost before sending them, and messages
// a backend restores after devices removed them. Kept apart from the up-ingest SQL of Store.swift.

extension Store {
    /// `POST /v1/up` with `lostThrough`: the device's compaction trimmed `after+1 … lostThrough`
    /// before it sent them. Inside the up transaction (the ledger's row is locked): adds those the
    /// server does not hold (above `acked`) to the ledger's `lost` count; the caller then moves
    /// `acked` to `through` as for any batch. Returns the number recorded now (nil: none declared).
    func recordLost(_ request: SyncWire.UpRequest, acked: UInt64, on c: PostgresConnection) async throws -> UInt64? {
        guard let lostThrough = request.lostThrough else { return nil }
        let lost = lostThrough > acked ? lostThrough - acked : 0
        if lost > 0 {
            try await c.query("UPDATE ledgers SET lost = lost + \(Int64(lost)) WHERE ledger_id = \(request.ledger)", logger: logger)
        }
        return lost
    }

    /// `POST /v1/publish` of messages the server holds as removed (a device removed them; the
    /// backend lists them again: a restore). Devices hold such a removal as their own, unsettled
    /// local change (docs/semantics.md), which a listing that still has the message does not
    /// undo; so the listing is preceded, in the same transaction, by a delta `inbox.synced` with
    /// them in `removed`, which settles the removal everywhere. Returns that change, or none.
    func settlingRemovals(user: String, listed ids: [String], on c: PostgresConnection) async throws -> [FeedChange] {
        guard !ids.isEmpty else { return [] }
        var removed: [String] = []
        for try await id in try await c.query(
            "SELECT message_id FROM messages WHERE user_id = \(user) AND message_id = ANY(\(ids)::text[]) AND removed ORDER BY message_id",
            logger: logger).decode(String.self) { removed.append(id) }
        guard !removed.isEmpty else { return [] }
        let payload = try DomainEvent.inboxSynced(InboxSync(mode: .delta, messages: [], removed: removed)).newEvent().payload
        return [FeedChange(type: BuiltInEventType.inboxSynced.rawValue, payload: String(decoding: payload, as: UTF8.self), removed: removed)]
    }
}

extension API {
    /// `lostThrough` of an up request: above `after`, at most `through`, below every event.
    func validateLost(_ body: SyncWire.UpRequest) throws {
        guard let lostThrough = body.lostThrough else { return }
        guard lostThrough > body.after, lostThrough <= body.through else {
            throw APIError.badRequest("lostThrough (\(lostThrough)) must be above after (\(body.after)) and at most through (\(body.through))")
        }
        if let first = body.events.first, first.seq <= lostThrough {
            throw APIError.badRequest("events[0].seq: \(first.seq) must be above lostThrough (\(lostThrough))")
        }
    }
}
