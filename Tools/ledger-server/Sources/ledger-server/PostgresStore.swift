import Foundation
import InboxLedgerSync
import Logging
import PostgresNIO
import ServiceLifecycle

/// The server's store: PostgreSQL (the schema of ``Migrations``), shared by any number of server
/// processes. Every request is one transaction, on a connection that ``Database`` leases (503
/// when the database is down); long polls are woken across processes by ``FeedNotifier``
/// (`LISTEN`/`NOTIFY ledger_feed`).
struct PostgresStore: SyncStore {
    /// The pool, its health and the error mapping.
    let database: Database
    /// Wakes this process's long polls, and the other processes' by `NOTIFY`.
    let notifier: FeedNotifier
    /// The server's logger.
    var logger: Logger { database.logger }

    /// A store on `database`, whose notifier wakes `longPolls`.
    init(database: Database, longPolls: LongPolls = LongPolls()) {
        self.database = database
        self.notifier = FeedNotifier(database: database, longPolls: longPolls)
    }

    /// What the application runs beside the HTTP server: the pool and the notifier.
    var services: [any Service] { [database.client, notifier] }

    /// The notifier's long polls.
    var longPolls: LongPolls { notifier.longPolls }

    /// Down while the probe (``FeedNotifier``) or a request saw the database fail.
    func health() -> StoreHealth {
        switch database.health.withLock({ $0 }) {
        case .up: .up
        case .down(let reason): .down("unreachable at \(database.address): \(reason)")
        }
    }

    /// Wakes this process's long polls of `user` at once and `NOTIFY`s the others (coalesced).
    func announce(_ user: String) { notifier.announce(user) }

    /// ``Database/apiError(for:)``: the function's refusals by SQLSTATE, 400 for a value
    /// PostgreSQL refused, 503 when it is unreachable.
    func apiError(for error: any Error) -> APIError? { database.apiError(for: error) }

    /// `POST /v1/up` (docs/sync.md): the dedup record, the declared losses and the effect in one
    /// statement, `SELECT ledger_up_v5($batch)` (migration 7), its own transaction. The batch
    /// carries every event with its feed entries; the function writes those of the new events
    /// (above `acked`, or reusing a sequence with another event).
    func up(_ batch: UpBatch) async throws -> UpOutcome {
        let call: PostgresQuery = try "SELECT ledger_up_v5(\(batch))"
        let logger = self.logger
        return try await database.withConnection { c in
            var outcome: UpOutcome?
            for try await answer in try await c.query(call, logger: logger).decode(UpOutcome.self) { outcome = answer }
            guard let outcome else { throw APIError(.internal, "ledger_up_v5 answered no row") }
            return outcome
        }
    }

    /// `POST /v1/publish`: one delta listing, each message with the server's read flag, then the
    /// custom events, through the same `ledger_feed_append_v3` as a device batch's effects.
    func publish(_ publication: Publication) async throws -> SyncWire.PublishResponse {
        let logger = self.logger
        return try await database.withConnection { c in
            try await c.query("BEGIN", logger: logger)
            do {
                let answer = try await Self.publish(publication, on: c, logger: logger)
                try await c.query("COMMIT", logger: logger)
                return answer
            } catch {
                _ = try? await c.query("ROLLBACK", logger: logger)  // the error that matters is `error`
                throw error
            }
        }
    }

    /// The publish's statements on `c`, inside the caller's transaction.
    private static func publish(_ publication: Publication, on c: PostgresConnection, logger: Logger) async throws -> SyncWire.PublishResponse {
        let user = publication.user
        // Lock the feed first so a read applied concurrently is either in the flags or after the
        // listing, and the head stays what it is until the commit: the events' own positions.
        var head: Int64 = 0
        for try await h in try await c.query(
            "INSERT INTO users (user_id) VALUES (\(user)) ON CONFLICT (user_id) DO UPDATE SET feed_head = users.feed_head RETURNING feed_head",
            logger: logger).decode(Int64.self) { head = h }
        // The entries as ledger_feed_append_v3 reads them: events in the batch's shape, the
        // listing (its removals with it) first, then each custom event with its origin's seq.
        var events: [UpBatch.Event] = []
        var listingIDs: [String] = [], listings: [String] = []
        if publication.hasListing {
            let ids = publication.request.messages.map(\.id)
            var flags: [String: Bool] = [:]
            var removedHere = Set<String>()
            for try await (id, read, removed) in try await c.query(
                "SELECT message_id, read, removed FROM messages WHERE user_id = \(user) AND message_id = ANY(\(ids)::text[])",
                logger: logger).decode((String, Bool?, Bool).self) {
                if let read { flags[id] = read }
                if removed { removedHere.insert(id) }
            }
            // Removed messages stay removed; the server's flags fill those without one (PublishListing).
            let listing = try PublishListing(publication.request, flags: flags, removedHere: removedHere)
            events.append(UpBatch.Event(seq: 0, type: PublishListing.type, key: nil, time: publication.time, payload: listing.payload, base64: false,
                                        feed: [.event], removed: listing.removed))
            listingIDs = listing.listingIDs
            listings = listing.listings
        }
        for (row, event) in zip(publication.eventRows(first: UInt64(head) + UInt64(events.count) + 1), publication.events) {
            events.append(UpBatch.Event(seq: Int64(row.origin?.seq ?? 0), type: event.type, key: event.key, time: publication.time,
                                        payload: event.payload, base64: event.base64, feed: [.custom(role: Publication.role)]))
        }
        let document = String(decoding: try JSONEncoder().encode(events), as: UTF8.self)
        var appended: Int64 = 0
        for try await n in try await c.query("""
            SELECT ledger_feed_append_v3(\(user), NULL, \(publication.maxCustomEntries), \(document)::jsonb, \(listingIDs)::text[], \(listings)::text[])
            """, logger: logger).decode(Int64.self) { appended = n }
        let expected = Int64(events.count)
        guard appended == expected else { throw APIError(.internal, "ledger_feed_append_v3 appended \(appended) of \(expected) entries") }
        return SyncWire.PublishResponse(seq: UInt64(head + appended))
    }

