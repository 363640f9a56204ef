import Foundation
import InboxLedgerSync
import Synchronization

/// A ``SyncStore`` in this process's memory, for the router tests: no PostgreSQL, the same
/// answers. It follows the SQL of ``Migrations`` rule for rule — `ledger_up_v5` (migration 7) for
/// an up batch, `ledger_feed_append_v3` (migration 7) for the feed and the message state, and
/// ``PostgresStore``'s publish, down and state queries:
///
/// - a ledger is bound to the user who sent its first batch (`403` for anyone else); a user's
///   new ledger beyond ``UpBatch/maxLedgers`` is `429` and not created; a batch whose `after` is
///   above the ledger's `acked` is `409 gap` with `acked`;
/// - declared losses above `acked` are counted once (`lost`);
/// - an event above `acked` is new; one at or below it is a duplicate only if the store holds the
///   same event there (type, key, time, payload) or held it before a replacement — another one
///   is a reused sequence: what was held moves aside and the event is applied (`reused`);
/// - the new events' feed entries take dense feed numbers in event order, a custom event's with
///   its origin; the last read flag of a message wins, removals stick, a publish's listing clears
///   a removal it lists (the listing itself never lists a message held as removed:
///   ``PublishListing``); a publish's custom events follow its listing, each with the origin
///   `{role: "server", seq: its position}`;
/// - a request whose custom entries would take its user beyond its bound is `429`;
/// - every method checks before it writes, so a refusal writes nothing (the SQL's rollback).
///
/// Where it deliberately differs: nothing survives the process; it is one process's state, so
/// ``announce(_:)`` wakes only this process's long polls (no `NOTIFY`); ``health()`` is always
/// up; ledgers in `/v1/state` are in byte order (PostgreSQL orders them by the database's
/// collation, byte order under `C`); and it keeps no timestamps (`received_at`, `created_at`)
/// nor the `origin_ledger` of a built-in feed entry, which no route reads. One lock serialises every call, where
/// PostgreSQL serialises per ledger and per user.
final class MemoryStore: SyncStore {
    /// One device ledger (`ledgers`).
    struct LedgerRow: Sendable {
        /// The user it is bound to.
        var user: String
        /// The highest contiguous sequence held.
        var acked: Int64 = 0
        /// Sequences declared lost, in all.
        var lost: Int64 = 0
        /// Events applied at sequences already acknowledged, in all.
        var reused: Int64 = 0
        /// Events the device skipped because a server refused them, in all.
        var refused: Int64 = 0
        /// The events held, by sequence (`device_events`).
        var events: [Int64: HeldEvent] = [:]
        /// Events replaced by another at their sequence (`device_events_replaced`).
        var replaced: [Int64: [HeldEvent]] = [:]
    }

    /// What identifies an event held at a sequence: the columns `ledger_up_v3` compares.
    struct HeldEvent: Sendable, Equatable {
        /// Its type.
        var type: String
        /// Its idempotency key.
        var key: String?
        /// Its commit time.
        var time: Int64
        /// Its payload as stored.
        var payload: String
        /// Whether the payload is base64.
        var base64: Bool

        /// The held form of `event`.
        init(_ event: UpBatch.Event) {
            type = event.type
            key = event.key
            time = event.time
            payload = event.payload
            base64 = event.base64
        }
    }

    /// One message of a user (`messages`).
    struct MessageRow: Sendable {
        /// The server's read flag (nil: never set).
        var read: Bool?
        /// Whether a device or the backend removed it.
        var removed = false
        /// The last listing of it, as JSON.
        var listing: String?
    }

    /// One user's feed and messages (`users`, `feed`, `messages`).
    struct UserRow: Sendable {
        /// The feed's entries, in order; entry `i` has sequence `i + 1`.
        var feed: [SyncWire.Change] = []
        /// How many of them are custom entries (`users.custom_entries`).
        var customEntries: Int64 = 0
        /// The messages by id.
        var messages: [String: MessageRow] = [:]
    }

    /// Everything the store holds.
    struct Contents: Sendable {
        /// The ledgers by id.
        var ledgers: [String: LedgerRow] = [:]
        /// The users by id.
        var users: [String: UserRow] = [:]
    }

    /// This process's long polls.
    let longPolls = LongPolls()
    /// The state, behind one lock.
    private let contents = Mutex(Contents())

