import InboxLedger

/// What a ``SyncClient`` is doing and how far behind it is, as ``SyncClient/statusUpdates()``
/// reports it.
///
/// ```swift
/// for await status in client.statusUpdates() where status.phase == .offline {
///     print("offline:", status.lastError ?? "")
/// }
/// ```
public struct SyncStatus: Hashable, Sendable {
    /// The client's state.
    public enum Phase: String, Hashable, Sendable {
        /// Not started, or caught up and waiting for changes.
        case idle
        /// Sending or applying.
        case syncing
        /// The server cannot be reached (network, 5xx): retrying with backoff.
        case offline
        /// The server refused (401, 403, 4xx, a gap): retrying at the longest backoff.
        case failed
    }

    /// The state now.
    public var phase: Phase = .idle
    /// Events the server acknowledged in this run (shared events sent and applied or held).
    public var eventsSent: Int = 0
    /// Feed entries appended to the ledger in this run (replays included).
    public var changesReceived: Int = 0
    /// The relay consumer's cursor: every event up to it is acknowledged by the server.
    public var upCursor: UInt64 = 0
    /// Events in the ledger after the relay's cursor (not yet acknowledged).
    public var upLag: UInt64 = 0
    /// The last feed sequence applied.
    public var downCursor: UInt64 = 0
    /// The feed's head as the server last reported it.
    public var downHead: UInt64 = 0
    /// Feed entries not applied yet (as of the server's last answer).
    public var downLag: UInt64 { downHead > downCursor ? downHead - downCursor : 0 }
    /// Events the relay could not send because compaction trimmed them first (a consumer gap).
    public var eventsLost: UInt64 = 0
    /// The last failure, until the next success.
    public var lastError: String?
    /// When the last exchange with the server succeeded.
    public var lastSuccess: Timestamp?

    /// An idle status.
    public init() {}
}
