import InboxLedger

/// What a ``SyncClient`` is doing and how far behind it is, as ``SyncClient/statusUpdates()``
/// reports it. The up and down loops each have their own state (``up``, ``down``); ``phase``
/// and ``lastError`` are the worse of the two, so one loop's success never hides the other's
/// failure.
///
/// ```swift
/// for await status in client.statusUpdates() where status.phase == .offline {
///     print("offline:", status.lastError ?? "", "up", status.up.phase, "down", status.down.phase)
/// }
/// ```
public struct SyncStatus: Hashable, Sendable {
    /// A loop's state, from best to worst.
    public enum Phase: String, Hashable, Sendable, Comparable {
        /// Not started, or caught up and waiting for changes.
        case idle
        /// Sending or applying.
        case syncing
        /// The server cannot be reached (network, 5xx): retrying with backoff.
        case offline
        /// The server refused (401, 403, 4xx, a gap) or the ledger failed: retrying at the longest backoff.
        case failed

        var rank: Int {
            switch self {
            case .idle: 0
            case .syncing: 1
            case .offline: 2
            case .failed: 3
            }
        }

        public static func < (a: Phase, b: Phase) -> Bool { a.rank < b.rank }
    }

    /// One direction's state.
    public struct Direction: Hashable, Sendable {
        /// Its phase now.
        public var phase: Phase = .idle
        /// Its last failure, until its next success.
        public var lastError: String?
        /// When it last exchanged with the server successfully.
        public var lastSuccess: Timestamp?

        /// An idle direction.
        public init() {}
    }

    /// The up loop (the relay: sending the ledger's shared events).
    public var up = Direction()
    /// The down loop (the feed: appending the server's changes).
    public var down = Direction()
    /// The worse of the two loops' phases.
    public var phase: Phase { max(up.phase, down.phase) }
    /// The failure of the worse loop (either loop's if both are equally bad), until that loop succeeds.
    public var lastError: String? { up.phase >= down.phase ? up.lastError ?? down.lastError : down.lastError ?? up.lastError }
    /// When the last exchange with the server (either direction) succeeded.
    public var lastSuccess: Timestamp? {
        switch (up.lastSuccess, down.lastSuccess) {
        case let (u?, d?): max(u, d)
        case let (u, d): u ?? d
        }
    }
    /// Events the server acknowledged in this run (shared events sent and applied or held).
    public var eventsSent: Int = 0
    /// Feed entries appended to the ledger in this run (replays included).
    public var changesReceived: Int = 0
    /// The relay consumer's cursor: every event up to it is acknowledged by the server.
    public var upCursor: UInt64 = 0
    /// Events in the ledger after the relay's cursor: not yet acknowledged by the server
    /// (pending while offline, or refused), shared or not. Refreshed whenever the up loop
    /// reads, sends or fails, and on each lease renewal.
    public var upLag: UInt64 = 0
    /// The last feed sequence applied.
    public var downCursor: UInt64 = 0
    /// The feed's head as the server last reported it (stale while the down loop is offline).
    public var downHead: UInt64 = 0
    /// Feed entries not applied yet, as of the server's last answer (look at ``down`` to know
    /// whether that answer is recent).
    public var downLag: UInt64 { downHead > downCursor ? downHead - downCursor : 0 }
    /// Events the relay could not send because compaction trimmed them first (declared lost to
    /// the server, docs/sync.md "Up").
    public var eventsLost: UInt64 = 0

    /// An idle status.
    public init() {}
}
