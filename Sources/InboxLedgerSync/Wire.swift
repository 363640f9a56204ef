import Foundation
import InboxLedger

/// The JSON bodies of the sync protocol (docs/sync.md), shared by ``SyncClient`` and
/// `ledger-server` so that both ends encode exactly the same shapes.
///
/// ```swift
/// let request = SyncWire.UpRequest(ledger: ledger.metadata.ledgerID, after: 0, through: 1, events: [])
/// let body = try JSONEncoder().encode(request)
/// ```
public enum SyncWire {
    /// The key prefix of every event the down direction appends: `sync-down-<user>-<seq>`.
    public static let downKeyPrefix = "sync-down-"

    /// The endpoints (docs/sync.md), one definition for the client and the server.
    ///
    /// ```swift
    /// let up = URL(fileURLWithPath: "/").appendingPathComponent(SyncWire.Endpoint.up.relativePath)
    /// ```
    public enum Endpoint: String, Sendable, CaseIterable {
        /// `POST`: a device's shared events.
        case up = "/v1/up"
        /// `GET ?after=&limit=&wait=`: the user's change feed (a long poll).
        case down = "/v1/down"
        /// `POST` (publish tokens): a listing for the token's user.
        case publish = "/v1/publish"
        /// `GET`: what the server holds for the token's user.
        case state = "/v1/state"
        /// `GET`: the server and its database (no token).
        case health = "/healthz"

        /// The path without its leading slash, to append to a base URL.
        public var relativePath: String { String(rawValue.dropFirst()) }
    }

    /// The query parameters of `GET /v1/down`.
    /// The query of `GET /v1/state`: a page of the user's messages.
    public enum StateQuery: String, Sendable, CaseIterable {
        /// Messages with an id after this one (byte order); none: from the first.
        case after
        /// At most this many messages (``Limits/stateMessages``).
        case limit
    }

    /// The query parameters of `/v1/down`.
    public enum DownQuery: String, Sendable, CaseIterable {
        /// The cursor: entries with a sequence above it.
        case after
        /// At most this many entries (``Limits/downPageSizes``).
        case limit
        /// Seconds to wait for an entry when there is none (``Limits/longPollSeconds``).
        case wait
    }

    /// The `error` code of every answer other than 200 (``ErrorBody``).
    ///
    /// ```swift
    /// let retry = SyncWire.ErrorCode(rawValue: "unavailable")?.isRetryable ?? false   // true
    /// ```
    public enum ErrorCode: String, Sendable, CaseIterable, Codable {
        /// 401: the token is missing, malformed, forged or expired.
        case unauthorized
        /// 403: another user's ledger, or a token of the wrong scope.
        case forbidden
        /// 400: a malformed or invalid request; nothing was written.
        case badRequest = "bad_request"
        /// 413: the body is over the server's limit.
        case tooLarge = "too_large"
        /// 409: the batch starts after what the server holds (`acked` says what it holds).
        case gap
        /// 429: a per-user bound (``Limits``) is reached.
        case tooMany = "too_many"
        /// 503: the database cannot be reached; nothing was written. Retry.
        case unavailable
        /// 500: a bug; nothing was acknowledged.
        case `internal`

        /// The HTTP status that carries it.
        public var status: Int {
            switch self {
            case .unauthorized: 401
            case .forbidden: 403
            case .badRequest: 400
            case .tooLarge: 413
            case .gap: 409
            case .tooMany: 429
            case .unavailable: 503
            case .internal: 500
            }
        }

        /// Whether the same request may succeed later without any change (503, 500, 429).
        public var isRetryable: Bool {
            switch self {
            case .unavailable, .internal, .tooMany: true
            case .unauthorized, .forbidden, .badRequest, .tooLarge, .gap: false
            }
        }
    }

    /// The protocol's limits, one definition for both ends (docs/sync.md, "Limits").
    public enum Limits {
        /// Events in one `POST /v1/up`.
        public static let eventsPerRequest = 1000
        /// A payload's bytes.
        public static let payloadBytes = 65_536
        /// A ledger id's UTF-8 bytes.
        public static let ledgerIDBytes = 1...128
        /// An event type's bytes (printable ASCII).
        public static let typeBytes = 1...128
        /// An idempotency key's UTF-8 bytes.
        public static let keyBytes = 1...256
        /// `limit` of `GET /v1/down`, and its default.
        public static let downPageSizes = 1...1000
        /// The default `limit`.
        public static let defaultDownPageSize = 500
        /// `wait` of `GET /v1/down`, in seconds.
        public static let longPollSeconds = 0...30
        /// The server's default body limit (`ledger-server serve --max-body`).
        public static let defaultMaxBodyBytes = 1_048_576
        /// `limit` of `GET /v1/state`: messages in one answer.
        public static let stateMessages = 1...10_000
        /// The default `limit` of `GET /v1/state`.
        public static let defaultStateMessages = 1_000
        /// Sequences: 0 … 2^63 − 1 (PostgreSQL's bigint).
        public static let sequences: ClosedRange<UInt64> = 0...UInt64(Int64.max)
    }