    /// An empty store.
    init() {}

    /// Always up: memory does not go away.
    func health() -> StoreHealth { .up }

    /// Wakes this process's long polls of `user`.
    func announce(_ user: String) { longPolls.wake(user) }

    /// Its errors are ``APIError``s already.
    func apiError(for error: any Error) -> APIError? { error as? APIError }

    /// `ledger_up_v5`, step by step (migration 7).
    func up(_ batch: UpBatch) async throws -> UpOutcome {
        guard batch.version == UpBatch.currentVersion else {
            throw APIError(.internal, "the store knows batches of version \(UpBatch.currentVersion), not \(batch.version)")
        }
        return try contents.withLock { c throws(APIError) in try Self.apply(batch, to: &c) }
    }

    /// The batch against `c`: refusals first, then the writes (which cannot fail).
    private static func apply(_ batch: UpBatch, to c: inout Contents) throws(APIError) -> UpOutcome {
        // The ledger bound to its user, or created (the per-user bound checked on creation).
        var ledger = c.ledgers[batch.ledger] ?? LedgerRow(user: batch.user)
        let isNew = c.ledgers[batch.ledger] == nil
        if ledger.user != batch.user { throw APIError(.forbidden, "ledger \(batch.ledger) belongs to another user") }
        if isNew, Int64(c.ledgers.values.count { $0.user == batch.user }) + 1 > batch.maxLedgers {
            throw APIError(.tooMany, "user \(batch.user) already has \(batch.maxLedgers) ledgers; a new one is refused (ledger-server --ledgers-per-user)")
        }
        if batch.after > ledger.acked {
            throw APIError(.gap, "the batch starts after \(batch.after) but the server holds this ledger only through \(ledger.acked)",
                           acked: UInt64(ledger.acked))
        }
        let acked = ledger.acked
        // Sequences the device lost before sending them: those not held.
        var lost: Int64 = 0
        if let lostThrough = batch.lostThrough, lostThrough > acked {
            lost = lostThrough - acked
            ledger.lost += lost
        }
        // Events the device skips because a server refused them: those above what is held.
        let refused = Int64(batch.refused.count { $0 > acked })
        ledger.refused += refused
        // At or below acked: a duplicate only if the same event is (or was) held there.
        var fresh = Set<Int64>()
        for event in batch.events where event.seq <= acked {
            let held = HeldEvent(event)
            if ledger.events[event.seq] != held, !(ledger.replaced[event.seq] ?? []).contains(held) { fresh.insert(event.seq) }
        }
        for seq in fresh.sorted() {
            if let old = ledger.events.removeValue(forKey: seq) { ledger.replaced[seq, default: []].append(old) }
        }
        ledger.reused += Int64(fresh.count)
        // The dedup record and the effect, of the new events only.
        let new = batch.events.filter { $0.seq > acked || fresh.contains($0.seq) }
        for event in new { ledger.events[event.seq] = HeldEvent(event) }
        let changes = try feedAppend(user: batch.user, entries: new.flatMap { $0.feedEntries(ledger: batch.ledger) },
                                     maxCustomEntries: batch.maxCustomEntries, reads: new.flatMap { $0.reads.map { ($0.id, $0.read) } },
                                     removed: new.flatMap(\.removed), listings: [], in: &c)
        ledger.acked = max(ledger.acked, batch.through)
        c.ledgers[batch.ledger] = ledger
        return UpOutcome(acked: ledger.acked, applied: Int64(new.count), changes: changes, reused: Int64(fresh.count), lost: lost, refused: refused)
    }

