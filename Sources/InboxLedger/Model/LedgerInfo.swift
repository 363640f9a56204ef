// What a ledger reports about itself and its parts: values an app reads, with no behaviour.

/// A ledger's identity, written once when it is created.
public struct LedgerMetadata: Hashable, Sendable {
    /// Format version of the ledger's records and tables.
    public var formatVersion: UInt32
    /// A random UUID naming this ledger.
    public var ledgerID: String
    /// Creation time, microseconds since the epoch.
    public var createdAtMicros: Int64
    /// The weakest durability any process commits with (``LedgerOptions/durabilityFloor``);
    /// `singleSync` for ledgers created before the floor was recorded.
    public var durabilityFloor: LedgerDurability = .singleSync
    /// The version of the projection rules the stored projections were built by, once this
    /// handle opened the ledger (a writable opening rebuilds projections built by older rules;
    /// a newer version makes the handle read-only: ``LedgerError/newerProjections(path:found:supported:)``).
    public var projectionVersion: UInt32 = 1
}

/// What `ledger consumers` and ``LedgerConsumers/list()`` report about one consumer.
public struct ConsumerInfo: Hashable, Sendable, Codable, Identifiable {
    /// Its name.
    public var name: String
    /// The last sequence it handled.
    public var cursor: UInt64
    /// Events appended after its cursor.
    public var lag: UInt64
    /// Its last commit or heartbeat.
    public var lastSeen: Timestamp
    /// When it was registered.
    public var createdAt: Timestamp
}

/// A snapshot of the projections at a sequence, as listed by ``LedgerMaintenance/snapshots()``.
public struct SnapshotInfo: Hashable, Sendable, Codable {
    /// The projections equal a replay of every event up to and including this sequence.
    public var sequence: UInt64
    /// When it was written.
    public var createdAt: Timestamp
    /// Projection rows in the snapshot.
    public var rows: Int
    /// Bytes of keys and values.
    public var bytes: Int
}

/// What `ledger inspect` lists for an app projection: its stored record.
public struct ProjectionInfo: Sendable, Hashable, Codable {
    /// The projection's name.
    public var name: String
    /// The version its stored state was built by.
    public var version: Int
    /// `ready`, `building`, `clearing` or `failed` (only a record written before events
    /// `apply` refuses were skipped: docs/semantics.md, "App projections").
    public var status: String
    /// Every event through this sequence is applied.
    public var appliedThrough: UInt64
    /// The build read the log after this sequence (earlier events had been trimmed).
    public var builtFrom: UInt64
    /// Rows stored.
    public var rows: Int
    /// The event types it reads.
    public var eventTypes: [String]
    /// Why it failed (status `failed`).
    public var failure: String?
    /// How many events already in the log its `apply` refused, each skipped.
    public var skippedEvents: Int = 0
    /// The last event skipped: its sequence, type and why (nil: none).
    public var lastSkipped: String?
    /// This ledger's shared events it applies on top of the confirmed state until the user's
    /// feed places them (docs/semantics.md, "Custom events on every device"); 0: none.
    public var pendingSharedEvents: Int = 0
}
