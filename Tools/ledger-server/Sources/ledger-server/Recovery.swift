import Foundation
import InboxLedger
import InboxLedgerSync
import PostgresNIO

// Events a device lost before sending them (its compaction trimmed them): recorded beside the
// up-ingest statement of Store.swift, in the same transaction.

extension Store {
    /// `POST /v1/up` with `lostThrough`: the device's compaction trimmed `after+1 … lostThrough`
    /// before it sent them. Inside the up transaction (the ledger's row locked here): adds those the
    /// server does not hold (above `acked`) to the ledger's `lost` count; the caller then moves
    /// `acked` to `through` as for any batch. Returns the number recorded now (nil: none declared).
    func recordLost(_ request: SyncWire.UpRequest, user: String, on c: PostgresConnection) async throws -> UInt64? {
        guard let lostThrough = request.lostThrough else { return nil }
        // Creates or locks the ledger's row, as `ledger_up` does next in this transaction (which
        // refuses another user's ledger and rolls this back with it).
        var acked: UInt64 = 0
        for try await a in try await c.query("""
            INSERT INTO ledgers (ledger_id, user_id) VALUES (\(request.ledger), \(user))
            ON CONFLICT (ledger_id) DO UPDATE SET updated_at = now() RETURNING acked
            """, logger: logger).decode(Int64.self) { acked = UInt64(max(0, a)) }
        let lost = lostThrough > acked ? lostThrough - acked : 0
        if lost > 0 {
            try await c.query("UPDATE ledgers SET lost = lost + \(Int64(lost)) WHERE ledger_id = \(request.ledger)", logger: logger)
        }
        return lost
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
