import Foundation
import InboxLedger
import InboxLedgerSync

/// What the routes need from the server's state (docs/sync.md): an up batch applied
/// atomically, a page of a user's feed, a publish, the state a user can inspect, the health
/// `/healthz` reports, and the wake-ups of long polls. ``buildRouter(_:authenticator:limits:logger:)``
/// takes any store; ``PostgresStore`` is the server's, ``MemoryStore`` the router tests'.
///
/// Every method is **all or nothing**: a method that throws has written nothing. The routes
/// validate requests before they call a store; a store refuses only what needs its state
/// (another user's ledger, a gap, a per-user bound), with the ``APIError`` the protocol answers
/// or an error ``apiError(for:)`` maps to one.
protocol SyncStore: Sendable {
    /// This process's long polls, which the store wakes when a user's feed moves
    /// (``announce(_:)``, and for a store shared by several processes, their writes too).
    var longPolls: LongPolls { get }

    /// Whether requests can be served now, and if not, why (`/healthz`).
    func health() -> StoreHealth

    /// `POST /v1/up`: applies `batch` as `ledger_up_v5` does (migration 7), in one transaction:
    /// the ledger bound to its user (`403` for another's, `429` beyond `maxLedgers` new ledgers,
    /// `409` when `after` is above what is held), the declared losses, the events not held with
    /// the same content, and the feed entries and message state of those events (`429` when
    /// their custom entries would take the user beyond `maxCustomEntries`).
    func up(_ batch: UpBatch) async throws -> UpOutcome

    /// `GET /v1/down`: at most `limit` feed entries of `user` after `after`, in order, and the head.
    func feed(user: String, after: UInt64, limit: Int) async throws -> SyncWire.DownResponse

    /// `POST /v1/publish`: one delta listing appended to the user's feed (``PublishListing``)
    /// when the request lists or removes messages, then its custom events in order, each with
    /// its origin (``Publication``), in one transaction with the message state it sets; `429`
    /// when the custom events would take the user beyond `maxCustomEntries`.
    func publish(_ publication: Publication) async throws -> SyncWire.PublishResponse

    /// `GET /v1/state`: a page of at most `limit` of `user`'s messages after `after` (byte
    /// order), the user's ledgers, the feed head and the device events held.
    func state(user: String, after: String?, limit: Int) async throws -> SyncWire.ServerState

    /// Called after a write that moved `user`'s feed has committed: wakes the long polls
    /// waiting for it (``longPolls``, and other processes' where the store is shared).
    func announce(_ user: String)

    /// The protocol answer for an error one of the methods threw, or nil for an error that is
    /// a bug (the routes answer `500 internal` and log it).
    func apiError(for error: any Error) -> APIError?
}

/// Whether a ``SyncStore`` can serve requests (`/healthz`).
enum StoreHealth: Sendable, Equatable {
    /// Requests can be served.
    case up
    /// Requests answer `503` until it comes back: why, in words (`unreachable at HOST:PORT: …`).
    case down(String)
}

/// The typed argument of `ledger_up_v5(p_batch jsonb)` (migration 7): one `POST /v1/up`
/// after validation, with each event's effect on the user's feed worked out by the server.
/// ``PostgresStore`` sends it as one `jsonb` parameter (written by ``writeJSON(into:)``, the
/// document its `Encodable` conformance gives); ``MemoryStore`` applies the same value by the
/// same rules.
///
/// The shape is versioned (``version``): version 1 is `ledger_up_v3`'s (migration 5), which
/// the previous release still sends during a rolling deploy; version 2 adds
/// ``maxCustomEntries`` and the custom event's feed entry (``FeedEntry/role``), read by
/// `ledger_up_v4` (migration 6) and `ledger_up_v5` (migration 7, which also needs each feed
/// entry's `seq`; v4 ignores it). A later field can be added the same way, or by a new
/// function beside the one the previous release calls (migrations are append-only).
struct UpBatch: Codable, Sendable, Equatable {
    /// The batch shape this server sends (and `ledger_up_v4` and `ledger_up_v5` accept).
    static let currentVersion = 2

    /// The shape's version: ``currentVersion``.
    var version = UpBatch.currentVersion
    /// The token's user.
    var user: String
    /// The device ledger's id.
    var ledger: String
    /// Ledgers `user` may have: creating one more is `429 too_many` (`--ledgers-per-user`).
    var maxLedgers: Int64
    /// Custom feed entries `user` may hold: a batch whose new custom events would go beyond is
    /// `429 too_many`, nothing written (`--custom-entries-per-user`).
    var maxCustomEntries: Int64
    /// The relay cursor the batch was read after: above what is held is `409 gap`.
    var after: Int64
    /// The last sequence the batch covers: the ledger is acknowledged through it.
    var through: Int64
    /// Sequences `after+1 … lostThrough` the device lost before sending them, if it declared any.
    var lostThrough: Int64?
    /// The events, in sequence order.
    var events: [Event]
    /// Sequences the device skips because a server refused them (``SyncWire/UpRequest/refused``),
    /// in order: those above what is held are counted (`ledgers.refused`).
    var refused: [Int64] = []

