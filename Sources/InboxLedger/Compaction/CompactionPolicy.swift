/// When and how much the compactor trims.
///
/// ```swift
/// var policy = CompactionPolicy()
/// policy.retainedTail = 500
/// policy.consumerLeaseSeconds = 3600
/// let report = try Compactor(ledger: ledger, policy: policy).runOnce()
/// ```
public struct CompactionPolicy: Sendable, Hashable {
    /// Trigger for ``Compactor/run(checkEvery:)``: compact when the log holds more events than this.
    public var triggerEvents: Int = 10_000
    /// Trigger: compact when `data.mdb` is larger than this many bytes (nil: no byte trigger).
    public var triggerFileBytes: Int? = nil
    /// The latest events always kept, whatever consumers have read.
    public var retainedTail: Int = 1_000
    /// A consumer silent (no commit, no heartbeat) for longer than this no longer holds
    /// trimming back; it is reported, and gets ``LedgerError/consumerGap(name:cursor:firstAvailable:)``.
    public var consumerLeaseSeconds: Double = 7 * 86_400
    /// Events deleted per write transaction: bounds how long a concurrent writer can wait.
    public var chunkSize: Int = 1_000
    /// Pause between two chunks, in microseconds. LMDB's writer lock is not fair: without a
    /// pause, a compactor that commits chunk after chunk can keep a waiting writer out for the
    /// whole trim.
    public var pauseBetweenChunksMicros: Int = 200
    /// Snapshots kept (the newest ones; at least 1).
    public var keepSnapshots: Int = 2
    /// An idempotency key is remembered while its event is in the log, and then at least this
    /// long after both its stamp and the compaction that trimmed its event (by the compacting
    /// process's clock): a writer whose clock is behind cannot shorten the window.
    public var keyRetentionSeconds: Double = 7 * 86_400

    /// The default policy (the values above).
    public init() {}
}

/// What one compaction did (or, for a dry run, would do).
public struct CompactionReport: Sendable, Hashable {
    /// Something that kept the compactor from trimming further.
    public enum Blocker: Sendable, Hashable, CustomStringConvertible {
        /// A live consumer has not read past `cursor`.
        case consumer(name: String, cursor: UInt64)
        /// The retained tail (policy) keeps events after `through`.
        case retainedTail(through: UInt64)
        /// Another compactor (process `pid`) holds the compaction lease.
        case anotherCompactor(pid: Int32)
        /// App projection `name` has applied the log only through `through` (events other
        /// processes appended wait for a process that registers it, or it is being built).
        case projection(name: String, through: UInt64)
        /// App projection `name` holds this ledger's shared event `sequence` pending: the
        /// user's feed has not placed it yet, and a rebase applies it again from the log
        /// (docs/semantics.md, "Custom events on every device").
        case pendingSharedEvent(name: String, sequence: UInt64)

        /// What the blocker is, in a sentence.
        public var description: String {
            switch self {
            case .consumer(let name, let cursor): "consumer '\(name)' has read only up to \(cursor)"
            case .retainedTail(let through): "the retained tail keeps events after \(through)"
            case .anotherCompactor(let pid): "another compactor (pid \(pid)) is running"
            case .projection(let name, let through): "app projection '\(name)' has applied the log only through \(through)"
            case .pendingSharedEvent(let name, let sequence): "app projection '\(name)' holds shared event \(sequence) pending until the feed places it"
            }
        }
    }

    /// Whether nothing was written.
    public var dryRun: Bool
    /// The snapshot the trimmed log now rests on.
    public var snapshotSequence: UInt64?
    /// Whether this run wrote that snapshot.
    public var snapshotWritten: Bool
    /// Events trimmed (or to be trimmed): `trimmed.lowerBound...trimmed.upperBound`, nil if none.
    public var trimmed: ClosedRange<UInt64>?
    /// How many events that is.
    public var eventsTrimmed: Int
    /// Idempotency keys this run forgot (their events trimmed, past the key window): every one.
    public var keysForgotten: Int
    /// Old snapshots deleted.
    public var snapshotsDeleted: Int
    /// Write transactions used for trimming.
    public var chunks: Int
    /// Wall time.
    public var seconds: Double
    /// What limited the trim.
    public var blockers: [Blocker]
    /// Consumers whose lease expired: no longer protected, they will get a gap error.
    public var expiredConsumers: [String]
    /// The log's first sequence afterwards.
    public var firstSequence: UInt64
    /// The log's head afterwards.
    public var headSequence: UInt64
}
