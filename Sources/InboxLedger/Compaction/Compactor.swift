import LMDB

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Snapshots the projections and trims the log, in short transactions, without ever dropping
/// an event a live consumer has not read.
///
/// ```swift
/// let compactor = Compactor(ledger: ledger)
/// let report = try compactor.runOnce()            // or: try await compactor.run()
/// print(report.eventsTrimmed, report.blockers)
/// ```
///
/// Phases, each its own transaction(s), so a process killed at any instant leaves a consistent
/// ledger and a rerun finishes the job: take the compaction lease; write a snapshot at the head
/// unless one at or after the trim point exists; delete events up to the trim point in chunks
/// of ``CompactionPolicy/chunkSize``; forget idempotency keys past their window; delete old
/// snapshots; record the report and release the lease. The trim point is
/// `min(snapshot, every live consumer's cursor, head − retainedTail)`.
public final class Compactor: Sendable {
    /// Where a run is; test hooks observe these.
    @_spi(Testing) public enum Phase: String, Sendable {
        case leased, snapshotWritten, chunkTrimmed, keysSwept, snapshotsPruned, finished
    }

    /// The ledger it compacts.
    public let ledger: Ledger
    /// What it keeps and when it runs.
    public let policy: CompactionPolicy
    let faultHook: (@Sendable (Phase) -> Void)?
    private let token: UInt64

    /// A compactor of `ledger` with `policy`; it writes nothing until ``runOnce(dryRun:)`` or ``run(checkEvery:)``.
    public convenience init(ledger: Ledger, policy: CompactionPolicy = CompactionPolicy()) {
        self.init(ledger: ledger, policy: policy, faultHook: nil)
    }

    /// A compactor that calls `faultHook` at every phase boundary (fault-injection tests).
    @_spi(Testing) public init(ledger: Ledger, policy: CompactionPolicy, faultHook: (@Sendable (Phase) -> Void)?) {
        self.ledger = ledger
        self.policy = policy
        self.faultHook = faultHook
        var generator = SystemRandomNumberGenerator()
        self.token = generator.next()
    }

    private struct Plan {
        var head: UInt64
        var first: UInt64
        var trimThrough: UInt64
        var latestSnapshot: UInt64?
        var blockers: [CompactionReport.Blocker]
        var expired: [String]
    }

    private func plan(now: Int64) throws(LedgerError) -> Plan {
        try ledger.read("plan compaction") { txn in
            let head = try ledger.headSequence(in: txn)
            let first = try ledger.firstSequence(in: txn)
            let tail = UInt64(max(0, policy.retainedTail))
            var limit = head > tail ? head - tail : 0
            var blockers: [CompactionReport.Blocker] = []
            if tail > 0, limit < head { blockers.append(.retainedTail(through: limit)) }
            var expired: [String] = []
            let leaseMicros = Int64(policy.consumerLeaseSeconds * 1_000_000)
            for info in try ledger.consumers(in: txn) {
                if now - info.lastSeen.micros > leaseMicros {
                    expired.append(info.name)
                } else if info.cursor < limit {
                    limit = info.cursor
                    blockers.append(.consumer(name: info.name, cursor: info.cursor))
                }
            }
            let latest = try ledger.snapshotHeaders(in: txn).last?.sequence
            return Plan(head: head, first: first, trimThrough: limit, latestSnapshot: latest, blockers: blockers, expired: expired)
        }
    }

    /// Whether a trigger of the policy fires now.
    public func isDue() throws(LedgerError) -> Bool {
        if try ledger.count() > policy.triggerEvents { return true }
        if let bytes = policy.triggerFileBytes, try ledger.statistics().fileBytes > bytes { return true }
        return false
    }