    /// One shared event of the device's ledger, as the server keeps it (`device_events`), and
    /// its effects when it is new. Encoded compactly (the function parses every byte): no
    /// `key` without one, `base64` only when true, no empty array.
    struct Event: Codable, Sendable, Equatable {
        /// Its sequence in the device's ledger.
        var seq: Int64
        /// Its type name (any shared type: built-in or the app's).
        var type: String
        /// Its idempotency key, if it had one.
        var key: String?
        /// Commit time, microseconds since the epoch.
        var time: Int64
        /// The payload as stored: UTF-8 text, or base64 when ``base64`` (bytes that are not
        /// UTF-8 or hold U+0000) — one form per payload, so equal events compare equal.
        var payload: String
        /// Whether ``payload`` is base64.
        var base64 = false
        /// The entries it appends to the user's feed (none for most types).
        var feed: [FeedEntry] = []
        /// Read flags it sets, in order (the last flag of a message wins).
        var reads: [Read] = []
        /// Message ids it marks removed.
        var removed: [String] = []

        /// The feed entries as the feed holds them: the event's own type and payload (in its
        /// stored form) where they are left out, and a custom event's origin — `ledger`, this
        /// event's sequence, time and key, the entry's role.
        func feedEntries(ledger: String) -> [FeedRow] {
            feed.map { entry in
                let own = entry.payload == nil
                return FeedRow(type: entry.type ?? type, payload: entry.payload ?? payload, base64: own && base64,
                               origin: entry.role.map { SyncWire.ChangeOrigin(ledger: ledger, seq: UInt64(seq), time: time, role: $0, key: key) })
            }
        }

        /// An event and its effects.
        init(seq: Int64, type: String, key: String?, time: Int64, payload: String, base64: Bool,
             feed: [FeedEntry] = [], reads: [Read] = [], removed: [String] = []) {
            self.seq = seq
            self.type = type
            self.key = key
            self.time = time
            self.payload = payload
            self.base64 = base64
            self.feed = feed
            self.reads = reads
            self.removed = removed
        }

        enum CodingKeys: String, CodingKey { case seq, type, key, time, payload, base64, feed, reads, removed }

        /// Decodes the compact form: absent fields are their defaults.
        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            seq = try c.decode(Int64.self, forKey: .seq)
            type = try c.decode(String.self, forKey: .type)
            key = try c.decodeIfPresent(String.self, forKey: .key)
            time = try c.decode(Int64.self, forKey: .time)
            payload = try c.decode(String.self, forKey: .payload)
            base64 = try c.decodeIfPresent(Bool.self, forKey: .base64) ?? false
            feed = try c.decodeIfPresent([FeedEntry].self, forKey: .feed) ?? []
            reads = try c.decodeIfPresent([Read].self, forKey: .reads) ?? []
            removed = try c.decodeIfPresent([String].self, forKey: .removed) ?? []
        }

        /// A feed entry as the batch writes it: naming its event by `seq` (the function reads
        /// every entry of the batch as one array); decoding ignores it.
        private struct Entry: Encodable {
            var seq: Int64
            var entry: FeedEntry

            enum CodingKeys: String, CodingKey { case seq, type, payload, role }

            func encode(to encoder: any Encoder) throws {
                var c = encoder.container(keyedBy: CodingKeys.self)
                try c.encode(seq, forKey: .seq)
                try c.encodeIfPresent(entry.type, forKey: .type)
                try c.encodeIfPresent(entry.payload, forKey: .payload)
                try c.encodeIfPresent(entry.role, forKey: .role)
            }
        }