    /// Why `text` cannot be an identifier the server compares — a ledger id, a message id, an
    /// idempotency key — or nil when it can: the ledger's own rule (``IdentifierRule``), so
    /// what a ledger appended the server accepts.
    ///
    /// ```swift
    /// let fine = SyncWire.identifierProblem("m42")          // nil
    /// let refused = SyncWire.identifierProblem("e\u{301}")  // "is not in Unicode Normalization Form C …"
    /// ```
    public static func identifierProblem(_ text: String) -> String? { IdentifierRule.problem(text) }

    /// The idempotency key of the server's feed entry `seq` of `user`.
    public static func downKey(user: String, seq: UInt64) -> String { "\(downKeyPrefix)\(user)-\(seq)" }

    /// The idempotency key of the `inbox.shared-settled` a device appends for its shared event
    /// `seq` that the server refused (docs/sync.md, "Custom events on every device").
    public static func refusedKey(seq: UInt64) -> String { "sync-refused-\(seq)" }

    /// One shared event of a device's ledger, as `POST /v1/up` carries it.
    public struct UpEvent: Codable, Sendable, Hashable {
        /// Its sequence in the device's ledger.
        public var seq: UInt64
        /// Its type name.
        public var type: String
        /// Its idempotency key, if it had one.
        public var key: String?
        /// Commit time, microseconds since the epoch.
        public var time: Int64
        /// The payload bytes as UTF-8 text (nil when they are not UTF-8: see `payloadBase64`).
        public var payload: String?
        /// The payload bytes in base64, for payloads that are not UTF-8.
        public var payloadBase64: String?
        /// The role of the process that appended it (`app`, `widget`, …): a custom event's feed
        /// entry carries it to the other devices (``ChangeOrigin/role``). Absent from older
        /// clients (the entry then says `device`).
        public var role: String?

        /// The wire form of a stored event.
        public init(_ event: Event) {
            seq = event.sequence
            type = event.type
            key = event.key
            time = event.timestampMicros
            role = event.origin.role
            if let text = String(validating: event.payload, as: UTF8.self) {
                payload = text
                payloadBase64 = nil
            } else {
                payload = nil
                payloadBase64 = Data(event.payload).base64EncodedString()
            }
        }

        /// The payload bytes, or nil when neither field holds a valid payload.
        public var payloadBytes: [UInt8]? {
            if let payload { return Array(payload.utf8) }
            if let payloadBase64, let data = Data(base64Encoded: payloadBase64) { return Array(data) }
            return nil
        }

        /// Whether two wire events are **the same event**: the same type, key, commit time and
        /// payload bytes (whichever of `payload` and `payloadBase64` carries them). The server
        /// counts a resent sequence as a duplicate only when it holds the same event there; a
        /// different one is a ledger restored from a backup or copied (docs/sync.md, "Failure
        /// modes").
        ///
        /// ```swift
        /// let again = SyncWire.UpEvent(event)
        /// assert(again.isSameEvent(as: SyncWire.UpEvent(event)))
        /// ```
        public func isSameEvent(as other: UpEvent) -> Bool {
            type == other.type && key == other.key && time == other.time && payloadBytes == other.payloadBytes
        }
    }

    /// `POST /v1/up`: the shared events of the ledger's sequences `after+1 … through`.
    public struct UpRequest: Codable, Sendable, Hashable {
        /// The device ledger's id (`ledger.metadata.ledgerID`).
        public var ledger: String
        /// The relay consumer's cursor the batch was read after.
        public var after: UInt64
        /// The last sequence the batch covers.
        public var through: UInt64
        /// The shared events among them, in order.
        public var events: [UpEvent]
        /// Set when the device lost sequences `after+1 … lostThrough` before sending them (its
        /// compaction trimmed them: a consumer gap); every event is above it. The server records
        /// how many of them it did not hold (`lost` in `/v1/state`).
        public var lostThrough: UInt64?
        /// Sequences of shared events the device skips because a server refused them (an event
        /// an older ledger accepted, a stricter server: docs/sync.md, "Refused events"), in
        /// order, each above `after` (and `lostThrough`), at most `through`, none among `events`.
        /// The server counts those it did not hold (`refused` in `/v1/state`). Absent: none.
        public var refused: [UInt64]?

