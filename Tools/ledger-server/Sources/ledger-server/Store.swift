import Foundation
import InboxLedger
import InboxLedgerSync
import Logging
import PostgresNIO

/// An answer other than 200: status, a short code and what was wrong; nothing was written.
struct APIError: Error {
    var status: Int
    var code: String
    var message: String
    var acked: UInt64?

    static func badRequest(_ message: String) -> APIError { APIError(status: 400, code: "bad_request", message: message) }
    static func unauthorized(_ message: String) -> APIError { APIError(status: 401, code: "unauthorized", message: message) }
    static func forbidden(_ message: String) -> APIError { APIError(status: 403, code: "forbidden", message: message) }
}

/// The schema, in order; each migration runs once, in one transaction, under an advisory lock so
/// that server processes starting together do not race.
enum Migrations {
    static let all: [(version: Int, statements: [String])] = [
        (1, [
            "CREATE TABLE users (user_id text PRIMARY KEY, feed_head bigint NOT NULL DEFAULT 0)",
            """
            CREATE TABLE ledgers (ledger_id text PRIMARY KEY, user_id text NOT NULL, acked bigint NOT NULL DEFAULT 0,
                                  created_at timestamptz NOT NULL DEFAULT now(), updated_at timestamptz NOT NULL DEFAULT now())
            """,
            """
            CREATE TABLE device_events (ledger_id text NOT NULL, seq bigint NOT NULL, user_id text NOT NULL, type text NOT NULL,
                                        key text, time_micros bigint NOT NULL, payload text NOT NULL, payload_is_base64 boolean NOT NULL,
                                        received_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (ledger_id, seq))
            """,
            "CREATE INDEX device_events_user ON device_events (user_id)",
            """
            CREATE TABLE feed (user_id text NOT NULL, seq bigint NOT NULL, type text NOT NULL, payload text NOT NULL,
                               origin_ledger text, created_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (user_id, seq))
            """,
            """
            CREATE TABLE messages (user_id text NOT NULL, message_id text NOT NULL, read boolean, removed boolean NOT NULL DEFAULT false,
                                   listing text, PRIMARY KEY (user_id, message_id))
            """,
        ]),
        // Sequences each device declared lost before sending them (docs/sync.md, "Up").
        (2, ["ALTER TABLE ledgers ADD COLUMN lost bigint NOT NULL DEFAULT 0"]),
    ]

    static func run(_ client: PostgresClient, logger: Logger) async throws {
        try await client.withTransaction(logger: logger) { c in
            try await c.query("SELECT pg_advisory_xact_lock(7231923)", logger: logger)
            try await c.query(
                "CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())",
                logger: logger)
            var applied = Set<Int>()
            for try await version in try await c.query("SELECT version FROM schema_migrations", logger: logger).decode(Int.self) {
                applied.insert(version)
            }
            for migration in all where !applied.contains(migration.version) {
                for statement in migration.statements { try await c.query(PostgresQuery(unsafeSQL: statement), logger: logger) }
                try await c.query("INSERT INTO schema_migrations (version) VALUES (\(migration.version))", logger: logger)
                logger.info("applied schema migration \(migration.version)")
            }
        }
    }
}

/// The server's PostgreSQL side: every request is one transaction.
struct Store: Sendable {
    let client: PostgresClient
    let logger: Logger

