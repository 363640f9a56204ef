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

    /// An event of `type` with `payload` bytes, and an optional idempotency key.
    public init(type: String, payload: [UInt8], key: String? = nil) {
        self.type = type
        self.payload = payload
        self.key = key
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

    /// A stored event as read back from the log.
    public init(sequence: UInt64, timestampMicros: Int64, origin: Origin, type: String, key: String?, payload: [UInt8]) {
        self.sequence = sequence
        self.timestampMicros = timestampMicros
        self.origin = origin
        self.type = type
        self.key = key
        self.payload = payload
    }
}

/// Microseconds since the Unix epoch, from the real-time clock.
func currentMicros() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Int64(ts.tv_sec) * 1_000_000 + Int64(ts.tv_nsec) / 1000
}