        /// A request covering `after+1 … through`, declaring `after+1 … lostThrough` lost and
        /// `refused` skipped.
        public init(ledger: String, after: UInt64, through: UInt64, events: [UpEvent], lostThrough: UInt64? = nil, refused: [UInt64]? = nil) {
            self.ledger = ledger
            self.after = after
            self.through = through
            self.events = events
            self.lostThrough = lostThrough
            self.refused = refused
        }
    }

    /// The server's answer to `POST /v1/up`.
    public struct UpResponse: Codable, Sendable, Hashable {
        /// The token's user.
        public var user: String
        /// The ledger id the request named.
        public var ledger: String
        /// The highest contiguous sequence the server holds for the ledger.
        public var acked: UInt64
        /// Events of this request applied now.
        public var applied: Int
        /// Events of this request the server already held (not applied again).
        public var duplicates: Int
        /// Of the sequences the request declared lost, those the server recorded now (it did
        /// not hold them); absent when none were declared.
        public var lost: UInt64?
        /// Of the applied events, those at sequences the server had already acknowledged but
        /// where it held another event or none: the device reuses sequences (its ledger was
        /// restored from a backup, or copied). Absent when none. Such an answer's `acked` may
        /// be above the device's own head (the server still holds the old history's sequences).
        public var reused: Int?
        /// Of the sequences the request declared refused, those the server counted now (it did
        /// not hold them); absent when none were declared.
        public var refused: UInt64?

        /// An answer.
        public init(user: String, ledger: String, acked: UInt64, applied: Int, duplicates: Int, lost: UInt64? = nil, reused: Int? = nil,
                    refused: UInt64? = nil) {
            self.user = user
            self.ledger = ledger
            self.acked = acked
            self.applied = applied
            self.duplicates = duplicates
            self.lost = lost
            self.reused = reused
            self.refused = refused
        }
    }

    /// Where a custom event in the feed came from: its envelope on the device that appended it
    /// (or the backend that published it), which every device keeps in its log
    /// (``InboxLedger/FeedOrigin``), so that a fold reading an event's time, role or key gives
    /// the same result on every device (docs/sync.md, "Custom events on every device").
    public struct ChangeOrigin: Codable, Sendable, Hashable {
        /// The device ledger's id; absent: published by the backend (`POST /v1/publish`).
        public var ledger: String?
        /// Its sequence in that ledger (for a published event: its feed position).
        public var seq: UInt64
        /// Its commit time on that device (published: the server's clock), µs since the epoch.
        public var time: Int64
        /// The role of the process that appended it (`app`, `widget`, …; `server` for a
        /// published event, `device` when an older client did not send one).
        public var role: String
        /// Its idempotency key there, if it had one.
        public var key: String?

        /// An origin.
        public init(ledger: String?, seq: UInt64, time: Int64, role: String, key: String? = nil) {
            self.ledger = ledger
            self.seq = seq
            self.time = time
            self.role = role
            self.key = key
        }
    }

    /// One entry of a user's change feed.
    public struct Change: Codable, Sendable, Hashable {
        /// Its position in the user's feed (dense, from 1).
        public var seq: UInt64
        /// The event type to append (`inbox.synced`, `message.read`, `message.removed`, or a
        /// custom type a device shared or the backend published).
        public var type: String
        /// The event's payload (JSON text); empty when ``payloadBase64`` carries it.
        public var payload: String
        /// A custom payload that is not UTF-8 (or holds U+0000), in base64.
        public var payloadBase64: String?
        /// A custom event's envelope where it was made; absent on the entries the server makes
        /// (listings, reads, removals).
        public var origin: ChangeOrigin?

        /// A feed entry.
        public init(seq: UInt64, type: String, payload: String, payloadBase64: String? = nil, origin: ChangeOrigin? = nil) {
            self.seq = seq
            self.type = type
            self.payload = payload
            self.payloadBase64 = payloadBase64
            self.origin = origin
        }