    /// The statement of one page of `user`'s feed after `after`: the head and at most `limit`
    /// entries, from one snapshot. The feed is dense (the user row's lock numbers it, nothing
    /// deletes from it), so the page is the range `after+1 … after+limit`, and the statement
    /// says so: bounded on both sides, it reads at most `limit` rows whatever plan PostgreSQL
    /// picks. With only `seq > after … LIMIT`, a planner whose statistics lag (a feed that grew
    /// since the last `ANALYZE`, or one user far above the average) picked a bitmap scan of
    /// everything after the cursor and a sort, for every page: a device catching up on 100,000
    /// entries read 10 million rows (docs/sync.md, "Performance").
    static func feedPage(user: String, after: UInt64, limit: Int) -> PostgresQuery {
        let from = Int64(clamping: after)
        let (sum, overflow) = from.addingReportingOverflow(Int64(limit))
        let through = overflow ? Int64.max : sum
        return """
            SELECT u.feed_head, f.seq, f.type, f.payload, f.payload_is_base64, f.origin_ledger, f.origin_seq, f.origin_time,
                   f.origin_role, f.origin_key FROM users u
            LEFT JOIN LATERAL (SELECT seq, type, payload, payload_is_base64, origin_ledger, origin_seq, origin_time, origin_role, origin_key
                               FROM feed WHERE user_id = u.user_id AND seq > \(from) AND seq <= \(through) ORDER BY seq LIMIT \(limit)) f ON true
            WHERE u.user_id = \(user) ORDER BY f.seq
            """
    }

    /// `GET /v1/down`: the feed after `after`.
    func feed(user: String, after: UInt64, limit: Int) async throws -> SyncWire.DownResponse {
        let logger = self.logger
        return try await database.withConnection { c in
            // The entries and the head in ONE statement, so one snapshot: a batch commits its feed
            // entries and `feed_head` together, and two statements could see the head of a batch
            // whose entries the first did not (an empty page below its head, issue 40).
            // A custom entry (origin_role set) carries its origin and, as the feed holds it, its
            // payload in base64 when its bytes are not UTF-8 or hold U+0000.
            var changes: [SyncWire.Change] = []
            var head: Int64 = 0
            for try await (h, seq, type, payload, base64, ledger, originSeq, time, role, key) in try await c.query(
                Self.feedPage(user: user, after: after, limit: limit), logger: logger
            ).decode((Int64, Int64?, String?, String?, Bool?, String?, Int64?, Int64?, String?, String?).self) {
                head = h
                guard let seq, let type, let payload else { continue }
                var origin: SyncWire.ChangeOrigin?
                if let role {
                    guard let originSeq, let time else { throw APIError(.internal, "feed entry \(seq) of \(user) has an origin role but no origin sequence or time") }
                    origin = SyncWire.ChangeOrigin(ledger: ledger, seq: UInt64(originSeq), time: time, role: role, key: key)
                }
                changes.append(UpBatch.FeedRow(type: type, payload: payload, base64: base64 ?? false, origin: origin).change(seq: UInt64(seq)))
            }
            return SyncWire.DownResponse(user: user, head: UInt64(max(head, Int64(changes.last?.seq ?? 0))), changes: changes)
        }
    }

    /// `GET /v1/state`: a page of at most `limit` messages after `after` (byte order: `COLLATE "C"`),
    /// the ledgers, the counts.
    func state(user: String, after: String?, limit: Int) async throws -> SyncWire.ServerState {
        let logger = self.logger
        return try await database.withConnection { c in
            var messages: [SyncWire.ServerState.Message] = []
            let from = after ?? ""
            // One more than the page: whether another page follows.
            for try await (id, read, removed) in try await c.query(
                "SELECT message_id, read, removed FROM messages WHERE user_id = \(user) AND message_id COLLATE \"C\" > \(from) ORDER BY message_id COLLATE \"C\" LIMIT \(limit + 1)", logger: logger)
                .decode((String, Bool?, Bool).self) {
                messages.append(.init(id: id, read: read, removed: removed))
            }
            var nextAfter: String?
            if messages.count > limit {
                messages.removeLast()
                nextAfter = messages.last?.id
            }
            var ledgers: [SyncWire.ServerState.LedgerState] = []
            for try await (id, acked, lost, reused, refused) in try await c.query(
                "SELECT ledger_id, acked, lost, reused, refused FROM ledgers WHERE user_id = \(user) ORDER BY ledger_id", logger: logger)
                .decode((String, Int64, Int64, Int64, Int64).self) {
                ledgers.append(.init(ledger: id, acked: UInt64(acked), lost: UInt64(lost), reused: UInt64(reused), refused: UInt64(refused)))
            }
            var head: Int64 = 0, count = 0
            for try await h in try await c.query("SELECT feed_head FROM users WHERE user_id = \(user)", logger: logger).decode(Int64.self) { head = h }
            for try await n in try await c.query("SELECT (SELECT count(*) FROM device_events WHERE user_id = \(user)) + (SELECT count(*) FROM device_events_replaced WHERE user_id = \(user))", logger: logger).decode(Int64.self) { count = Int(n) }
            return SyncWire.ServerState(user: user, head: UInt64(head), messages: messages, nextAfter: nextAfter, ledgers: ledgers, deviceEvents: count)
        }
    }
}

extension UpOutcome: PostgresDecodable {}  // from the function's jsonb answer, with JSONDecoder