    /// `ledger_feed_append_v3` (migration 7): the per-user bound on custom entries (`429`,
    /// nothing written), dense feed numbers in order, then the message state — the last read
    /// flag per message, removals, listings (which clear a removal). Nothing at all without an
    /// entry. Answers the entries appended.
    private static func feedAppend(user: String, entries: [UpBatch.FeedRow], maxCustomEntries: Int64, reads: [(id: String, read: Bool)],
                                   removed: [String], listings: [(id: String, listing: String)], in c: inout Contents) throws(APIError) -> Int64 {
        guard !entries.isEmpty else { return 0 }
        var row = c.users[user] ?? UserRow()
        let custom = Int64(entries.count { $0.origin != nil })
        if custom > 0, row.customEntries + custom > maxCustomEntries {
            throw APIError(.tooMany, "user \(user) already holds \(row.customEntries) of at most \(maxCustomEntries) custom feed entries; the \(custom) this request adds are refused (ledger-server --custom-entries-per-user)")
        }
        row.customEntries += custom
        for entry in entries { row.feed.append(entry.change(seq: UInt64(row.feed.count + 1))) }
        for read in reads { row.messages[read.id, default: MessageRow()].read = read.read }
        for id in removed { row.messages[id, default: MessageRow()].removed = true }
        for listing in listings {
            row.messages[listing.id, default: MessageRow()].listing = listing.listing
            row.messages[listing.id, default: MessageRow()].removed = false
        }
        c.users[user] = row
        return Int64(entries.count)
    }

    /// ``PostgresStore``'s publish: the server's flags and removals of the listed ids, then the
    /// listing (when the request has one) and the custom events after it, through
    /// ``feedAppend(user:entries:maxCustomEntries:reads:removed:listings:in:)`` — the bound checked
    /// before anything is written.
    func publish(_ publication: Publication) async throws -> SyncWire.PublishResponse {
        try contents.withLock { c in
            let user = publication.user
            let head = UInt64(c.users[user]?.feed.count ?? 0)
            var entries: [UpBatch.FeedRow] = []
            var removed: [String] = []
            var listings: [(id: String, listing: String)] = []
            if publication.hasListing {
                let held = c.users[user]?.messages ?? [:]
                var flags: [String: Bool] = [:]
                var removedHere = Set<String>()
                for message in publication.request.messages {
                    guard let row = held[message.id] else { continue }
                    if let read = row.read { flags[message.id] = read }
                    if row.removed { removedHere.insert(message.id) }
                }
                let listing = try PublishListing(publication.request, flags: flags, removedHere: removedHere)
                entries.append(UpBatch.FeedRow(type: PublishListing.type, payload: listing.payload))
                removed = listing.removed
                listings = Array(zip(listing.listingIDs, listing.listings))
            }
            entries += publication.eventRows(first: head + UInt64(entries.count) + 1)
            let appended = try Self.feedAppend(user: user, entries: entries, maxCustomEntries: publication.maxCustomEntries, reads: [],
                                               removed: removed, listings: listings, in: &c)
            return SyncWire.PublishResponse(seq: head + UInt64(appended))
        }
    }

    /// The entries after `after`, at most `limit`, and the head.
    func feed(user: String, after: UInt64, limit: Int) async throws -> SyncWire.DownResponse {
        contents.withLock { c in
            let feed = c.users[user]?.feed ?? []
            let start = Int(min(after, UInt64(feed.count)))
            let changes = Array(feed[start..<min(feed.count, start + limit)])
            return SyncWire.DownResponse(user: user, head: UInt64(feed.count), changes: changes)
        }
    }

    /// A page of messages after `after` in byte order, the ledgers, the head, the events held.
    func state(user: String, after: String?, limit: Int) async throws -> SyncWire.ServerState {
        contents.withLock { c in
            let before: (String, String) -> Bool = { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            let from = after ?? ""
            let row = c.users[user] ?? UserRow()
            var ids = row.messages.keys.filter { before(from, $0) }.sorted(by: before)
            var nextAfter: String?
            if ids.count > limit {
                ids.removeLast(ids.count - limit)
                nextAfter = ids.last
            }
            let messages = ids.map { id in
                SyncWire.ServerState.Message(id: id, read: row.messages[id]?.read, removed: row.messages[id]?.removed ?? false)
            }
            let mine = c.ledgers.filter { $0.value.user == user }
            let ledgers = mine.keys.sorted(by: before).compactMap { id in
                mine[id].map {
                    SyncWire.ServerState.LedgerState(ledger: id, acked: UInt64($0.acked), lost: UInt64($0.lost), reused: UInt64($0.reused),
                                                     refused: UInt64($0.refused))
                }
            }
            let held = mine.values.reduce(0) { $0 + $1.events.count + $1.replaced.values.reduce(0) { $0 + $1.count } }
            return SyncWire.ServerState(user: user, head: UInt64(row.feed.count), messages: messages, nextAfter: nextAfter,
                                        ledgers: ledgers, deviceEvents: held)
        }
    }
}
