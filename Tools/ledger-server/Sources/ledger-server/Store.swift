import Foundation
import HTTPTypes
import Hummingbird
import InboxLedger
import InboxLedgerSync
import Logging
import NIOCore
import PostgresNIO

/// An answer other than 200: a code of the protocol (its status), what was wrong; nothing was
/// written. Thrown by handlers; Hummingbird writes it (``response(from:context:)``).
struct APIError: Error, HTTPResponseError {
    var code: SyncWire.ErrorCode
    var message: String
    var acked: UInt64?

    init(_ code: SyncWire.ErrorCode, _ message: String, acked: UInt64? = nil) {
        self.code = code
        self.message = message
        self.acked = acked
    }

    static func badRequest(_ message: String) -> APIError { APIError(.badRequest, message) }
    static func unauthorized(_ message: String) -> APIError { APIError(.unauthorized, message) }
    static func forbidden(_ message: String) -> APIError { APIError(.forbidden, message) }

    var status: HTTPResponse.Status { .init(code: code.status) }

    func response(from request: Request, context: some RequestContext) throws -> Response { body }

    /// `{"error": code, "message": …}` with the code's status.
    var body: Response {
        let body = SyncWire.ErrorBody(error: code.rawValue, message: message, acked: acked)
        let data = (try? JSONEncoder().encode(body)) ?? Data(#"{"error":"internal","message":"unencodable error"}"#.utf8)
        return Response(status: status, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
    }
}

/// The server's PostgreSQL side: every request is one transaction, on a connection that
/// ``Database`` leases (503 when the database is down).
struct Store: Sendable {
    let database: Database
    /// Ledgers one user may have; creating one more is `429 too_many`.
    var ledgersPerUser = 100
    var logger: Logger { database.logger }

    /// `POST /v1/up` (docs/sync.md): the dedup record, the declared losses and the effect in one
    /// statement, `ledger_up_v2` (migration 4), its own transaction. The columns carry every
    /// event and every effect tagged with its event's sequence; the function writes those of the
    /// new events (above `acked`, or reusing a sequence with another event).
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
            payloads.append(event.stored.text)
            binary.append(event.stored.isBase64)
            for change in event.feedChanges {
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
        let lostThrough = request.lostThrough.map { Int64($0) }
        let call: PostgresQuery = """
            SELECT out_acked, out_applied, out_changes, out_reused, out_lost FROM ledger_up_v2(\(request.ledger), \(user), \(Int64(ledgersPerUser)),
                \(Int64(request.after)), \(Int64(request.through)), \(lostThrough)::int8,
                \(seqs)::int8[], \(types)::text[], \(keys)::text[], \(times)::int8[], \(payloads)::text[], \(binary)::bool[],
                \(feedEvent)::int8[], \(feedTypes)::text[], \(feedPayloads)::text[],
                \(readEvent)::int8[], \(readIDs)::text[], \(readFlags)::bool[], \(removedEvent)::int8[], \(removedIDs)::text[])
            """
        let logger = self.logger
        let row = try await database.withConnection { c in
            var row: (Int64, Int64, Int64, Int64, Int64) = (-1, 0, 0, 0, 0)
            for try await r in try await c.query(call, logger: logger).decode((Int64, Int64, Int64, Int64, Int64).self) { row = r }
            return row
        }
        let (acked, applied, entries, reused, lost) = row
        guard acked >= Int64(request.through) else { throw APIError(.internal, "ledger_up_v2 answered no acknowledgement") }
        return (SyncWire.UpResponse(user: user, ledger: request.ledger, acked: UInt64(acked), applied: Int(applied),
                                    duplicates: validated.count - Int(applied),
                                    lost: request.lostThrough == nil ? nil : UInt64(lost),
                                    reused: reused > 0 ? Int(reused) : nil), entries)
    }

    /// `POST /v1/publish`: one delta listing, each message with the server's read flag, through
    /// the same `ledger_feed_append` as a device batch's effects.
    func publish(user: String, request: SyncWire.PublishRequest) async throws -> SyncWire.PublishResponse {
        let logger = self.logger
        return try await database.withConnection { c in
            try await c.query("BEGIN", logger: logger)
            do {
                let answer = try await Self.publish(user: user, request: request, on: c, logger: logger)
                try await c.query("COMMIT", logger: logger)
                return answer
            } catch {
                _ = try? await c.query("ROLLBACK", logger: logger)  // the error that matters is `error`
                throw error
            }
        }
    }

    private static func publish(user: String, request: SyncWire.PublishRequest, on c: PostgresConnection, logger: Logger) async throws -> SyncWire.PublishResponse {
        // Lock the feed first so a read applied concurrently is either in the flags or after the listing.
        try await c.query("INSERT INTO users (user_id) VALUES (\(user)) ON CONFLICT (user_id) DO UPDATE SET feed_head = users.feed_head", logger: logger)
        let ids = request.messages.map(\.id)
        var flags: [String: Bool] = [:]
        var removedHere = Set<String>()
        for try await (id, read, removed) in try await c.query(
            "SELECT message_id, read, removed FROM messages WHERE user_id = \(user) AND message_id = ANY(\(ids)::text[])",
            logger: logger).decode((String, Bool?, Bool).self) {
            if let read { flags[id] = read }
            if removed { removedHere.insert(id) }
        }
        // A message the server holds as removed (a device removed it, or the backend did)
        // stays removed: it goes out in `removed`, which settles every device's removal, and
        // never as a row that only the devices that did not remove it would show.
        var messages = request.messages.filter { !removedHere.contains($0.id) }
        for i in messages.indices where messages[i].read == nil { messages[i].read = flags[messages[i].id] }
        var removedIDs = request.removed ?? []
        removedIDs += ids.filter { removedHere.contains($0) && !removedIDs.contains($0) }
        let payload = try DomainEvent.inboxSynced(InboxSync(mode: .delta, messages: messages, removed: removedIDs)).newEvent().payload
        _ = try DomainEvent.decode(type: BuiltInEventType.inboxSynced.rawValue, payload: payload)
        let listingIDs = messages.map(\.id)
        let listings = try messages.map { String(decoding: try JSONEncoder().encode($0), as: UTF8.self) }
        let feedTypes = [BuiltInEventType.inboxSynced.rawValue], feedPayloads = [String(decoding: payload, as: UTF8.self)]
        let noIDs: [String] = [], noFlags: [Bool] = []
        try await c.query("""
            SELECT ledger_feed_append(\(user), NULL, \(feedTypes)::text[], \(feedPayloads)::text[], \(noIDs)::text[], \(noFlags)::bool[],
                \(removedIDs)::text[], \(listingIDs)::text[], \(listings)::text[])
            """, logger: logger)
        var head: Int64 = 0
        for try await h in try await c.query("SELECT feed_head FROM users WHERE user_id = \(user)", logger: logger).decode(Int64.self) { head = h }
        return SyncWire.PublishResponse(seq: UInt64(head))
    }

    /// `GET /v1/down`: the feed after `after`.
    func feed(user: String, after: UInt64, limit: Int) async throws -> SyncWire.DownResponse {
        let logger = self.logger
        return try await database.withConnection { c in
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
            for try await (id, acked, lost, reused) in try await c.query(
                "SELECT ledger_id, acked, lost, reused FROM ledgers WHERE user_id = \(user) ORDER BY ledger_id", logger: logger)
                .decode((String, Int64, Int64, Int64).self) {
                ledgers.append(.init(ledger: id, acked: UInt64(acked), lost: UInt64(lost), reused: UInt64(reused)))
            }
            var head: Int64 = 0, count = 0
            for try await h in try await c.query("SELECT feed_head FROM users WHERE user_id = \(user)", logger: logger).decode(Int64.self) { head = h }
            for try await n in try await c.query("SELECT (SELECT count(*) FROM device_events WHERE user_id = \(user)) + (SELECT count(*) FROM device_events_replaced WHERE user_id = \(user))", logger: logger).decode(Int64.self) { count = Int(n) }
            return SyncWire.ServerState(user: user, head: UInt64(head), messages: messages, nextAfter: nextAfter, ledgers: ledgers, deviceEvents: count)
        }
    }
}

/// What one feed entry does: the event devices append, and its effect on the server's state.
struct FeedChange: Sendable {
    var type: String
    var payload: String
    var reads: [(String, Bool)] = []
    var removed: [String] = []
}

/// A device event checked by the ledger's own decoder, with the form it is stored in and the
/// feed change it makes.
struct ValidatedEvent: Sendable {
    var wire: SyncWire.UpEvent
    /// The payload as stored: text when the bytes are UTF-8 without U+0000, else base64 —
    /// one form per payload whichever encoding carried it, so equal events compare equal.
    var stored: (text: String, isBase64: Bool)
    var feedChanges: [FeedChange]
}
