import InboxLedger

/// What a ``SyncClient`` is doing and how far behind it is, as ``SyncClient/statusUpdates()``
/// reports it. The up and down directions each have their own state (``up``, ``down``: derived
/// from the client's two state machines); ``phase`` and ``error`` are the worse of the two, so
/// one direction's success never hides the other's failure.
///
/// ```swift
/// for await status in client.statusUpdates() {
///     switch status.error {
///     case .unauthorized?: print("sign in again")
///     case .offline(let failure)?: print("offline:", failure)
///     default: print(status.phase, "up", status.up.phase, "down", status.down.phase)
///     }
/// }
/// ```
public struct SyncStatus: Hashable, Sendable {
    /// A direction's state, from best to worst.
    public enum Phase: String, Hashable, Sendable, Comparable {
        /// Running and caught up: waiting for an append (up) or long-polling the feed (down).
        case idle
        /// Not running: a fresh client, a ``SyncClient/syncOnce()`` that ended, a run that was
        /// cancelled (the app went to the background). Never a failure.
        case stopped
        /// Sending, applying, or catching up.
        case syncing
        /// The server cannot be reached or fails (``SyncError/offline(_:)``, 5xx): retrying with backoff.
        case offline
        /// Needs more than time: a 401 the token provider could not fix, a 403 or another 4xx,
        /// a gap (stopped until the next run); or the ledger failing (retrying at the longest backoff).
        case failed

        var rank: Int {
            switch self {
            case .idle: 0
            case .stopped: 1
            case .syncing: 2
            case .offline: 3
            case .failed: 4
            }
        }

        /// Orders phases from the calmest to the most urgent.
        public static func < (a: Phase, b: Phase) -> Bool { a.rank < b.rank }
    }

    /// One direction's state.
    public struct Direction: Hashable, Sendable {
        /// Its phase now.
        public var phase: Phase = .stopped
        /// Its last failure, until its next success (never ``SyncError/cancelled``).
        public var error: SyncError?
        /// When it last exchanged with the server successfully.
        public var lastSuccess: Timestamp?

        /// ``error`` in words.
        public var lastError: String? { error?.description }

        /// A stopped direction.
        public init() {}
    }

    /// The up direction (the relay: sending the ledger's shared events).
    public var up = Direction()
    /// The down direction (the feed: appending the server's changes).
    public var down = Direction()
    /// The worse of the two directions' phases.
    public var phase: Phase { max(up.phase, down.phase) }
    /// The failure of the worse direction (either's if both are equally bad), until that
    /// direction succeeds.
    public var error: SyncError? { up.phase >= down.phase ? up.error ?? down.error : down.error ?? up.error }
    /// ``error`` in words.
    public var lastError: String? { error?.description }
    /// When the last exchange with the server (either direction) succeeded.
    public var lastSuccess: Timestamp? {
        switch (up.lastSuccess, down.lastSuccess) {
        case let (u?, d?): max(u, d)
        case let (u, d): u ?? d
        }
    }
    /// Events the server acknowledged through this client (shared events sent and applied or held).
    public var eventsSent: Int = 0
    /// Feed entries appended to the ledger through this client (replays included).
    public var changesReceived: Int = 0
    /// The relay consumer's cursor: every event up to it is acknowledged by the server.
    public var upCursor: UInt64 = 0
    /// Events in the ledger after the relay's cursor: not yet acknowledged by the server
    /// (pending while offline or stopped, or refused), shared or not. Read from the ledger
    /// when the client is made, then whenever the up direction reads, sends or fails, and on
    /// each lease renewal.
    public var upLag: UInt64 = 0
    /// The last feed sequence applied.
    public var downCursor: UInt64 = 0
    /// The feed's head as the server last reported it; nil until the first answer (stale
    /// while the down direction is offline).
    public var downHead: UInt64?
    /// Feed entries not applied yet, as of the server's last answer (look at ``down`` to know
    /// whether that answer is recent); nil until the first answer: unknown, not zero.
    public var downLag: UInt64? { downHead.map { $0 > downCursor ? $0 - downCursor : 0 } }
    /// Events the relay could not send because compaction trimmed them first (declared lost to
    /// the server, docs/sync.md "Up").
    public var eventsLost: UInt64 = 0
    /// Shared events the server refused for their content (an event an older ledger accepted,
    /// a stricter server): skipped, declared to the server, counted here — the events after
    /// them were sent (docs/sync.md, "Refused events").
    public var eventsRefused: UInt64 = 0

    /// A stopped status that knows nothing yet.
    public init() {}
}