    /// Compacts once (or, with `dryRun`, reports what it would do and what blocks it).
    @discardableResult
    public func runOnce(dryRun: Bool = false) throws(LedgerError) -> CompactionReport {
        let started = monotonicSeconds()
        // A slot left by a killed reader pins the pages this run frees: clear such slots first.
        // Best effort: a failure here only means dead readers may pin pages until the next run.
        if !dryRun { _ = try? ledger.clearStaleReaders() }
        // The ledger's clock judges consumer leases and key windows; the compactors' own lease
        // (mutual exclusion between processes) always runs on the system clock.
        let now = ledger.options.clock.now().micros
        let plan = try plan(now: now)
        let willTrim = plan.trimThrough >= plan.first
        var report = CompactionReport(
            dryRun: dryRun, snapshotSequence: plan.latestSnapshot, snapshotWritten: false,
            trimmed: willTrim ? plan.first...plan.trimThrough : nil,
            eventsTrimmed: willTrim ? Int(plan.trimThrough - plan.first + 1) : 0,
            keysForgotten: 0, snapshotsDeleted: 0, chunks: 0, seconds: 0, blockers: plan.blockers,
            expiredConsumers: plan.expired, firstSequence: plan.first, headSequence: plan.head)
        if dryRun || ledger.writeRefusal != nil {
            if !dryRun { try ledger.checkWritable() }
            if willTrim, (plan.latestSnapshot ?? 0) < plan.trimThrough { report.snapshotSequence = plan.head }
            report.seconds = monotonicSeconds() - started
            return report
        }
        if let holder = try acquireLease(now: currentMicros()) {
            report.blockers.append(.anotherCompactor(pid: holder))
            report.trimmed = nil
            report.eventsTrimmed = 0
            report.seconds = monotonicSeconds() - started
            return report
        }
        faultHook?(.leased)
        do {
            report.eventsTrimmed = 0
            if willTrim {
                if (plan.latestSnapshot ?? 0) < plan.trimThrough || plan.latestSnapshot == nil {
                    let info = try ledger.write("write snapshot", durability: .singleSync) { txn in try ledger.writeSnapshot(in: txn, now: now) }
                    report.snapshotSequence = info.sequence
                    report.snapshotWritten = true
                    faultHook?(.snapshotWritten)
                }
                while true {
                    let trimmed = try ledger.write("trim", durability: .singleSync) { txn in try trimChunk(through: plan.trimThrough, now: now, in: txn) }
                    if trimmed == 0 { break }
                    report.eventsTrimmed += trimmed
                    report.chunks += 1
                    faultHook?(.chunkTrimmed)
                    if policy.pauseBetweenChunksMicros > 0 { usleep(UInt32(policy.pauseBetweenChunksMicros)) }
                }
            }
            report.keysForgotten = try sweepKeys(now: now)
            faultHook?(.keysSwept)
            report.snapshotsDeleted = try pruneSnapshots()
            faultHook?(.snapshotsPruned)
            let (first, head) = try ledger.read("read range") { txn in
                (try ledger.firstSequence(in: txn), try ledger.headSequence(in: txn))
            }
            report.firstSequence = first
            report.headSequence = head
            report.seconds = monotonicSeconds() - started
            let finished = report
            let didWork = finished.eventsTrimmed > 0 || finished.snapshotWritten || finished.snapshotsDeleted > 0 || finished.keysForgotten > 0
            try ledger.write("record compaction") { txn in
                if didWork {
                    try ledger.schema.metaRecord(txn).put(Meta.lastCompaction, CompactionRecord(finished, at: now))
                }
                try releaseLease(in: txn)
            }
            faultHook?(.finished)
        } catch {
            // The run's own error is what the caller needs; an unreleased lease expires by itself.
            _ = try? ledger.write("release lease") { txn in try releaseLease(in: txn) }
            throw error
        }
        return report
    }

    /// One check of ``run(checkEvery:)``: reads the head and compacts when due. A suspended
    /// process, or another process stopped inside its write, only postpones the run to the next
    /// check (nil): the compactor outlives suspensions.
    private func check() throws(LedgerError) -> UInt64? {
        do {
            let head = try ledger.headSequence()
            if try isDue() { _ = try runOnce() }
            return head
        } catch {
            if error.isTransient { return nil }
            throw error
        }
    }