    /// `POST /v1/up` (docs/sync.md): dedup record and effect in one transaction.
    func up(user: String, request: SyncWire.UpRequest, validated: [ValidatedEvent]) async throws -> SyncWire.UpResponse {
        try await client.withTransaction(logger: logger) { c in
            // Creates the ledger's row bound to this user, or locks the existing one.
            var owner = "", acked: Int64 = 0
            for try await (o, a) in try await c.query("""
                INSERT INTO ledgers (ledger_id, user_id) VALUES (\(request.ledger), \(user))
                ON CONFLICT (ledger_id) DO UPDATE SET updated_at = now() RETURNING user_id, acked
                """, logger: logger).decode((String, Int64).self) {
                owner = o
                acked = a
            }
            guard owner == user else { throw APIError.forbidden("ledger \(request.ledger) belongs to another user") }
            guard request.after <= UInt64(acked) else {
                throw APIError(status: 409, code: "gap", message: "the batch starts after \(request.after) but the server holds this ledger only through \(acked)", acked: UInt64(acked))
            }
            let lost = try await recordLost(request, acked: UInt64(acked), on: c)
            let fresh = validated.filter { $0.wire.seq > UInt64(acked) }
            if !fresh.isEmpty {
                let seqs = fresh.map { Int64($0.wire.seq) }, types = fresh.map(\.wire.type)
                let keys = fresh.map { $0.wire.key ?? "" }, times = fresh.map(\.wire.time)
                let payloads = fresh.map { $0.wire.payload ?? $0.wire.payloadBase64 ?? "" }
                let binary = fresh.map { $0.wire.payload == nil }
                var inserted = 0
                for try await _ in try await c.query("""
                    INSERT INTO device_events (ledger_id, seq, user_id, type, key, time_micros, payload, payload_is_base64)
                    SELECT \(request.ledger), s, \(user), t, NULLIF(k, ''), tm, p, b
                    FROM unnest(\(seqs)::int8[], \(types)::text[], \(keys)::text[], \(times)::int8[], \(payloads)::text[], \(binary)::bool[]) AS u(s, t, k, tm, p, b)
                    ON CONFLICT DO NOTHING RETURNING seq
                    """, logger: logger).decode(Int64.self) { inserted += 1 }
                // The ledger's row lock serialises its batches, so every event above `acked` is new.
                guard inserted == fresh.count else { throw APIError(status: 500, code: "internal", message: "device_events above acked already present") }
                let changes = fresh.flatMap(\.feedChanges)
                try await appendToFeed(user: user, origin: request.ledger, changes: changes, on: c)
            }
            let newAcked = max(UInt64(acked), request.through)
            try await c.query("UPDATE ledgers SET acked = \(Int64(newAcked)) WHERE ledger_id = \(request.ledger)", logger: logger)
            return SyncWire.UpResponse(user: user, ledger: request.ledger, acked: newAcked, applied: fresh.count,
                                       duplicates: validated.count - fresh.count, lost: lost)
        }
    }

    /// Appends `changes` to the user's feed (dense numbers under the user row's lock), applies
    /// them to the server's message state and notifies every server process.
    func appendToFeed(user: String, origin: String?, changes: [FeedChange], on c: PostgresConnection) async throws {
        guard !changes.isEmpty else { return }
        var head: Int64 = 0
        for try await h in try await c.query("""
            INSERT INTO users (user_id, feed_head) VALUES (\(user), \(Int64(changes.count)))
            ON CONFLICT (user_id) DO UPDATE SET feed_head = users.feed_head + EXCLUDED.feed_head RETURNING feed_head
            """, logger: logger).decode(Int64.self) { head = h }
        let first = head - Int64(changes.count) + 1
        let seqs = (0..<changes.count).map { first + Int64($0) }
        let types = changes.map(\.type), payloads = changes.map(\.payload)
        try await c.query("""
            INSERT INTO feed (user_id, seq, type, payload, origin_ledger)
            SELECT \(user), s, t, p, \(origin) FROM unnest(\(seqs)::int8[], \(types)::text[], \(payloads)::text[]) AS u(s, t, p)
            """, logger: logger)
        // The server's state: the last read flag per message, removals (ON CONFLICT may touch a row once).
        var reads: [String: Bool] = [:], removed = Set<String>(), listings: [String: String] = [:]
        for change in changes {
            for (id, flag) in change.reads { reads[id] = flag }
            removed.formUnion(change.removed)
            for (id, listing) in change.listings { listings[id] = listing }
        }
        if !reads.isEmpty {
            let ids = Array(reads.keys), flags = ids.map { reads[$0] ?? false }
            // Only messages the server knows (listed, or read before): a device's read of an id never
            // listed keeps its device event and feed entry but creates no row (docs/sync.md, "Up").
            try await c.query("""
                UPDATE messages SET read = u.r FROM unnest(\(ids)::text[], \(flags)::bool[]) AS u(i, r)
                WHERE messages.user_id = \(user) AND messages.message_id = u.i
                """, logger: logger)
        }
        if !removed.isEmpty {
            let ids = Array(removed)
            try await c.query("""
                UPDATE messages SET removed = true WHERE user_id = \(user) AND message_id = ANY(\(ids)::text[])
                """, logger: logger)
        }
        if !listings.isEmpty {
            let ids = Array(listings.keys), texts = ids.map { listings[$0] ?? "" }
            try await c.query("""
                INSERT INTO messages (user_id, message_id, listing, removed) SELECT \(user), i, l, false FROM unnest(\(ids)::text[], \(texts)::text[]) AS u(i, l)
                ON CONFLICT (user_id, message_id) DO UPDATE SET listing = EXCLUDED.listing, removed = false
                """, logger: logger)
        }
        try await c.query("SELECT pg_notify('ledger_feed', \(user))", logger: logger)
    }

    /// The server's read flags of `ids` (for listings).
    func readFlags(user: String, ids: [String], on c: PostgresConnection) async throws -> [String: Bool] {
        var flags: [String: Bool] = [:]
        for try await (id, read) in try await c.query(
            "SELECT message_id, read FROM messages WHERE user_id = \(user) AND message_id = ANY(\(ids)::text[]) AND read IS NOT NULL",
            logger: logger).decode((String, Bool).self) { flags[id] = read }
        return flags
    }