        /// Encodes the compact form: defaults left out.
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(seq, forKey: .seq)
            try c.encode(type, forKey: .type)
            try c.encodeIfPresent(key, forKey: .key)
            try c.encode(time, forKey: .time)
            try c.encode(payload, forKey: .payload)
            if base64 { try c.encode(true, forKey: .base64) }
            if !feed.isEmpty { try c.encode(feed.map { Entry(seq: seq, entry: $0) }, forKey: .feed) }
            if !reads.isEmpty { try c.encode(reads, forKey: .reads) }
            if !removed.isEmpty { try c.encode(removed, forKey: .removed) }
        }
    }

    /// One entry an event appends to the user's feed (docs/sync.md, "Up"): the event itself
    /// (`{}`, the common case: `message.read`, `message.removed`), another event it implies
    /// (a widget's mark-read action appends a `message.read`), or a custom event itself with its
    /// origin (`{"role": R}`). The batch writes each with its event's `seq` (`{"seq": 47}`).
    struct FeedEntry: Codable, Sendable, Equatable {
        /// The entry's type; nil: the event's own.
        var type: String?
        /// The entry's payload, UTF-8 JSON; nil: the event's own, in its stored form (base64
        /// when the event's is).
        var payload: String?
        /// Set on a custom event's entry: the role of the process that appended the event (the
        /// up event's, `device` when it had none). The entry carries the event's origin —
        /// the batch's ledger, the event's sequence, time and key, and this role.
        var role: String?

        /// An entry.
        init(type: String? = nil, payload: String? = nil, role: String? = nil) {
            self.type = type
            self.payload = payload
            self.role = role
        }

        /// The event itself.
        static let event = FeedEntry()

        /// The origin role of a custom event whose up event carried none (an older client).
        static let defaultRole = "device"

        /// A custom event itself, with its origin (appended by a process of `role`).
        static func custom(role: String) -> FeedEntry { FeedEntry(role: role) }
    }

    /// A feed entry as the feed holds it (``Event/feedEntries(ledger:)``, ``Publication``):
    /// what `GET /v1/down` answers, but for its position.
    struct FeedRow: Sendable, Equatable {
        /// The entry's type.
        var type: String
        /// The payload: UTF-8 text, or base64 when ``base64``.
        var payload: String
        /// Whether ``payload`` is base64 (a custom payload that is not UTF-8 or holds U+0000).
        var base64 = false
        /// A custom event's origin; nil for the entries the server makes (listings, reads, removals).
        var origin: SyncWire.ChangeOrigin?

        /// The entry at feed position `seq`, as `GET /v1/down` answers it: a base64 payload goes
        /// in `payloadBase64`, beside an empty `payload`.
        func change(seq: UInt64) -> SyncWire.Change {
            SyncWire.Change(seq: seq, type: type, payload: base64 ? "" : payload, payloadBase64: base64 ? payload : nil, origin: origin)
        }
    }

    /// A read flag an event sets.
    struct Read: Codable, Sendable, Equatable {
        /// The message id.
        var id: String
        /// The flag.
        var read: Bool
    }

    /// The batch of `request`, validated into `events`, for `user`.
    init(user: String, request: SyncWire.UpRequest, events: [Event], maxLedgers: Int,
         maxCustomEntries: Int = RequestLimits.defaultCustomEntriesPerUser) {
        self.user = user
        self.ledger = request.ledger
        self.maxLedgers = Int64(maxLedgers)
        self.maxCustomEntries = Int64(maxCustomEntries)
        self.after = Int64(request.after)
        self.through = Int64(request.through)
        self.lostThrough = request.lostThrough.map { Int64($0) }
        self.events = events
        self.refused = (request.refused ?? []).map { Int64($0) }
    }
}

/// What `ledger_up_v5` answers (a `jsonb` object, so fields can be added — per-event outcomes —
/// without another function).
struct UpOutcome: Codable, Sendable, Equatable {
    /// The highest contiguous sequence now held for the ledger.
    var acked: Int64
    /// Events of the batch written now (new, or reusing a sequence with other content).
    var applied: Int64
    /// Feed entries appended (the long polls to wake).
    var changes: Int64
    /// Of the applied events, those at sequences already acknowledged.
    var reused: Int64
    /// Declared lost sequences recorded now (not held before).
    var lost: Int64
    /// Declared refused sequences counted now (not held before).
    var refused: Int64
}

/// What a publish appends: one delta `inbox.synced` listing and the message state it sets,
/// given what the server holds for the listed ids. A message the server holds as removed (a
/// device removed it, or the backend did) stays removed: it goes out in `removed`, which settles
/// every device's removal, and never as a row that only the devices that did not remove it
/// would show. A message without a read flag gets the server's.
struct PublishListing: Sendable, Equatable {
    /// The feed entry's payload (`inbox.synced`, validated by the ledger's own decoder).
    var payload: String
    /// The ids of the listed messages, in order.
    var listingIDs: [String]
    /// Each listed message as JSON (the `messages.listing` column).
    var listings: [String]
    /// The ids the listing removes.
    var removed: [String]

    /// The feed entry's type.
    static let type = BuiltInEventType.inboxSynced.rawValue