        /// The payload bytes (nil: `payloadBase64` is not base64).
        public var payloadBytes: [UInt8]? {
            guard let payloadBase64 else { return Array(payload.utf8) }
            return Data(base64Encoded: payloadBase64).map(Array.init)
        }
    }

    /// The server's answer to `GET /v1/down`.
    public struct DownResponse: Codable, Sendable, Hashable {
        /// The token's user.
        public var user: String
        /// The feed's last sequence when the answer was made.
        public var head: UInt64
        /// The entries after the cursor asked for, in order.
        public var changes: [Change]

        /// An answer.
        public init(user: String, head: UInt64, changes: [Change]) {
            self.user = user
            self.head = head
            self.changes = changes
        }
    }

    /// `POST /v1/publish` (publish tokens): messages for the token's user, the shape of
    /// `inbox.synced`'s data; the server appends one delta listing to the feed.
    public struct PublishRequest: Codable, Sendable, Hashable {
        /// Messages to list (new or changed).
        public var messages: [InboxMessage]
        /// Ids the backend removed.
        public var removed: [String]?
        /// Custom events for the user's devices (a task created on the web), appended to the
        /// feed after the listing, in order; absent: none. A request with events and no message
        /// or removal appends no listing.
        public var events: [PublishEvent]?

        /// A listing of `messages`, removing `removed`, then `events`.
        public init(messages: [InboxMessage], removed: [String]? = nil, events: [PublishEvent]? = nil) {
            self.messages = messages
            self.removed = removed
            self.events = events
        }
    }

    /// A custom event the backend publishes into a user's feed (``PublishRequest/events``):
    /// every device appends it with the origin `{role: "server"}` and the server's time.
    public struct PublishEvent: Codable, Sendable, Hashable {
        /// Its custom type (not in the built-ins' namespaces).
        public var type: String
        /// An idempotency key the devices keep with it (``ChangeOrigin/key``).
        public var key: String?
        /// The payload bytes as UTF-8 text (nil when `payloadBase64` carries them).
        public var payload: String?
        /// The payload bytes in base64.
        public var payloadBase64: String?

        /// An event of `type` with a UTF-8 `payload`.
        public init(type: String, payload: String, key: String? = nil) {
            self.type = type
            self.payload = payload
            self.key = key
            self.payloadBase64 = nil
        }
    }

    /// The server's answer to `POST /v1/publish`.
    public struct PublishResponse: Codable, Sendable, Hashable {
        /// The feed sequence of the last entry the request appended (the listing, or its last event).
        public var seq: UInt64

        /// An answer.
        public init(seq: UInt64) { self.seq = seq }
    }

    /// The body of every 4xx/5xx answer.
    public struct ErrorBody: Codable, Sendable, Hashable {
        /// A short code, one of ``ErrorCode``: `unauthorized`, `forbidden`, `bad_request`,
        /// `too_large`, `gap`, `too_many`, `unavailable`, `internal`.
        public var error: String
        /// What was wrong and where.
        public var message: String
        /// For `gap`: what the server holds.
        public var acked: UInt64?
        /// For a `bad_request` of `POST /v1/up` caused by one event's content (its type, key,
        /// payload, identifiers): that event's sequence. The device skips it and declares it
        /// (``UpRequest/refused``) instead of stopping; absent when the request as a whole is wrong.
        public var seq: UInt64?

        /// An error body.
        public init(error: String, message: String, acked: UInt64? = nil, seq: UInt64? = nil) {
            self.error = error
            self.message = message
            self.acked = acked
            self.seq = seq
        }
    }

    /// `GET /healthz`: whether the server can serve — 200 when its database answers, 503 with
    /// the reason when it does not.
    ///
    /// ```swift
    /// let health = SyncWire.Health(ok: false, database: "unreachable: connection refused", longPolls: 0, longPollsLeft: 0)
    /// ```
    public struct Health: Codable, Sendable, Hashable {
        /// Whether requests can be served now.
        public var ok: Bool
        /// `ok`, or what is wrong with the database (`unreachable at HOST:PORT: …`).
        public var database: String
        /// Long polls (`GET /v1/down` with a wait) open now.
        public var longPolls: Int
        /// Long polls ended because their client disconnected, since the server started.
        public var longPollsLeft: Int

        /// A health answer.
        public init(ok: Bool, database: String, longPolls: Int, longPollsLeft: Int) {
            self.ok = ok
            self.database = database
            self.longPolls = longPolls
            self.longPollsLeft = longPollsLeft
        }
    }

