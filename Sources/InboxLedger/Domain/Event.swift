#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Who appended an event: a role (`app`, `widget`, `notification-service`, …) and a process ID.
public struct Origin: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The writer's role, 1–64 bytes of UTF-8.
    public var role: String
    /// The writer's process ID.
    public var pid: Int32

    /// The origin `role` of process `pid` (this process by default).
    public init(role: String, pid: Int32 = getpid()) {
        self.role = role
        self.pid = pid
    }

    /// `role[pid]`.
    public var description: String { "\(role)[\(pid)]" }
}

/// An event to append: a type name, payload bytes and an optional idempotency key.
///
/// ```swift
/// let event = NewEvent(type: "badge.adjusted", payload: Array(#"{"delta":1}"#.utf8), key: "push-42")
/// let sequence = try ledger.append(event)
/// ```
public struct NewEvent: Hashable, Sendable, Codable {
    /// The event's type name, 1–128 bytes of printable ASCII without spaces (e.g. `inbox.synced`).
    public var type: String
    /// The payload; JSON by convention, any bytes allowed.
    public var payload: [UInt8]
    /// An idempotency key, 1–256 bytes of UTF-8: appending the same key with the same type
    /// and payload again returns the original sequence number and writes nothing.
    public var key: String?
    /// Set only by the sync client (``SyncStamp``); not part of the JSON form.
    var sync: SyncStamp? = nil

    private enum CodingKeys: String, CodingKey { case type, payload, key }

    /// An event of `type` with `payload` bytes, and an optional idempotency key.
    public init(type: String, payload: [UInt8], key: String? = nil) {
        self.type = type
        self.payload = payload
        self.key = key
    }
}

/// What only the sync client appends (docs/sync.md, "Custom events on every device"): an event
/// that came down the user's feed keeps its origin's time and role, and its source says where
/// the feed placed it; an `inbox.shared-settled` is the sync client's alone.
enum SyncStamp: Hashable, Sendable {
    case fromFeed(time: Int64, role: String, origin: FeedOrigin)
    case settlement
}

@_spi(LedgerSync)
extension NewEvent {
    /// A custom event that came down the user's feed, to append under its feed entry's `key`
    /// with its origin's commit time (µs) and role (``EventSource/feed(_:)``).
    public static func fromFeed(type: String, payload: [UInt8], key: String, time: Int64, role: String, origin: FeedOrigin) -> NewEvent {
        var event = NewEvent(type: type, payload: payload, key: key)
        event.sync = .fromFeed(time: time, role: role, origin: origin)
        return event
    }

    /// The `inbox.shared-settled` event of `settlement`, under `key`.
    public static func settled(_ settlement: SharedSettlement, key: String) throws(LedgerError) -> NewEvent {
        var event = try DomainEvent.sharedSettled(settlement).newEvent(key: key)
        event.sync = .settlement
        return event
    }
}

/// An event read back from the log.
public struct Event: Hashable, Sendable, Codable, Identifiable {
    /// Dense, global position in the log, from 1.
    public var sequence: UInt64
    /// Commit time, microseconds since 1970-01-01T00:00:00Z.
    public var timestampMicros: Int64
    /// Who appended it.
    public var origin: Origin
    /// The type name.
    public var type: String
    /// The idempotency key, if one was given.
    public var key: String?
    /// The payload bytes.
    public var payload: [UInt8]
    /// Whether it was appended here or came down the user's feed from another device, and
    /// whether it waits for the feed (docs/semantics.md, "Custom events on every device").
    public var source: EventSource

    /// A stored event as read back from the log.
    public init(sequence: UInt64, timestampMicros: Int64, origin: Origin, type: String, key: String?, payload: [UInt8],
                source: EventSource = .local) {
        self.sequence = sequence
        self.timestampMicros = timestampMicros
        self.origin = origin
        self.type = type
        self.key = key
        self.payload = payload
        self.source = source
    }
}

/// Where an event of the log comes from, as far as the user's other devices are concerned
/// (docs/semantics.md, "Custom events on every device").
///
/// ```swift
/// switch event.source {
/// case .local: print("this device's own, not shared")
/// case .shared: print("this device's own, shared: the feed places it")
/// case .feed(let origin): print("from \(origin.ledger ?? "the backend"), feed position \(origin.position)")
/// }
/// ```
public enum EventSource: Hashable, Sendable, Codable {
    /// Appended here, and not of a type the ledger shares (or appended before the ledger shared it).
    case local
    /// Appended here, of a type the ledger shares (``Ledger/sync``): the sync client sends it
    /// up and the user's feed places it; until then an app projection applies it on top of
    /// what the feed placed (``EventPlacement/pending``).
    case shared
    /// Came down the user's feed: another device's shared event, or the backend's. Its
    /// ``Event/timestampMicros`` and ``Event/origin`` role are its origin's (the pid is 0).
    case feed(FeedOrigin)
}

/// Where an event that came down the user's feed was made (``EventSource/feed(_:)``).
public struct FeedOrigin: Hashable, Sendable, Codable {
    /// The id of the ledger that appended it; nil: the backend published it.
    public var ledger: String?
    /// Its sequence in that ledger (for a published event: its feed position).
    public var sequence: UInt64
    /// Its idempotency key there, if it had one (the event's own ``Event/key`` here is its feed
    /// entry's, `sync-down-<user>-<position>`, which makes the download idempotent).
    public var key: String?
    /// Its position in the user's feed (the server's order: dense, from 1).
    public var position: UInt64

    /// An origin.
    public init(ledger: String?, sequence: UInt64, key: String?, position: UInt64) {
        self.ledger = ledger
        self.sequence = sequence
        self.key = key
        self.position = position
    }
}

/// Microseconds since the Unix epoch, from the real-time clock.
func currentMicros() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Int64(ts.tv_sec) * 1_000_000 + Int64(ts.tv_nsec) / 1000
}