    /// `POST /v1/publish`: one delta listing, each message with the server's read flag.
    func publish(user: String, request: SyncWire.PublishRequest) async throws -> SyncWire.PublishResponse {
        try await client.withTransaction(logger: logger) { c in
            // Lock the feed first so a read applied concurrently is either in the flags or after the listing.
            try await c.query("INSERT INTO users (user_id) VALUES (\(user)) ON CONFLICT (user_id) DO UPDATE SET feed_head = users.feed_head", logger: logger)
            let flags = try await readFlags(user: user, ids: request.messages.map(\.id), on: c)
            var messages = request.messages
            for i in messages.indices where messages[i].read == nil { messages[i].read = flags[messages[i].id] }
            let sync = InboxSync(mode: .delta, messages: messages, removed: request.removed ?? [])
            let payload = try DomainEvent.inboxSynced(sync).newEvent().payload
            _ = try DomainEvent.decode(type: BuiltInEventType.inboxSynced.rawValue, payload: payload)
            var listings: [String: String] = [:]
            for message in messages {
                listings[message.id] = String(decoding: try JSONEncoder().encode(message), as: UTF8.self)
            }
            let change = FeedChange(type: BuiltInEventType.inboxSynced.rawValue, payload: String(decoding: payload, as: UTF8.self),
                                    reads: [], removed: request.removed ?? [], listings: listings.map { ($0.key, $0.value) })
            let settle = try await settlingRemovals(user: user, listed: messages.map(\.id), on: c)
            try await appendToFeed(user: user, origin: nil, changes: settle + [change], on: c)
            var head: Int64 = 0
            for try await h in try await c.query("SELECT feed_head FROM users WHERE user_id = \(user)", logger: logger).decode(Int64.self) { head = h }
            return SyncWire.PublishResponse(seq: UInt64(head))
        }
    }

    /// `GET /v1/down`: the feed after `after`.
    func feed(user: String, after: UInt64, limit: Int) async throws -> SyncWire.DownResponse {
        try await client.withConnection { c in
            var changes: [SyncWire.Change] = []
            for try await (seq, type, payload) in try await c.query(
                "SELECT seq, type, payload FROM feed WHERE user_id = \(user) AND seq > \(Int64(after)) ORDER BY seq LIMIT \(limit)",
                logger: logger).decode((Int64, String, String).self) {
                changes.append(SyncWire.Change(seq: UInt64(seq), type: type, payload: payload))
            }
            var head: Int64 = 0
            for try await h in try await c.query("SELECT feed_head FROM users WHERE user_id = \(user)", logger: logger).decode(Int64.self) { head = h }
            return SyncWire.DownResponse(user: user, head: UInt64(max(head, Int64(changes.last?.seq ?? 0))), changes: changes)
        }
    }

    /// `GET /v1/state`.
    func state(user: String) async throws -> SyncWire.ServerState {
        try await client.withConnection { c in
            var messages: [SyncWire.ServerState.Message] = []
            for try await (id, read, removed) in try await c.query(
                "SELECT message_id, read, removed FROM messages WHERE user_id = \(user) ORDER BY message_id", logger: logger)
                .decode((String, Bool?, Bool).self) {
                messages.append(.init(id: id, read: read, removed: removed))
            }
            var ledgers: [SyncWire.ServerState.LedgerState] = []
            for try await (id, acked, lost) in try await c.query(
                "SELECT ledger_id, acked, lost FROM ledgers WHERE user_id = \(user) ORDER BY ledger_id", logger: logger).decode((String, Int64, Int64).self) {
                ledgers.append(.init(ledger: id, acked: UInt64(acked), lost: UInt64(lost)))
            }
            var head: Int64 = 0, count = 0
            for try await h in try await c.query("SELECT feed_head FROM users WHERE user_id = \(user)", logger: logger).decode(Int64.self) { head = h }
            for try await n in try await c.query("SELECT count(*) FROM device_events WHERE user_id = \(user)", logger: logger).decode(Int64.self) { count = Int(n) }
            return SyncWire.ServerState(user: user, head: UInt64(head), messages: messages, ledgers: ledgers, deviceEvents: count)
        }
    }
}

/// What one feed entry does: the event devices append, and its effect on the server's state.
struct FeedChange: Sendable {
    var type: String
    var payload: String
    var reads: [(String, Bool)] = []
    var removed: [String] = []
    var listings: [(String, String)] = []
}

/// A device event checked by the ledger's own decoder, with the feed change it makes.
struct ValidatedEvent: Sendable {
    var wire: SyncWire.UpEvent
    var feedChanges: [FeedChange]
}