    /// Runs until the task is cancelled: compacts whenever a trigger fires, checking after
    /// appends (change notification) and at least every `checkEvery`. Suspension
    /// (``Ledger/suspend(waitingUpTo:)``) pauses it; it goes on after ``Ledger/resume()``.
    public func run(checkEvery: Duration = .seconds(30)) async throws {
        var seen: UInt64 = 0  // the first check below runs at once anyway
        while !Task.isCancelled {
            if let head = try check() { seen = head }
            let ledger = ledger
            let after = seen
            seen = try await withThrowingTaskGroup(of: UInt64?.self) { group in
                group.addTask { try await ledger.waitForChange(after: after) }
                group.addTask {
                    try await Task.sleep(for: checkEvery)
                    return nil
                }
                let first = try await group.next() ?? nil
                group.cancelAll()
                return first ?? after
            }
        }
    }

    // MARK: - Phases

    /// Takes the compaction lease, or returns the pid of a live process holding it.
    private func acquireLease(now: Int64) throws(LedgerError) -> Int32? {
        try ledger.write("take compaction lease") { txn -> Int32? in
            if let lease = try ledger.schema.metaRecord(txn).get(Meta.compactorLease),  // an unreadable lease is taken over
               lease.owner != token, lease.expires > now, processIsAlive(lease.pid) {
                return lease.pid
            }
            try renewLease(now: now, in: txn)
            return nil
        }
    }

    private func renewLease(now: Int64, in txn: Transaction) throws {
        let lease = LeaseRecord(pid: getpid(), owner: token, expires: now + LeaseRecord.duration)
        try ledger.schema.metaRecord(txn).put(Meta.compactorLease, lease)
    }

    private func releaseLease(in txn: Transaction) throws {
        let meta = ledger.schema.metaRecord(txn)
        guard try meta.get(Meta.compactorLease)?.owner == token else { return }
        try meta.delete(Meta.compactorLease)
    }

    /// Deletes up to a chunk of events with sequence ≤ `through`; returns how many.
    ///
    /// The idempotency keys of the trimmed events are kept and re-stamped with
    /// max(their stamp, `now`): a key's window runs from the later of its writer's stamp and the
    /// moment a compactor trimmed its event, by the compactor's clock. So a writer whose clock
    /// is behind cannot make a key expire early (its retry would be appended twice); only
    /// ``sweepKeys(now:)`` forgets keys, and it counts them.
    private func trimChunk(through: UInt64, now: Int64, in txn: Transaction) throws -> Int {
        let schema = ledger.schema
        var counts = EventCounts()
        var keys: [(key: String, sequence: UInt64)] = []
        // One pass of the cursor: each record is deleted where the cursor stands (no second
        // search), and the next first record is where it stands after the delete.
        let trimmed = try txn.withCursor(schema.events) { cursor -> Int in
            var trimmed = 0
            var entry = try cursor.first()
            while let e = entry, trimmed < max(1, policy.chunkSize) {
                guard let seq = SequenceKey.decode(e.key), seq <= through else { break }
                // A record whose header is damaged is trimmed all the same; only its counters are lost.
                if let header = EventRecord.peek(e.value) {
                    counts.count(type: header.type, role: header.role)
                    if let key = header.key { keys.append((key, seq)) }
                }
                try cursor.deleteCurrent()
                trimmed += 1
                entry = try cursor.first()
            }
            return trimmed
        }
        for (key, seq) in keys {
            if let bytes = try txn.get(schema.keys, key: Array(key.utf8)), var stored = KeyRecord.decode(bytes),
               stored.sequence == seq, stored.time < now {
                stored.time = now
                try txn.put(schema.keys, key: Array(key.utf8), value: stored.encode())
            }
        }
        try counts.apply(to: schema.metaRecord(txn), subtracting: true)
        if trimmed > 0 { try renewLease(now: currentMicros(), in: txn) }
        return trimmed
    }

