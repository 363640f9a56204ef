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
        // The whole of `POST /v1/up` in one statement, so a batch costs one round trip and one
        // commit instead of nine (docs/sync.md, "Performance"). Called outside any explicit
        // transaction, the function runs in the statement's own transaction: the deduplication
        // record and the effect commit together, and a refusal (RAISE) rolls everything back —
        // including the `updated_at` touch — so nothing is written on a 4xx. It does not NOTIFY: a
        // transaction that notifies holds a database-wide lock through its commit's WAL flush, which
        // serialised every batch's commit (no group commit); the server notifies after the commit
        // instead (FeedNotifier.announce).
        (2, [
            """
            CREATE FUNCTION ledger_up(p_ledger text, p_user text, p_after bigint, p_through bigint,
                e_seq bigint[], e_type text[], e_key text[], e_time bigint[], e_payload text[], e_base64 boolean[],
                f_event bigint[], f_type text[], f_payload text[],
                r_event bigint[], r_id text[], r_read boolean[],
                x_event bigint[], x_id text[])
            RETURNS TABLE (out_acked bigint, out_applied bigint, out_changes bigint) LANGUAGE plpgsql AS $fn$
            DECLARE
                v_owner text; v_acked bigint; v_applied bigint; v_changes bigint; v_head bigint;
            BEGIN
                -- Creates the ledger's row bound to this user, or locks the existing one: the lock
                -- serialises this ledger's batches, so every event above acked is new.
                INSERT INTO ledgers AS l (ledger_id, user_id) VALUES (p_ledger, p_user)
                ON CONFLICT (ledger_id) DO UPDATE SET updated_at = now() RETURNING l.user_id, l.acked INTO v_owner, v_acked;
                IF v_owner <> p_user THEN
                    RAISE EXCEPTION USING ERRCODE = 'LG403', MESSAGE = 'ledger ' || p_ledger || ' belongs to another user';
                END IF;
                IF p_after > v_acked THEN
                    RAISE EXCEPTION USING ERRCODE = 'LG409', DETAIL = v_acked::text,
                        MESSAGE = 'the batch starts after ' || p_after || ' but the server holds this ledger only through ' || v_acked;
                END IF;
                -- The deduplication record (a key already present is a bug: unique_violation, rolled back).
                INSERT INTO device_events (ledger_id, seq, user_id, type, key, time_micros, payload, payload_is_base64)
                SELECT p_ledger, s, p_user, t, NULLIF(k, ''), tm, p, b
                FROM unnest(e_seq, e_type, e_key, e_time, e_payload, e_base64) AS u(s, t, k, tm, p, b) WHERE s > v_acked;
                GET DIAGNOSTICS v_applied = ROW_COUNT;
                -- The effect: dense feed numbers reserved at once under the user row's lock, in event order.
                SELECT count(*) INTO v_changes FROM unnest(f_event) AS f(s) WHERE s > v_acked;
                IF v_changes > 0 THEN
                    INSERT INTO users AS u (user_id, feed_head) VALUES (p_user, v_changes)
                    ON CONFLICT (user_id) DO UPDATE SET feed_head = u.feed_head + EXCLUDED.feed_head RETURNING u.feed_head INTO v_head;
                    INSERT INTO feed (user_id, seq, type, payload, origin_ledger)
                    SELECT p_user, v_head - v_changes + row_number() OVER (ORDER BY o), t, p, p_ledger
                    FROM unnest(f_event, f_type, f_payload) WITH ORDINALITY AS f(s, t, p, o) WHERE s > v_acked;
                    -- The server's state: the last read flag per message, removals (an upsert touches a row once).
                    INSERT INTO messages (user_id, message_id, read)
                    SELECT DISTINCT ON (i) p_user, i, r FROM unnest(r_event, r_id, r_read) WITH ORDINALITY AS x(s, i, r, o)
                    WHERE s > v_acked ORDER BY i, o DESC
                    ON CONFLICT (user_id, message_id) DO UPDATE SET read = EXCLUDED.read;
                    INSERT INTO messages (user_id, message_id, removed)
                    SELECT DISTINCT p_user, i, true FROM unnest(x_event, x_id) AS x(s, i) WHERE s > v_acked
                    ON CONFLICT (user_id, message_id) DO UPDATE SET removed = true;
                END IF;
                UPDATE ledgers SET acked = greatest(acked, p_through) WHERE ledger_id = p_ledger RETURNING acked INTO v_acked;
                RETURN QUERY SELECT v_acked, v_applied, coalesce(v_changes, 0);
            END
            $fn$
            """,
        ]),
        // Sequences each device declared lost before sending them (docs/sync.md, "Up").
        (3, ["ALTER TABLE ledgers ADD COLUMN lost bigint NOT NULL DEFAULT 0"]),
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

    /// `POST /v1/up` (docs/sync.md): dedup record and effect in one transaction — one statement,
    /// `ledger_up` (migration 2), which filters by the locked `acked` itself. The columns carry
    /// every event and every effect tagged with its event's sequence; only those above `acked`
    /// are written.
    /// Answers the response and the number of feed entries the batch appended (to announce).
    func up(user: String, request: SyncWire.UpRequest, validated: [ValidatedEvent]) async throws -> (SyncWire.UpResponse, feedEntries: Int64) {
        let n = validated.count
        var seqs: [Int64] = [], types: [String] = [], keys: [String] = [], times: [Int64] = [], payloads: [String] = [], binary: [Bool] = []
        seqs.reserveCapacity(n); types.reserveCapacity(n); keys.reserveCapacity(n)
        times.reserveCapacity(n); payloads.reserveCapacity(n); binary.reserveCapacity(n)
        var feedEvent: [Int64] = [], feedTypes: [String] = [], feedPayloads: [String] = []
        var readEvent: [Int64] = [], readIDs: [String] = [], readFlags: [Bool] = []
        var removedEvent: [Int64] = [], removedIDs: [String] = []
        for event in validated {
            let seq = Int64(event.wire.seq)
            seqs.append(seq)
            types.append(event.wire.type)
            keys.append(event.wire.key ?? "")
            times.append(event.wire.time)
            payloads.append(event.wire.payload ?? event.wire.payloadBase64 ?? "")
            binary.append(event.wire.payload == nil)
            for change in event.feedChanges {
                // Listings enter the feed through publish only; an up effect never carries one.
                guard change.listings.isEmpty else { throw APIError(status: 500, code: "internal", message: "a device event with a listing effect") }
                feedEvent.append(seq)
                feedTypes.append(change.type)
                feedPayloads.append(change.payload)
                for (id, flag) in change.reads {
                    readEvent.append(seq)
                    readIDs.append(id)
                    readFlags.append(flag)
                }
                for id in change.removed {
                    removedEvent.append(seq)
                    removedIDs.append(id)
                }
            }
        }
        let call: PostgresQuery = """
            SELECT out_acked, out_applied, out_changes FROM ledger_up(\(request.ledger), \(user), \(Int64(request.after)), \(Int64(request.through)),
                \(seqs)::int8[], \(types)::text[], \(keys)::text[], \(times)::int8[], \(payloads)::text[], \(binary)::bool[],
                \(feedEvent)::int8[], \(feedTypes)::text[], \(feedPayloads)::text[],
                \(readEvent)::int8[], \(readIDs)::text[], \(readFlags)::bool[], \(removedEvent)::int8[], \(removedIDs)::text[])
            """
        var acked: Int64 = -1, applied: Int64 = 0, entries: Int64 = 0, lost: UInt64?
        do {
            let result: (Int64, Int64, Int64, UInt64?)
            if request.lostThrough == nil {
                // The common case: one statement, its own transaction.
                result = try await Self.decodeUp(client.query(call, logger: logger), lost: nil)
            } else {
                // Declared losses (rare): recorded in the same transaction as the batch.
                result = try await client.withTransaction(logger: logger) { c in
                    let recorded = try await recordLost(request, user: user, on: c)
                    return try await Self.decodeUp(c.query(call, logger: logger), lost: recorded)
                }
            }
            (acked, applied, entries, lost) = result
        } catch let error as PSQLError where error.serverInfo?[.sqlState] == "LG403" {
            throw APIError.forbidden(error.serverInfo?[.message] ?? "ledger \(request.ledger) belongs to another user")
        } catch let error as PSQLError where error.serverInfo?[.sqlState] == "LG409" {
            throw APIError(status: 409, code: "gap", message: error.serverInfo?[.message] ?? "gap",
                           acked: error.serverInfo?[.detail].flatMap { UInt64($0) })
        }
        guard acked >= Int64(request.through) else { throw APIError(status: 500, code: "internal", message: "ledger_up answered no acknowledgement") }
        return (SyncWire.UpResponse(user: user, ledger: request.ledger, acked: UInt64(acked), applied: Int(applied),
                                    duplicates: validated.count - Int(applied), lost: lost), entries)
    }

    /// `ledger_up`'s one row: acked, applied, feed entries (and the losses recorded beside it).
    private static func decodeUp(_ rows: PostgresRowSequence, lost: UInt64?) async throws -> (Int64, Int64, Int64, UInt64?) {
        var row: (Int64, Int64, Int64) = (-1, 0, 0)
        for try await r in rows.decode((Int64, Int64, Int64).self) { row = r }
        return (row.0, row.1, row.2, lost)
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
            try await c.query("""
                INSERT INTO messages (user_id, message_id, read) SELECT \(user), i, r FROM unnest(\(ids)::text[], \(flags)::bool[]) AS u(i, r)
                ON CONFLICT (user_id, message_id) DO UPDATE SET read = EXCLUDED.read
                """, logger: logger)
        }
        if !removed.isEmpty {
            let ids = Array(removed)
            try await c.query("""
                INSERT INTO messages (user_id, message_id, removed) SELECT \(user), i, true FROM unnest(\(ids)::text[]) AS u(i)
                ON CONFLICT (user_id, message_id) DO UPDATE SET removed = true
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
            // A message the server holds as removed (a device removed it, or the backend did)
            // stays removed: it goes out in `removed`, which settles every device's removal, and
            // never as a row that only the devices that did not remove it would show.
            var removedHere = Set<String>()
            for try await id in try await c.query(
                "SELECT message_id FROM messages WHERE user_id = \(user) AND message_id = ANY(\(request.messages.map(\.id))::text[]) AND removed",
                logger: logger).decode(String.self) { removedHere.insert(id) }
            var messages = request.messages.filter { !removedHere.contains($0.id) }
            for i in messages.indices where messages[i].read == nil { messages[i].read = flags[messages[i].id] }
            var removedIDs = request.removed ?? []
            removedIDs += request.messages.map(\.id).filter { removedHere.contains($0) && !removedIDs.contains($0) }
            let sync = InboxSync(mode: .delta, messages: messages, removed: removedIDs)
            let payload = try DomainEvent.inboxSynced(sync).newEvent().payload
            _ = try DomainEvent.decode(type: BuiltInEventType.inboxSynced.rawValue, payload: payload)
            var listings: [String: String] = [:]
            for message in messages {
                listings[message.id] = String(decoding: try JSONEncoder().encode(message), as: UTF8.self)
            }
            let change = FeedChange(type: BuiltInEventType.inboxSynced.rawValue, payload: String(decoding: payload, as: UTF8.self),
                                    reads: [], removed: removedIDs, listings: listings.map { ($0.key, $0.value) })
            try await appendToFeed(user: user, origin: nil, changes: [change], on: c)
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