    /// `GET /v1/state`: what the server holds for the token's user.
    public struct ServerState: Codable, Sendable, Hashable {
        /// One message the server knows.
        public struct Message: Codable, Sendable, Hashable {
            /// Its id.
            public var id: String
            /// The server's read flag (nil: never set).
            public var read: Bool?
            /// Whether a device removed it.
            public var removed: Bool

            /// A message's state.
            public init(id: String, read: Bool?, removed: Bool) {
                self.id = id
                self.read = read
                self.removed = removed
            }

            enum CodingKeys: String, CodingKey { case id, read, removed }

            /// Always writes `read`, as `null` when the server has no flag.
            public func encode(to encoder: any Encoder) throws {
                var c = encoder.container(keyedBy: CodingKeys.self)
                try c.encode(id, forKey: .id)
                try c.encode(read, forKey: .read)
                try c.encode(removed, forKey: .removed)
            }
        }

        /// One device ledger of the user.
        public struct LedgerState: Codable, Sendable, Hashable {
            /// Its id.
            public var ledger: String
            /// The highest contiguous sequence held.
            public var acked: UInt64
            /// Sequences the device declared lost before sending them (trimmed on the device), in all.
            public var lost: UInt64
            /// Events applied at sequences the server had acknowledged with other content or none
            /// (a restored or copied ledger, ``UpResponse/reused``), in all.
            public var reused: UInt64
            /// Events the device skipped because a server refused them (``UpRequest/refused``), in all.
            public var refused: UInt64

            /// A ledger's state.
            public init(ledger: String, acked: UInt64, lost: UInt64 = 0, reused: UInt64 = 0, refused: UInt64 = 0) {
                self.ledger = ledger
                self.acked = acked
                self.lost = lost
                self.reused = reused
                self.refused = refused
            }

            enum CodingKeys: String, CodingKey { case ledger, acked, lost, reused, refused }

            /// Decodes a ledger's state; `refused` is 0 from a server that does not send it.
            public init(from decoder: any Decoder) throws {
                let c = try decoder.container(keyedBy: CodingKeys.self)
                ledger = try c.decode(String.self, forKey: .ledger)
                acked = try c.decode(UInt64.self, forKey: .acked)
                lost = try c.decode(UInt64.self, forKey: .lost)
                reused = try c.decode(UInt64.self, forKey: .reused)
                refused = try c.decodeIfPresent(UInt64.self, forKey: .refused) ?? 0
            }
        }

        /// The token's user.
        public var user: String
        /// The feed's head.
        public var head: UInt64
        /// Messages, by id (byte order): one page of at most the `limit` asked for.
        public var messages: [Message]
        /// Set when more messages follow the page: ask again with `after` = this id.
        public var nextAfter: String?
        /// Device ledgers, by id (at most `--ledgers-per-user`).
        public var ledgers: [LedgerState]
        /// Device events held, in all.
        public var deviceEvents: Int

        /// A state.
        public init(user: String, head: UInt64, messages: [Message], nextAfter: String? = nil, ledgers: [LedgerState], deviceEvents: Int) {
            self.user = user
            self.head = head
            self.messages = messages
            self.nextAfter = nextAfter
            self.ledgers = ledgers
            self.deviceEvents = deviceEvents
        }
    }
}

extension SyncWire.UpEvent {
    /// An upper bound of this event's size in a JSON body (JSONEncoder's output: a quote,
    /// backslash or slash takes 2 bytes, a control character at most 6, any other byte 1).
    /// The worst case of a 64 KiB payload is 6 × 65,536 + 500 bytes, about 385 KiB: one event
    /// alone always fits the server's default 1 MiB body.
    public var encodedSizeBound: Int {
        120 + Self.jsonStringBound(type) + (key.map(Self.jsonStringBound) ?? 0)
            + (payload.map(Self.jsonStringBound) ?? 0) + (payloadBase64?.utf8.count ?? 0) + 2
    }

    static func jsonStringBound(_ text: String) -> Int {
        var size = 2
        for byte in text.utf8 {
            switch byte {
            case 0x22, 0x5C, 0x2F: size += 2
            case 0..<0x20: size += 6
            default: size += 1
            }
        }
        return size
    }
}

extension SyncWire.UpRequest {
    /// An upper bound of the request's size as JSON, without its events (see ``SyncWire/UpEvent/encodedSizeBound``).
    public static func envelopeSizeBound(ledger: String) -> Int { 200 + SyncWire.UpEvent.jsonStringBound(ledger) }
}