    /// The listing of `request`, where `flags` are the server's read flags and `removedHere`
    /// the ids it holds as removed, of the messages the request lists.
    init(_ request: SyncWire.PublishRequest, flags: [String: Bool], removedHere: Set<String>) throws {
        let ids = request.messages.map(\.id)
        var messages = request.messages.filter { !removedHere.contains($0.id) }
        for i in messages.indices where messages[i].read == nil { messages[i].read = flags[messages[i].id] }
        var removedIDs = request.removed ?? []
        removedIDs += ids.filter { removedHere.contains($0) && !removedIDs.contains($0) }
        let bytes = try DomainEvent.inboxSynced(InboxSync(mode: .delta, messages: messages, removed: removedIDs)).newEvent().payload
        _ = try DomainEvent.decode(type: Self.type, payload: bytes)
        payload = String(decoding: bytes, as: UTF8.self)
        listingIDs = messages.map(\.id)
        let encoder = JSONEncoder()
        listings = try messages.map { String(decoding: try encoder.encode($0), as: UTF8.self) }
        removed = removedIDs
    }
}

/// `POST /v1/publish` after validation (``API/validatePublication(_:user:)``): the listing, if
/// the request lists or removes messages, then the custom events, for the token's user. Both
/// stores append the same entries: the listing first (``PublishListing``), then each event with
/// the origin `{role: "server", seq: its own feed position, time: ``time``, key}` and no ledger.
struct Publication: Sendable, Equatable {
    /// One custom event of the request, as the feed keeps it.
    struct Event: Sendable, Equatable {
        /// Its custom type.
        var type: String
        /// Its idempotency key, if it had one (the origin's `key`).
        var key: String?
        /// The payload: UTF-8 text, or base64 when ``base64`` (bytes that are not UTF-8 or hold U+0000).
        var payload: String
        /// Whether ``payload`` is base64.
        var base64: Bool
    }

    /// The role in a published event's origin.
    static let role = "server"

    /// The token's user.
    var user: String
    /// The request's messages and removals (its `events` are ``events``).
    var request: SyncWire.PublishRequest
    /// The custom events, validated, in order.
    var events: [Event]
    /// The server's clock when the request was validated, µs since the epoch: every event's origin time.
    var time: Int64
    /// Custom feed entries the user may hold (`--custom-entries-per-user`): beyond, `429`, nothing written.
    var maxCustomEntries: Int64

    /// Whether a listing is appended: the request lists or removes messages.
    var hasListing: Bool { !request.messages.isEmpty || !(request.removed ?? []).isEmpty }

    /// The custom events' feed entries when the first of them takes feed position `first`.
    func eventRows(first: UInt64) -> [UpBatch.FeedRow] {
        events.enumerated().map { i, event in
            UpBatch.FeedRow(type: event.type, payload: event.payload, base64: event.base64,
                            origin: SyncWire.ChangeOrigin(ledger: nil, seq: first + UInt64(i), time: time, role: Self.role, key: event.key))
        }
    }
}

/// Which custom types the server accepts (`--custom-types`, docs/sync.md "Configuration"): an
/// up or published event of another custom type is refused for its content (`400`, with the
/// up event's `seq`). Built-in types are not concerned.
enum CustomTypes: Sendable, Equatable, CustomStringConvertible {
    /// Every custom type (`*`, the default).
    case all
    /// These exact type names only (none: no custom type).
    case only(Set<String>)

    /// `text`: `*`, or comma-separated exact type names (white space around them ignored), each
    /// a custom type name a ledger appends: 1–128 bytes of printable ASCII without spaces, not a
    /// built-in type nor in the built-ins' namespaces. An empty list accepts no custom type.
    init(parsing text: String) throws(ConfigurationError) {
        let names = text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        if names == ["*"] {
            self = .all
            return
        }
        if names.contains("*") { throw ConfigurationError("--custom-types: * stands alone (every custom type), not in a list of names") }
        for name in names {
            if let problem = CustomTypes.nameProblem(name) {
                throw ConfigurationError("--custom-types: '\(name)' \(problem) (expected * or comma-separated custom type names)")
            }
        }
        self = .only(Set(names))
    }

    /// Whether an event of the custom type `type` is accepted.
    func accepts(_ type: String) -> Bool {
        switch self {
        case .all: true
        case .only(let names): names.contains(type)
        }
    }

    /// `*`, or the names in order, or `none`.
    var description: String {
        switch self {
        case .all: "*"
        case .only(let names): names.isEmpty ? "none" : names.sorted().joined(separator: ", ")
        }
    }

    /// Why `type` cannot be a custom type name, or nil when it can (the rules of `POST /v1/up`).
    static func nameProblem(_ type: String) -> String? {
        let bytes = SyncWire.Limits.typeBytes
        guard bytes.contains(type.utf8.count), type.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else {
            return "is not \(bytes.lowerBound)–\(bytes.upperBound) bytes of printable ASCII without spaces"
        }
        if BuiltInEventType(rawValue: type) != nil { return "is a built-in type, not a custom one" }
        if BuiltInEventType.isReserved(type) {
            return "is in a namespace reserved for built-in event types (\(BuiltInEventType.reservedNamespaces.sorted().joined(separator: ", ")))"
        }
        return nil
    }
}