    /// Forgets keys whose event is trimmed and whose window has passed, a chunk per transaction;
    /// returns how many (the report's `keysForgotten`: every key a run forgets is forgotten here).
    private func sweepKeys(now: Int64) throws(LedgerError) -> Int {
        let cutoff = now - Int64(policy.keyRetentionSeconds * 1_000_000)
        var position: [UInt8] = []
        var forgotten = 0
        while true {
            let (deleted, next) = try ledger.write("forget keys", durability: .singleSync) { txn -> (Int, [UInt8]?) in
                let first = try ledger.firstSequence(in: txn)
                var doomed: [[UInt8]] = []
                var next: [UInt8]?
                var examined = 0
                try txn.forEachEntry(ledger.schema.keys, from: position) { e in
                    if examined == max(1, policy.chunkSize) * 4 { next = e.key; return .stop }
                    examined += 1
                    if let record = KeyRecord.decode(e.value), record.sequence < first, record.time < cutoff {
                        doomed.append(e.key)
                    }
                    return .next
                }
                for key in doomed { try txn.delete(ledger.schema.keys, key: key) }
                return (doomed.count, next)
            }
            forgotten += deleted
            guard let next else { return forgotten }
            position = next
        }
    }

    /// Deletes snapshots beyond the newest `keepSnapshots` and any left incomplete.
    private func pruneSnapshots() throws(LedgerError) -> Int {
        let present = try ledger.read("list snapshots") { txn in try ledger.snapshotPrefixes(in: txn) }
        let complete = present.filter { $0.info != nil }
        let keep = Set(complete.suffix(max(1, policy.keepSnapshots)).map(\.sequence))
        var deleted = 0
        for snapshot in present where !keep.contains(snapshot.sequence) {
            while try ledger.write("delete snapshot", durability: .singleSync, { txn in try ledger.deleteSnapshotRows(snapshot.sequence, limit: max(1, policy.chunkSize), in: txn) }) > 0 {}
            if snapshot.info != nil { deleted += 1 }
        }
        return deleted
    }
}

/// The last compaction, kept in the meta table for `inspect`.
struct CompactionRecord: Hashable, Sendable, MetaStorable {
    var at: Int64
    var snapshot: UInt64
    var trimmedThrough: UInt64
    var eventsTrimmed: UInt64
    var micros: UInt64

    init(_ report: CompactionReport, at: Int64) {
        self.at = at
        snapshot = report.snapshotSequence ?? 0
        trimmedThrough = report.trimmed?.upperBound ?? 0
        eventsTrimmed = UInt64(report.eventsTrimmed)
        micros = UInt64(max(0, report.seconds * 1_000_000))
    }

    init(at: Int64, snapshot: UInt64, trimmedThrough: UInt64, eventsTrimmed: UInt64, micros: UInt64) {
        self.at = at
        self.snapshot = snapshot
        self.trimmedThrough = trimmedThrough
        self.eventsTrimmed = eventsTrimmed
        self.micros = micros
    }

    func encode() -> [UInt8] {
        var w = ByteWriter(capacity: 40)
        for v in [UInt64(bitPattern: at), snapshot, trimmedThrough, eventsTrimmed, micros] { w.u64be(v) }
        return w.bytes
    }

    static func decode(_ bytes: [UInt8]) -> CompactionRecord? {
        var r = ByteReader(bytes)
        guard let a = r.u64be(), let s = r.u64be(), let t = r.u64be(), let n = r.u64be(), let m = r.u64be(), r.remaining == 0 else { return nil }
        return CompactionRecord(at: Int64(bitPattern: a), snapshot: s, trimmedThrough: t, eventsTrimmed: n, micros: m)
    }
}

extension LeaseRecord: MetaStorable {}

extension Meta {
    /// The last compaction that did work.
    static let lastCompaction = MetaField<MetaEncodings.Record<CompactionRecord>>(Schema.MetaKey.lastCompaction)
    /// The compactor's lease: one compaction at a time across processes.
    static let compactorLease = MetaField<MetaEncodings.Record<LeaseRecord>>(Schema.MetaKey.compactorLease)
}
