import Crypto
import Foundation
import Logging
import PostgresNIO

/// One schema migration: a number, a name and its statements, run once in one transaction.
struct Migration: Sendable {
    let version: Int
    let name: String
    let statements: [String]

    init(_ version: Int, _ name: String, _ statements: [String]) {
        self.version = version
        self.name = name
        self.statements = statements
    }

    /// SHA-256 of the statements: recorded when the migration is applied, compared at every
    /// start, so an edited migration is refused (migrations are append-only).
    var checksum: String {
        SHA256.hash(data: Data(statements.joined(separator: "\n;\n").utf8)).map { String(format: "%02x", $0) }.joined()
    }
}

/// The schema, in order: **append-only** — a change is a new migration at the end, never an edit
/// of one that shipped (its checksum is recorded where it ran). Every migration keeps the
/// previous release working on the new schema (add, never drop or rename in the same
/// release), so a rolling deploy runs old and new processes on one database
/// (docs/operations.md, "Upgrading the sync server"). Each runs once, in one transaction, under
/// an advisory lock so that server processes starting together do not race; a server that finds
/// a migration it does not know (a newer release applied it) or one that differs from its own
/// refuses to start.
enum Migrations {
    static let all: [Migration] = [
        Migration(1, "tables", [
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
        Migration(2, "ledger_up", [
            """
            CREATE FUNCTION ledger_up(p_ledger text, p_user text, p_after bigint, p_through bigint,
                e_seq bigint[], e_type text[], e_key text[], e_time bigint[], e_payload text[], e_base64 boolean[],
                f_event bigint[], f_type text[], f_payload text[],
                r_event bigint[], r_id text[], r_read boolean[],
                x_event bigint[], x_id text[])
            RETURNS TABLE (out_acked bigint, out_applied bigint, out_changes bigint) LANGUAGE plpgsql AS $fn$
            DECLARE
                v_owner text; v_acked bigint; v_new boolean; v_applied bigint; v_changes bigint; v_head bigint;
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
        Migration(3, "ledgers.lost", ["ALTER TABLE ledgers ADD COLUMN lost bigint NOT NULL DEFAULT 0"]),
        // Restored and copied ledgers (docs/sync.md, "Failure modes"): a sequence at or below
        // `acked` is a duplicate only if the server holds the same event there (type, key, time,
        // payload); another event replaces the held one, which moves to device_events_replaced,
        // and is applied. And one implementation of "append to the feed and apply the message
        // state" for both the up batch and a publish (ledger_feed_append). `ledger_up` stays for
        // the previous release during a rolling deploy.
        Migration(4, "content-dedup, ledger_feed_append, ledger_up_v2", [
            """
            CREATE TABLE device_events_replaced (ledger_id text NOT NULL, seq bigint NOT NULL, user_id text NOT NULL, type text NOT NULL,
                key text, time_micros bigint NOT NULL, payload text NOT NULL, payload_is_base64 boolean NOT NULL,
                received_at timestamptz NOT NULL, replaced_at timestamptz NOT NULL DEFAULT now())
            """,
            "CREATE INDEX device_events_replaced_seq ON device_events_replaced (ledger_id, seq)",
            "CREATE INDEX device_events_replaced_user ON device_events_replaced (user_id)",
            "ALTER TABLE ledgers ADD COLUMN reused bigint NOT NULL DEFAULT 0",
            "CREATE INDEX ledgers_user ON ledgers (user_id)",
            """
            CREATE FUNCTION ledger_feed_append(p_user text, p_origin text, f_type text[], f_payload text[],
                r_id text[], r_read boolean[], x_id text[], l_id text[], l_listing text[])
            RETURNS bigint LANGUAGE plpgsql AS $fn$
            DECLARE
                v_n bigint := coalesce(cardinality(f_type), 0); v_head bigint;
            BEGIN
                IF v_n = 0 THEN RETURN 0; END IF;
                -- Dense feed numbers reserved at once under the user row's lock, in order.
                INSERT INTO users AS u (user_id, feed_head) VALUES (p_user, v_n)
                ON CONFLICT (user_id) DO UPDATE SET feed_head = u.feed_head + EXCLUDED.feed_head RETURNING u.feed_head INTO v_head;
                INSERT INTO feed (user_id, seq, type, payload, origin_ledger)
                SELECT p_user, v_head - v_n + o, t, p, p_origin FROM unnest(f_type, f_payload) WITH ORDINALITY AS f(t, p, o);
                -- The server's state: the last read flag per message, removals, listings (an upsert touches a row once).
                INSERT INTO messages (user_id, message_id, read)
                SELECT DISTINCT ON (i) p_user, i, r FROM unnest(r_id, r_read) WITH ORDINALITY AS x(i, r, o) ORDER BY i, o DESC
                ON CONFLICT (user_id, message_id) DO UPDATE SET read = EXCLUDED.read;
                INSERT INTO messages (user_id, message_id, removed)
                SELECT DISTINCT p_user, i, true FROM unnest(x_id) AS x(i)
                ON CONFLICT (user_id, message_id) DO UPDATE SET removed = true;
                INSERT INTO messages (user_id, message_id, listing, removed)
                SELECT DISTINCT ON (i) p_user, i, l, false FROM unnest(l_id, l_listing) WITH ORDINALITY AS x(i, l, o) ORDER BY i, o DESC
                ON CONFLICT (user_id, message_id) DO UPDATE SET listing = EXCLUDED.listing, removed = false;
                RETURN v_n;
            END
            $fn$
            """,
            """
            CREATE FUNCTION ledger_up_v2(p_ledger text, p_user text, p_max_ledgers bigint, p_after bigint, p_through bigint, p_lost_through bigint,
                e_seq bigint[], e_type text[], e_key text[], e_time bigint[], e_payload text[], e_base64 boolean[],
                f_event bigint[], f_type text[], f_payload text[],
                r_event bigint[], r_id text[], r_read boolean[],
                x_event bigint[], x_id text[])
            RETURNS TABLE (out_acked bigint, out_applied bigint, out_changes bigint, out_reused bigint, out_lost bigint)
            LANGUAGE plpgsql AS $fn$
            DECLARE
                v_owner text; v_acked bigint; v_new boolean; v_applied bigint; v_changes bigint;
                v_fresh bigint[] := '{}'; v_reused bigint := 0; v_lost bigint := 0;
            BEGIN
                -- Creates the ledger's row bound to this user, or locks the existing one: the lock
                -- serialises this ledger's batches.
                INSERT INTO ledgers AS l (ledger_id, user_id) VALUES (p_ledger, p_user)
                ON CONFLICT (ledger_id) DO UPDATE SET updated_at = now() RETURNING l.user_id, l.acked, l.xmax = 0 INTO v_owner, v_acked, v_new;
                IF v_owner <> p_user THEN
                    RAISE EXCEPTION USING ERRCODE = 'LG403', MESSAGE = 'ledger ' || p_ledger || ' belongs to another user';
                END IF;
                -- The per-user bound on ledgers, checked when one is created (the raise rolls the creation back).
                IF v_new AND (SELECT count(*) FROM ledgers WHERE user_id = p_user) > p_max_ledgers THEN
                    RAISE EXCEPTION USING ERRCODE = 'LG429',
                        MESSAGE = 'user ' || p_user || ' already has ' || p_max_ledgers || ' ledgers; a new one is refused (ledger-server --ledgers-per-user)';
                END IF;
                IF p_after > v_acked THEN
                    RAISE EXCEPTION USING ERRCODE = 'LG409', DETAIL = v_acked::text,
                        MESSAGE = 'the batch starts after ' || p_after || ' but the server holds this ledger only through ' || v_acked;
                END IF;
                -- Sequences the device lost before sending them (its compaction trimmed them): those not held.
                IF p_lost_through IS NOT NULL AND p_lost_through > v_acked THEN
                    v_lost := p_lost_through - v_acked;
                    UPDATE ledgers SET lost = lost + v_lost WHERE ledger_id = p_ledger;
                END IF;
                -- At or below acked an event is a duplicate only if the server holds the same event
                -- there (or held it before a replacement); another one is new: a restored or copied
                -- ledger reusing the sequence. What was held there moves aside.
                IF EXISTS (SELECT 1 FROM unnest(e_seq) AS s WHERE s <= v_acked) THEN
                    v_fresh := ARRAY(
                        SELECT u.s FROM unnest(e_seq, e_type, e_key, e_time, e_payload, e_base64) AS u(s, t, k, tm, p, b)
                        WHERE u.s <= v_acked
                          AND NOT EXISTS (SELECT 1 FROM device_events d WHERE d.ledger_id = p_ledger AND d.seq = u.s AND d.type = u.t
                                AND d.key IS NOT DISTINCT FROM NULLIF(u.k, '') AND d.time_micros = u.tm AND d.payload = u.p AND d.payload_is_base64 = u.b)
                          AND NOT EXISTS (SELECT 1 FROM device_events_replaced d WHERE d.ledger_id = p_ledger AND d.seq = u.s AND d.type = u.t
                                AND d.key IS NOT DISTINCT FROM NULLIF(u.k, '') AND d.time_micros = u.tm AND d.payload = u.p AND d.payload_is_base64 = u.b));
                    v_reused := cardinality(v_fresh);
                    IF v_reused > 0 THEN
                        WITH moved AS (DELETE FROM device_events WHERE ledger_id = p_ledger AND seq = ANY (v_fresh) RETURNING *)
                        INSERT INTO device_events_replaced (ledger_id, seq, user_id, type, key, time_micros, payload, payload_is_base64, received_at)
                        SELECT ledger_id, seq, user_id, type, key, time_micros, payload, payload_is_base64, received_at FROM moved;
                        UPDATE ledgers SET reused = reused + v_reused WHERE ledger_id = p_ledger;
                    END IF;
                END IF;
                -- The deduplication record.
                INSERT INTO device_events (ledger_id, seq, user_id, type, key, time_micros, payload, payload_is_base64)
                SELECT p_ledger, s, p_user, t, NULLIF(k, ''), tm, p, b
                FROM unnest(e_seq, e_type, e_key, e_time, e_payload, e_base64) AS u(s, t, k, tm, p, b) WHERE s > v_acked OR s = ANY (v_fresh);
                GET DIAGNOSTICS v_applied = ROW_COUNT;
                -- The effect, of the new events only.
                IF NOT EXISTS (SELECT 1 FROM unnest(e_seq) AS s WHERE s <= v_acked) THEN
                    v_changes := ledger_feed_append(p_user, p_ledger, f_type, f_payload, r_id, r_read, x_id, '{}', '{}');
                ELSE
                    v_changes := ledger_feed_append(p_user, p_ledger,
                        ARRAY(SELECT t FROM unnest(f_event, f_type) WITH ORDINALITY AS f(s, t, o) WHERE s > v_acked OR s = ANY (v_fresh) ORDER BY o),
                        ARRAY(SELECT p FROM unnest(f_event, f_payload) WITH ORDINALITY AS f(s, p, o) WHERE s > v_acked OR s = ANY (v_fresh) ORDER BY o),
                        ARRAY(SELECT i FROM unnest(r_event, r_id) WITH ORDINALITY AS x(s, i, o) WHERE s > v_acked OR s = ANY (v_fresh) ORDER BY o),
                        ARRAY(SELECT r FROM unnest(r_event, r_read) WITH ORDINALITY AS x(s, r, o) WHERE s > v_acked OR s = ANY (v_fresh) ORDER BY o),
                        ARRAY(SELECT i FROM unnest(x_event, x_id) WITH ORDINALITY AS x(s, i, o) WHERE s > v_acked OR s = ANY (v_fresh) ORDER BY o),
                        '{}', '{}');
                END IF;
                UPDATE ledgers SET acked = greatest(acked, p_through) WHERE ledger_id = p_ledger RETURNING acked INTO v_acked;
                RETURN QUERY SELECT v_acked, v_applied, v_changes, v_reused, v_lost;
            END
            $fn$
            """,
        ]),
        // `POST /v1/up` with ONE typed argument instead of twenty positional arrays:
        // `ledger_up_v3(p_batch jsonb) RETURNS jsonb`. The batch is the server's `UpBatch`
        // (SyncStore.swift), written as compact JSON (UpBatch+JSON.swift) and sent as one jsonb parameter:
        //   {"version": 1, "user", "ledger", "maxLedgers", "after", "through", "lostThrough"?, "refused"?: [seq],
        //    "events": [{"seq", "type", "key"?, "time", "payload", "base64"?,
        //                "feed"?: [{"type"?, "payload"?}], "reads"?: [{"id", "read"}], "removed"?: [id]}]}
        // (a feed entry without type or payload appends the event's own; absent arrays are empty,
        // an absent base64 false), and the answer is an object: {"acked", "applied", "changes",
        // "reused", "lost", "refused"}.
        // Why jsonb and not a composite type: a composite's fields are positional and its type
        // is the schema's — adding a field (an effect of a new shared type, a request for
        // per-event outcomes) changes the type under every server still running (PostgreSQL
        // refuses a record with the wrong number of fields), and postgres-nio has no encoder for
        // a composite (its OID differs per database). A jsonb object is named fields: a later
        // migration replaces this function's body (CREATE OR REPLACE, same signature) to read new
        // fields and accept `version` 2 beside 1, and adds keys to the answer
        // (`"events": [{"seq", "outcome"}]`) that an older server ignores — no new function.
        // Events are an array of objects each carrying its type, payload and its own effects, so
        // an event of any shared type fits and its effects stay next to it. The rules are
        // ledger_up_v2's, unchanged (a client sees no difference); an unknown version or a batch
        // missing a field is a server bug: SQLSTATE LG500 (a 500, nothing written).
        // The price is parsing JSON (about 0.2 ms per 50 events here, where v2's binary arrays
        // cost next to nothing); the document is kept small for it (defaults omitted, the common
        // feed entry "the event itself" written `{}`), each array is read with one
        // set-returning call or jsonpath scan over the batch, and `jit = off`: the planner's
        // default estimate for jsonb set-returning functions (100 rows each) would JIT-compile a
        // 50-event batch's statements for tens of milliseconds.
        // `ledger_up_v2` and `ledger_up` stay for servers of the previous releases during a
        // rolling deploy; a later release may drop them once none runs.
        Migration(5, "ledger_up_v3 (one jsonb batch), ledgers.refused", [
            // Events a device skips because a server refused them (issue 40), counted like `lost`.
            "ALTER TABLE ledgers ADD COLUMN refused bigint NOT NULL DEFAULT 0",
            """
            CREATE FUNCTION ledger_up_v3(p_batch jsonb) RETURNS jsonb LANGUAGE plpgsql SET jit = off AS $fn$
            DECLARE
                v_ledger text := p_batch->>'ledger';
                v_user text := p_batch->>'user';
                v_max_ledgers bigint := (p_batch->>'maxLedgers')::bigint;
                v_after bigint := (p_batch->>'after')::bigint;
                v_through bigint := (p_batch->>'through')::bigint;
                v_lost_through bigint := (p_batch->>'lostThrough')::bigint;
                v_events jsonb := p_batch->'events';
                v_apply jsonb := v_events;
                v_owner text; v_acked bigint; v_new boolean; v_applied bigint; v_changes bigint;
                v_fresh bigint[] := '{}'; v_reused bigint := 0; v_lost bigint := 0; v_refused bigint := 0;
                v_types text[]; v_payloads text[]; v_read_ids text[]; v_read_flags boolean[];
            BEGIN
                IF p_batch->'version' IS DISTINCT FROM '1'::jsonb OR v_ledger IS NULL OR v_user IS NULL OR v_max_ledgers IS NULL
                   OR v_after IS NULL OR v_through IS NULL OR jsonb_typeof(v_events) IS DISTINCT FROM 'array' THEN
                    RAISE EXCEPTION USING ERRCODE = 'LG500',
                        MESSAGE = 'ledger_up_v3 takes a batch of version 1 with ledger, user, maxLedgers, after, through and events';
                END IF;
                -- Creates the ledger's row bound to this user, or locks the existing one: the lock
                -- serialises this ledger's batches.
                INSERT INTO ledgers AS l (ledger_id, user_id) VALUES (v_ledger, v_user)
                ON CONFLICT (ledger_id) DO UPDATE SET updated_at = now() RETURNING l.user_id, l.acked, l.xmax = 0 INTO v_owner, v_acked, v_new;
                IF v_owner <> v_user THEN
                    RAISE EXCEPTION USING ERRCODE = 'LG403', MESSAGE = 'ledger ' || v_ledger || ' belongs to another user';
                END IF;
                -- The per-user bound on ledgers, checked when one is created (the raise rolls the creation back).
                IF v_new AND (SELECT count(*) FROM ledgers WHERE user_id = v_user) > v_max_ledgers THEN
                    RAISE EXCEPTION USING ERRCODE = 'LG429',
                        MESSAGE = 'user ' || v_user || ' already has ' || v_max_ledgers || ' ledgers; a new one is refused (ledger-server --ledgers-per-user)';
                END IF;
                IF v_after > v_acked THEN
                    RAISE EXCEPTION USING ERRCODE = 'LG409', DETAIL = v_acked::text,
                        MESSAGE = 'the batch starts after ' || v_after || ' but the server holds this ledger only through ' || v_acked;
                END IF;
                -- Sequences the device lost before sending them (its compaction trimmed them): those not held.
                IF v_lost_through IS NOT NULL AND v_lost_through > v_acked THEN
                    v_lost := v_lost_through - v_acked;
                    UPDATE ledgers SET lost = lost + v_lost WHERE ledger_id = v_ledger;
                END IF;
                -- Events the device skips because a server refused them: those above what is held, counted once
                -- (a batch sent again declares them at or below acked).
                SELECT count(*) INTO v_refused FROM jsonb_array_elements_text(coalesce(p_batch->'refused', '[]'::jsonb)) AS r(s)
                WHERE r.s::bigint > v_acked;
                IF v_refused > 0 THEN
                    UPDATE ledgers SET refused = refused + v_refused WHERE ledger_id = v_ledger;
                END IF;
                -- At or below acked an event is a duplicate only if the server holds the same event
                -- there (or held it before a replacement); another one is new: a restored or copied
                -- ledger reusing the sequence. What was held there moves aside; v_apply keeps the new events.
                IF jsonb_path_exists(v_events, '$[*] ? (@.seq <= $acked)', jsonb_build_object('acked', v_acked)) THEN
                    v_fresh := ARRAY(
                        SELECT e.seq FROM jsonb_to_recordset(v_events) AS e(seq bigint, type text, key text, "time" bigint, payload text, base64 boolean)
                        WHERE e.seq <= v_acked
                          AND NOT EXISTS (SELECT 1 FROM device_events d WHERE d.ledger_id = v_ledger AND d.seq = e.seq AND d.type = e.type
                                AND d.key IS NOT DISTINCT FROM e.key AND d.time_micros = e."time" AND d.payload = e.payload AND d.payload_is_base64 = coalesce(e.base64, false))
                          AND NOT EXISTS (SELECT 1 FROM device_events_replaced d WHERE d.ledger_id = v_ledger AND d.seq = e.seq AND d.type = e.type
                                AND d.key IS NOT DISTINCT FROM e.key AND d.time_micros = e."time" AND d.payload = e.payload AND d.payload_is_base64 = coalesce(e.base64, false)));
                    v_reused := cardinality(v_fresh);
                    v_apply := jsonb_path_query_array(v_events, '$[*] ? (@.seq > $acked || @.seq == $fresh[*])',
                                                      jsonb_build_object('acked', v_acked, 'fresh', to_jsonb(v_fresh)));
                    IF v_reused > 0 THEN
                        WITH moved AS (DELETE FROM device_events WHERE ledger_id = v_ledger AND seq = ANY (v_fresh) RETURNING *)
                        INSERT INTO device_events_replaced (ledger_id, seq, user_id, type, key, time_micros, payload, payload_is_base64, received_at)
                        SELECT ledger_id, seq, user_id, type, key, time_micros, payload, payload_is_base64, received_at FROM moved;
                        UPDATE ledgers SET reused = reused + v_reused WHERE ledger_id = v_ledger;
                    END IF;
                END IF;
                -- The deduplication record.
                INSERT INTO device_events (ledger_id, seq, user_id, type, key, time_micros, payload, payload_is_base64)
                SELECT v_ledger, e.seq, v_user, e.type, e.key, e."time", e.payload, coalesce(e.base64, false)
                FROM jsonb_to_recordset(v_apply) AS e(seq bigint, type text, key text, "time" bigint, payload text, base64 boolean);
                GET DIAGNOSTICS v_applied = ROW_COUNT;
                -- The effect, of the new events only: their feed entries in event order (an entry without
                -- type or payload is the event's own), their reads in order (the last flag of a message
                -- wins), their removals — through the same ledger_feed_append as a publish.
                SELECT array_agg(coalesce(f.type, e.type) ORDER BY e.o, f.o), array_agg(coalesce(f.payload, e.payload) ORDER BY e.o, f.o)
                INTO v_types, v_payloads
                FROM ROWS FROM (jsonb_to_recordset(v_apply) AS (type text, payload text, feed jsonb)) WITH ORDINALITY AS e(type, payload, feed, o)
                CROSS JOIN LATERAL ROWS FROM (jsonb_to_recordset(e.feed) AS (type text, payload text)) WITH ORDINALITY AS f(type, payload, o)
                WHERE e.feed IS NOT NULL;
                SELECT array_agg(r->>'id' ORDER BY o), array_agg((r->>'read')::boolean ORDER BY o) INTO v_read_ids, v_read_flags
                FROM jsonb_path_query(v_apply, '$[*].reads[*]') WITH ORDINALITY AS x(r, o);
                v_changes := ledger_feed_append(v_user, v_ledger, v_types, v_payloads, v_read_ids, v_read_flags,
                    ARRAY(SELECT i #>> '{}' FROM jsonb_path_query(v_apply, '$[*].removed[*]') AS x(i)), '{}', '{}');
                UPDATE ledgers SET acked = greatest(acked, v_through) WHERE ledger_id = v_ledger RETURNING acked INTO v_acked;
                RETURN jsonb_build_object('acked', v_acked, 'applied', v_applied, 'changes', v_changes, 'reused', v_reused, 'lost', v_lost,
                                          'refused', v_refused);
            END
            $fn$
            """,
        ]),
        // Custom events go down the feed (docs/sync.md, "Down"): every custom event a device
        // sends — and every one the backend publishes — is appended to its user's feed in the
        // order the server applies it, carrying its envelope where it was made (`origin_*`:
        // the device's ledger and sequence, its commit time, the appending process's role, its
        // key) and its payload in the form `device_events` keeps (base64 when the bytes are not
        // UTF-8 or hold U+0000: `payload_is_base64`). A built-in entry (a listing, a read, a
        // removal) has no origin role: `origin_role IS NULL` tells the two apart (`origin_ledger`
        // has always held the ledger whose batch made an entry, built-in or not). `users.custom_entries`
        // counts a user's custom entries, bounded by `--custom-entries-per-user` (LG429).
        // New functions rather than new bodies under the old names: `ledger_feed_append`'s
        // arguments change (a function's signature is its name), and `ledger_up_v3` stays exactly
        // the code the previous release was tested with while it still runs during a rolling
        // deploy (its batches make no custom entries). `ledger_up_v4` takes the batch of
        // version 2: `maxCustomEntries`, and a feed entry `{"role": R}` — the event itself, its
        // own type and stored payload, with the origin {ledger, seq, time, role R, key}.
        // `ledger_feed_append_v2` — still the one implementation of "append to the feed and apply
        // the message state", for a batch and a publish alike — takes the events themselves
        // (the batch's shape: each with its `feed` entries, `reads` and `removed`) instead of
        // parallel arrays: it numbers and inserts the entries straight from the jsonb, where
        // aggregating seven arrays and unnesting them again cost about a fifth of the function
        // (docs/sync.md, "Performance"). Also cheaper than `ledger_up_v3`, for every batch: the
        // ledger's row is locked with `SELECT … FOR UPDATE` (an upsert only when it is new) and
        // written once at the end (acked, lost, refused, reused together); a read flag or a
        // removal the server already holds writes no new row version; a batch without declared
        // refusals or removals, or whose first event is above `acked`, skips those statements
        // and scans.
        Migration(6, "custom events in the feed: feed.origin_*, users.custom_entries, ledger_up_v4", [
            """
            ALTER TABLE feed ADD COLUMN payload_is_base64 boolean NOT NULL DEFAULT false, ADD COLUMN origin_seq bigint,
                ADD COLUMN origin_time bigint, ADD COLUMN origin_role text, ADD COLUMN origin_key text
            """,
            "ALTER TABLE users ADD COLUMN custom_entries bigint NOT NULL DEFAULT 0",
            """
            CREATE FUNCTION ledger_feed_append_v2(p_user text, p_origin text, p_max_custom bigint, p_events jsonb, l_id text[], l_listing text[])
            RETURNS bigint LANGUAGE plpgsql AS $fn$
            DECLARE
                v_n bigint; v_custom bigint; v_head bigint; v_held bigint;
            BEGIN
                -- The entries: each event's `feed`, in order; `{}` the event itself, `{"role": R}` a custom entry.
                SELECT count(*), count(f.role) INTO v_n, v_custom
                FROM jsonb_to_recordset(p_events) AS e(feed jsonb) CROSS JOIN LATERAL jsonb_to_recordset(e.feed) AS f(role text)
                WHERE e.feed IS NOT NULL;
                IF v_n = 0 THEN RETURN 0; END IF;
                -- Dense feed numbers reserved at once under the user row's lock, in order; the
                -- custom entries counted under the same lock.
                INSERT INTO users AS u (user_id, feed_head, custom_entries) VALUES (p_user, v_n, v_custom)
                ON CONFLICT (user_id) DO UPDATE SET feed_head = u.feed_head + EXCLUDED.feed_head,
                    custom_entries = u.custom_entries + EXCLUDED.custom_entries
                RETURNING u.feed_head, u.custom_entries INTO v_head, v_held;
                -- The per-user bound on custom entries (the raise rolls the whole request back).
                IF v_custom > 0 AND v_held > p_max_custom THEN
                    RAISE EXCEPTION USING ERRCODE = 'LG429',
                        MESSAGE = 'user ' || p_user || ' already holds ' || (v_held - v_custom) || ' of at most ' || p_max_custom
                            || ' custom feed entries; the ' || v_custom || ' this request adds are refused (ledger-server --custom-entries-per-user)';
                END IF;
                -- An entry without type or payload is the event's own, its payload in the stored form;
                -- one with a role carries the event's origin.
                INSERT INTO feed (user_id, seq, type, payload, origin_ledger, payload_is_base64, origin_seq, origin_time, origin_role, origin_key)
                SELECT p_user, v_head - v_n + row_number() OVER (ORDER BY e.o, f.o), coalesce(f.type, e.type), coalesce(f.payload, e.payload),
                       p_origin, f.payload IS NULL AND coalesce(e.base64, false), CASE WHEN f.role IS NOT NULL THEN e.seq END,
                       CASE WHEN f.role IS NOT NULL THEN e."time" END, f.role, CASE WHEN f.role IS NOT NULL THEN e.key END
                FROM ROWS FROM (jsonb_to_recordset(p_events) AS (seq bigint, type text, key text, "time" bigint, payload text, base64 boolean, feed jsonb))
                    WITH ORDINALITY AS e(seq, type, key, "time", payload, base64, feed, o)
                CROSS JOIN LATERAL ROWS FROM (jsonb_to_recordset(e.feed) AS (type text, payload text, role text)) WITH ORDINALITY AS f(type, payload, role, o)
                WHERE e.feed IS NOT NULL;
                -- The server's state: the last read flag per message, removals, listings (an upsert
                -- touches a row once, and leaves it as it is when it already says so: a flag set
                -- again writes no row version); removals and listings, which most requests do not
                -- have, cost no statement when there are none.
                INSERT INTO messages (user_id, message_id, read)
                SELECT DISTINCT ON (i) p_user, i, r
                FROM (SELECT x->>'id', (x->>'read')::boolean, o FROM jsonb_path_query(p_events, '$[*].reads[*]') WITH ORDINALITY AS y(x, o)) AS z(i, r, o)
                ORDER BY i, o DESC
                ON CONFLICT (user_id, message_id) DO UPDATE SET read = EXCLUDED.read WHERE messages.read IS DISTINCT FROM EXCLUDED.read;
                IF jsonb_path_exists(p_events, '$[*].removed') THEN
                    INSERT INTO messages (user_id, message_id, removed)
                    SELECT DISTINCT p_user, i #>> '{}', true FROM jsonb_path_query(p_events, '$[*].removed[*]') AS x(i)
                    ON CONFLICT (user_id, message_id) DO UPDATE SET removed = true WHERE NOT messages.removed;
                END IF;
                IF cardinality(l_id) > 0 THEN
                    INSERT INTO messages (user_id, message_id, listing, removed)
                    SELECT DISTINCT ON (i) p_user, i, l, false FROM unnest(l_id, l_listing) WITH ORDINALITY AS x(i, l, o) ORDER BY i, o DESC
                    ON CONFLICT (user_id, message_id) DO UPDATE SET listing = EXCLUDED.listing, removed = false;
                END IF;
                RETURN v_n;
            END
            $fn$
            """,
            ledgerUpV4,
        ]),
        // Migration 7: the feed entries of a batch read as one array. Every entry names its event
        // by `seq` (`{"seq": 47}`, `{"seq": 48, "role": "app"}`), so `ledger_feed_append_v3` reads
        // all of them with one recordset joined to the events, instead of one recordset per event
        // (about 4 µs each, more than the row it makes) and a window sort; an entry naming no event
        // of the request is LG500. New names, not new bodies: migration 6 shipped, and during a
        // rolling deploy the previous release's `ledger_up_v4` → `ledger_feed_append_v2` still
        // runs with entries that carry no `seq` (the new batches, which do, read the same there).
        // `ledger_up_v5` is `ledger_up_v4`'s text calling `ledger_feed_append_v3`.
        Migration(7, "ledger_feed_append_v3 (the feed entries as one array), ledger_up_v5", [
            """
            CREATE FUNCTION ledger_feed_append_v3(p_user text, p_origin text, p_max_custom bigint, p_events jsonb, l_id text[], l_listing text[])
            RETURNS bigint LANGUAGE plpgsql AS $fn$
            DECLARE
                -- The entries: every event's `feed`, in order, each naming its event by `seq`; `{"seq": S}`
                -- the event itself, `{"seq": S, "role": R}` a custom entry. One flat array, read by one
                -- recordset: a recordset per event cost about 4 µs each, more than the row it makes.
                v_entries jsonb := jsonb_path_query_array(p_events, '$[*].feed[*]');
                v_n bigint := jsonb_array_length(v_entries);
                v_custom bigint := jsonb_array_length(jsonb_path_query_array(v_entries, '$[*].role'));
                v_head bigint; v_held bigint; v_inserted bigint;
            BEGIN
                IF v_n = 0 THEN RETURN 0; END IF;
                -- Dense feed numbers reserved at once under the user row's lock, in order; the
                -- custom entries counted under the same lock.
                INSERT INTO users AS u (user_id, feed_head, custom_entries) VALUES (p_user, v_n, v_custom)
                ON CONFLICT (user_id) DO UPDATE SET feed_head = u.feed_head + EXCLUDED.feed_head,
                    custom_entries = u.custom_entries + EXCLUDED.custom_entries
                RETURNING u.feed_head, u.custom_entries INTO v_head, v_held;
                -- The per-user bound on custom entries (the raise rolls the whole request back).
                IF v_custom > 0 AND v_held > p_max_custom THEN
                    RAISE EXCEPTION USING ERRCODE = 'LG429',
                        MESSAGE = 'user ' || p_user || ' already holds ' || (v_held - v_custom) || ' of at most ' || p_max_custom
                            || ' custom feed entries; the ' || v_custom || ' this request adds are refused (ledger-server --custom-entries-per-user)';
                END IF;
                -- Entry o takes position head - n + o. An entry without type or payload is its event's
                -- own, its payload in the stored form; one with a role carries the event's origin.
                INSERT INTO feed (user_id, seq, type, payload, origin_ledger, payload_is_base64, origin_seq, origin_time, origin_role, origin_key)
                SELECT p_user, v_head - v_n + f.o, coalesce(f.type, e.type), coalesce(f.payload, e.payload),
                       p_origin, f.payload IS NULL AND coalesce(e.base64, false), CASE WHEN f.role IS NOT NULL THEN e.seq END,
                       CASE WHEN f.role IS NOT NULL THEN e."time" END, f.role, CASE WHEN f.role IS NOT NULL THEN e.key END
                FROM ROWS FROM (jsonb_to_recordset(v_entries) AS (seq bigint, type text, payload text, role text)) WITH ORDINALITY AS f(seq, type, payload, role, o)
                JOIN jsonb_to_recordset(p_events) AS e(seq bigint, type text, key text, "time" bigint, payload text, base64 boolean) ON e.seq = f.seq;
                GET DIAGNOSTICS v_inserted = ROW_COUNT;
                IF v_inserted <> v_n THEN
                    RAISE EXCEPTION USING ERRCODE = 'LG500',
                        MESSAGE = 'ledger_feed_append_v3: ' || (v_n - v_inserted) || ' feed entries name no event of the request by seq';
                END IF;
                -- The server's state: the last read flag per message, removals, listings (an upsert
                -- touches a row once, and leaves it as it is when it already says so: a flag set
                -- again writes no row version); removals and listings, which most requests do not
                -- have, cost no statement when there are none.
                INSERT INTO messages (user_id, message_id, read)
                SELECT DISTINCT ON (i) p_user, i, r
                FROM (SELECT x->>'id', (x->>'read')::boolean, o FROM jsonb_path_query(p_events, '$[*].reads[*]') WITH ORDINALITY AS y(x, o)) AS z(i, r, o)
                ORDER BY i, o DESC
                ON CONFLICT (user_id, message_id) DO UPDATE SET read = EXCLUDED.read WHERE messages.read IS DISTINCT FROM EXCLUDED.read;
                IF jsonb_path_exists(p_events, '$[*].removed') THEN
                    INSERT INTO messages (user_id, message_id, removed)
                    SELECT DISTINCT p_user, i #>> '{}', true FROM jsonb_path_query(p_events, '$[*].removed[*]') AS x(i)
                    ON CONFLICT (user_id, message_id) DO UPDATE SET removed = true WHERE NOT messages.removed;
                END IF;
                IF cardinality(l_id) > 0 THEN
                    INSERT INTO messages (user_id, message_id, listing, removed)
                    SELECT DISTINCT ON (i) p_user, i, l, false FROM unnest(l_id, l_listing) WITH ORDINALITY AS x(i, l, o) ORDER BY i, o DESC
                    ON CONFLICT (user_id, message_id) DO UPDATE SET listing = EXCLUDED.listing, removed = false;
                END IF;
                RETURN v_n;
            END
            $fn$
            """,
            ledgerUpV4.replacing("ledger_up_v4", with: "ledger_up_v5").replacing("ledger_feed_append_v2", with: "ledger_feed_append_v3"),
        ]),
    ]

    /// `ledger_up_v4` (migration 6), kept as one text: migration 7's `ledger_up_v5` is the same
    /// function calling `ledger_feed_append_v3`.
    private static let ledgerUpV4 = """
            CREATE FUNCTION ledger_up_v4(p_batch jsonb) RETURNS jsonb LANGUAGE plpgsql SET jit = off AS $fn$
            DECLARE
                v_ledger text := p_batch->>'ledger';
                v_user text := p_batch->>'user';
                v_max_ledgers bigint := (p_batch->>'maxLedgers')::bigint;
                v_max_custom bigint := (p_batch->>'maxCustomEntries')::bigint;
                v_after bigint := (p_batch->>'after')::bigint;
                v_through bigint := (p_batch->>'through')::bigint;
                v_lost_through bigint := (p_batch->>'lostThrough')::bigint;
                v_events jsonb := p_batch->'events';
                v_apply jsonb := v_events;
                v_owner text; v_acked bigint; v_new boolean := false; v_applied bigint; v_changes bigint;
                v_fresh bigint[] := '{}'; v_reused bigint := 0; v_lost bigint := 0; v_refused bigint := 0;
            BEGIN
                IF p_batch->'version' IS DISTINCT FROM '2'::jsonb OR v_ledger IS NULL OR v_user IS NULL OR v_max_ledgers IS NULL
                   OR v_max_custom IS NULL OR v_after IS NULL OR v_through IS NULL OR jsonb_typeof(v_events) IS DISTINCT FROM 'array' THEN
                    RAISE EXCEPTION USING ERRCODE = 'LG500',
                        MESSAGE = 'ledger_up_v4 takes a batch of version 2 with ledger, user, maxLedgers, maxCustomEntries, after, through and events';
                END IF;
                -- Locks the ledger's row, or creates it bound to this user: the lock serialises this
                -- ledger's batches. (Two first batches at once: one inserts, the other's upsert waits
                -- for it and finds the row.)
                SELECT user_id, acked INTO v_owner, v_acked FROM ledgers WHERE ledger_id = v_ledger FOR UPDATE;
                IF NOT FOUND THEN
                    INSERT INTO ledgers AS l (ledger_id, user_id) VALUES (v_ledger, v_user)
                    ON CONFLICT (ledger_id) DO UPDATE SET updated_at = now() RETURNING l.user_id, l.acked, l.xmax = 0 INTO v_owner, v_acked, v_new;
                END IF;
                IF v_owner <> v_user THEN
                    RAISE EXCEPTION USING ERRCODE = 'LG403', MESSAGE = 'ledger ' || v_ledger || ' belongs to another user';
                END IF;
                -- The per-user bound on ledgers, checked when one is created (the raise rolls the creation back).
                IF v_new AND (SELECT count(*) FROM ledgers WHERE user_id = v_user) > v_max_ledgers THEN
                    RAISE EXCEPTION USING ERRCODE = 'LG429',
                        MESSAGE = 'user ' || v_user || ' already has ' || v_max_ledgers || ' ledgers; a new one is refused (ledger-server --ledgers-per-user)';
                END IF;
                IF v_after > v_acked THEN
                    RAISE EXCEPTION USING ERRCODE = 'LG409', DETAIL = v_acked::text,
                        MESSAGE = 'the batch starts after ' || v_after || ' but the server holds this ledger only through ' || v_acked;
                END IF;
                -- Sequences the device lost before sending them (its compaction trimmed them): those not held.
                IF v_lost_through IS NOT NULL AND v_lost_through > v_acked THEN
                    v_lost := v_lost_through - v_acked;
                END IF;
                -- Events the device skips because a server refused them: those above what is held, counted once
                -- (a batch sent again declares them at or below acked).
                IF jsonb_array_length(coalesce(p_batch->'refused', '[]'::jsonb)) > 0 THEN
                    SELECT count(*) INTO v_refused FROM jsonb_array_elements_text(p_batch->'refused') AS r(s) WHERE r.s::bigint > v_acked;
                END IF;
                -- At or below acked an event is a duplicate only if the server holds the same event
                -- there (or held it before a replacement); another one is new: a restored or copied
                -- ledger reusing the sequence. What was held there moves aside; v_apply keeps the new
                -- events. (The events come in increasing order: the first tells whether any is at or below acked.)
                IF (v_events->0->>'seq')::bigint <= v_acked THEN
                    v_fresh := ARRAY(
                        SELECT e.seq FROM jsonb_to_recordset(v_events) AS e(seq bigint, type text, key text, "time" bigint, payload text, base64 boolean)
                        WHERE e.seq <= v_acked
                          AND NOT EXISTS (SELECT 1 FROM device_events d WHERE d.ledger_id = v_ledger AND d.seq = e.seq AND d.type = e.type
                                AND d.key IS NOT DISTINCT FROM e.key AND d.time_micros = e."time" AND d.payload = e.payload AND d.payload_is_base64 = coalesce(e.base64, false))
                          AND NOT EXISTS (SELECT 1 FROM device_events_replaced d WHERE d.ledger_id = v_ledger AND d.seq = e.seq AND d.type = e.type
                                AND d.key IS NOT DISTINCT FROM e.key AND d.time_micros = e."time" AND d.payload = e.payload AND d.payload_is_base64 = coalesce(e.base64, false)));
                    v_reused := cardinality(v_fresh);
                    v_apply := jsonb_path_query_array(v_events, '$[*] ? (@.seq > $acked || @.seq == $fresh[*])',
                                                      jsonb_build_object('acked', v_acked, 'fresh', to_jsonb(v_fresh)));
                    IF v_reused > 0 THEN
                        WITH moved AS (DELETE FROM device_events WHERE ledger_id = v_ledger AND seq = ANY (v_fresh) RETURNING *)
                        INSERT INTO device_events_replaced (ledger_id, seq, user_id, type, key, time_micros, payload, payload_is_base64, received_at)
                        SELECT ledger_id, seq, user_id, type, key, time_micros, payload, payload_is_base64, received_at FROM moved;
                    END IF;
                END IF;
                -- The deduplication record.
                INSERT INTO device_events (ledger_id, seq, user_id, type, key, time_micros, payload, payload_is_base64)
                SELECT v_ledger, e.seq, v_user, e.type, e.key, e."time", e.payload, coalesce(e.base64, false)
                FROM jsonb_to_recordset(v_apply) AS e(seq bigint, type text, key text, "time" bigint, payload text, base64 boolean);
                GET DIAGNOSTICS v_applied = ROW_COUNT;
                -- The effect, of the new events only: their feed entries in event order, their reads (the
                -- last flag of a message wins), their removals — through the same ledger_feed_append_v2 as a publish.
                v_changes := ledger_feed_append_v2(v_user, v_ledger, v_max_custom, v_apply, '{}', '{}');
                UPDATE ledgers SET acked = greatest(acked, v_through), lost = lost + v_lost, refused = refused + v_refused,
                    reused = reused + v_reused, updated_at = now()
                WHERE ledger_id = v_ledger RETURNING acked INTO v_acked;
                RETURN jsonb_build_object('acked', v_acked, 'applied', v_applied, 'changes', v_changes, 'reused', v_reused, 'lost', v_lost,
                                          'refused', v_refused);
            END
            $fn$
            """

    /// The advisory lock every starting server takes around the check and the migrations.
    static let lockKey: Int64 = 7_231_923

    /// Checks the applied migrations against ``all`` and applies the missing ones, on `c` (a
    /// connection of its own, before the server listens). Throws a ``StartupError`` naming the
    /// migration when the database ran one this binary does not know (a newer release) or one
    /// that differs from this binary's (an edited migration).
    static func run(on c: PostgresConnection, logger: Logger) async throws {
        try await c.query("BEGIN", logger: logger)
        do {
            try await c.query("SELECT pg_advisory_xact_lock(\(lockKey))", logger: logger)
            try await c.query(
                "CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())",
                logger: logger)
            try await c.query("ALTER TABLE schema_migrations ADD COLUMN IF NOT EXISTS name text", logger: logger)
            try await c.query("ALTER TABLE schema_migrations ADD COLUMN IF NOT EXISTS checksum text", logger: logger)
            var applied: [Int: (name: String?, checksum: String?)] = [:]
            for try await (version, name, checksum) in try await c.query(
                "SELECT version, name, checksum FROM schema_migrations", logger: logger).decode((Int, String?, String?).self) {
                applied[version] = (name, checksum)
            }
            try check(applied: applied)
            for migration in all {
                if let record = applied[migration.version] {
                    if record.checksum == nil {
                        // Applied by a release before migrations were named: record what it was.
                        try await c.query("UPDATE schema_migrations SET name = \(migration.name), checksum = \(migration.checksum) WHERE version = \(migration.version)", logger: logger)
                    }
                    continue
                }
                for statement in migration.statements { try await c.query(PostgresQuery(unsafeSQL: statement), logger: logger) }
                try await c.query(
                    "INSERT INTO schema_migrations (version, name, checksum) VALUES (\(migration.version), \(migration.name), \(migration.checksum))",
                    logger: logger)
                logger.notice("applied schema migration \(migration.version) (\(migration.name))")
            }
            try await c.query("COMMIT", logger: logger)
        } catch {
            _ = try? await c.query("ROLLBACK", logger: logger)  // the connection is closed next anyway
            throw error
        }
    }

    /// The consistency rule: every applied migration is one of ``all``, with the same checksum.
    static func check(applied: [Int: (name: String?, checksum: String?)]) throws {
        let known = Dictionary(uniqueKeysWithValues: all.map { ($0.version, $0) })
        for (version, record) in applied.sorted(by: { $0.key < $1.key }) {
            guard let migration = known[version] else {
                throw StartupError(description: """
                    the database has schema migration \(version) (\(record.name ?? "unnamed")), which this ledger-server does not know: \
                    a newer release applied it. Run that release or a later one (docs/operations.md, "Upgrading the sync server"); \
                    this one knows migrations 1–\(all.last?.version ?? 0)
                    """)
            }
            if let checksum = record.checksum, checksum != migration.checksum {
                throw StartupError(description: """
                    schema migration \(version) (\(migration.name)) differs from the one the database applied \
                    (checksum \(checksum.prefix(12)) there, \(migration.checksum.prefix(12)) here): migrations are append-only, \
                    a change is a new migration
                    """)
            }
        }
    }
}
