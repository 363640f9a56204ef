#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import LedgerThreads

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
public final class Compactor: Sendable, LedgerAccessing {
    /// Where a run is; test hooks observe these.
    @_spi(Testing) public enum Phase: String, Sendable {
        case leased, snapshotWritten, chunkTrimmed, keysSwept, snapshotsPruned, finished
    }

    /// The ledger it compacts.
    public let ledger: Ledger
    /// The ledger's internals (the compactor reads and writes through them).
    let access: LedgerAccess
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
        self.access = ledger.access
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
        try read("plan compaction") { tables in
            let head = try tables.head()
            let first = try tables.firstSequence()
            let tail = UInt64(max(0, policy.retainedTail))
            var limit = head > tail ? head - tail : 0
            var blockers: [CompactionReport.Blocker] = []
            if tail > 0, limit < head { blockers.append(.retainedTail(through: limit)) }
            var expired: [String] = []
            let leaseMicros = Int64(policy.consumerLeaseSeconds * 1_000_000)
            for info in try tables.consumers.infos(head: head) {
                if now - info.lastSeen.micros > leaseMicros {
                    expired.append(info.name)
                } else if info.cursor < limit {
                    limit = info.cursor
                    blockers.append(.consumer(name: info.name, cursor: info.cursor))
                }
            }
            // An app projection's events not applied yet stay: the next process that keeps it
            // (or its build) reads them from the log.
            for meta in try AppProjectionTable.metas(in: tables.projections, path: tables.path) where meta.appliedThrough < limit {
                limit = meta.appliedThrough
                blockers.append(.projection(name: meta.name, through: meta.appliedThrough))
            }
            // A pending shared event stays while it is younger than the consumer lease: a rebase
            // applies it again from the log. An older one is trimmed like an event the relay
            // never sent: the projection drops it at its next rebase, and if the server held it,
            // its feed entry brings it back as any device's (docs/semantics.md).
            for meta in try AppProjectionTable.metas(in: tables.projections, path: tables.path) {
                guard let first = meta.pending?.min(), first <= limit,
                      let event = try tables.events.event(at: first), now - event.timestampMicros <= leaseMicros else { continue }
                limit = first - 1
                blockers.append(.pendingSharedEvent(name: meta.name, sequence: first))
            }
            let latest = try tables.snapshots.headers().last?.sequence
            return Plan(head: head, first: first, trimThrough: limit, latestSnapshot: latest, blockers: blockers, expired: expired)
        }
    }

    /// Whether a trigger of the policy fires now.
    public func isDue() throws(LedgerError) -> Bool {
        if try read("count events", { tables in try tables.events.count() }) > policy.triggerEvents { return true }
        if let bytes = policy.triggerFileBytes, try LedgerMaintenance(access: access).statistics().fileBytes > bytes { return true }
        return false
    }

    /// Compacts once (or, with `dryRun`, reports what it would do and what blocks it).
    @discardableResult
    public func runOnce(dryRun: Bool = false) throws(LedgerError) -> CompactionReport {
        let started = monotonicSeconds()
        // A slot left by a killed reader pins the pages this run frees: clear such slots first.
        // Best effort: a failure here only means dead readers may pin pages until the next run.
        if !dryRun { _ = try? store.clearStaleReaders() }
        // The ledger's clock judges consumer leases and key windows; the compactors' own lease
        // (mutual exclusion between processes) always runs on the system clock.
        let now = options.clock.now().micros
        let plan = try plan(now: now)
        let willTrim = plan.trimThrough >= plan.first
        var report = CompactionReport(
            dryRun: dryRun, snapshotSequence: plan.latestSnapshot, snapshotWritten: false,
            trimmed: willTrim ? plan.first...plan.trimThrough : nil,
            eventsTrimmed: willTrim ? Int(plan.trimThrough - plan.first + 1) : 0,
            keysForgotten: 0, snapshotsDeleted: 0, chunks: 0, seconds: 0, blockers: plan.blockers,
            expiredConsumers: plan.expired, firstSequence: plan.first, headSequence: plan.head)
        if dryRun || writeRefusal != nil {
            if !dryRun { try checkWritable() }
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
                    let info = try write("write snapshot", durability: .singleSync) { tables in try tables.writeSnapshot(now: now) }
                    report.snapshotSequence = info.sequence
                    report.snapshotWritten = true
                    faultHook?(.snapshotWritten)
                }
                while true {
                    let trimmed = try write("trim", durability: .singleSync) { tables in try trimChunk(through: plan.trimThrough, now: now, in: tables) }
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
            let (first, head) = try read("read range") { tables in
                (try tables.firstSequence(), try tables.head())
            }
            report.firstSequence = first
            report.headSequence = head
            report.seconds = monotonicSeconds() - started
            let finished = report
            let didWork = finished.eventsTrimmed > 0 || finished.snapshotWritten || finished.snapshotsDeleted > 0 || finished.keysForgotten > 0
            try write("record compaction") { tables in
                if didWork {
                    try tables.meta.put(Meta.lastCompaction, CompactionRecord(finished, at: now))
                }
                try releaseLease(in: tables)
            }
            faultHook?(.finished)
        } catch {
            // The run's own error is what the caller needs; an unreleased lease expires by itself.
            _ = try? write("release lease") { tables in try releaseLease(in: tables) }
            throw error
        }
        return report
    }

    /// One check of ``run(checkEvery:)``: reads the head and compacts when due. A suspended
    /// process, or another process stopped inside its write, only postpones the run to the next
    /// check (nil): the compactor outlives suspensions.
    private func check() throws(LedgerError) -> UInt64? {
        do {
            let current = try head()
            if try isDue() { _ = try runOnce() }
            return current
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
            let access = access
            let after = seen
            seen = try await withThrowingTaskGroup(of: UInt64?.self) { group in
                group.addTask { try await access.waitForHead(after: after) }
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
        try write("take compaction lease") { tables -> Int32? in
            if let lease = try tables.meta.get(Meta.compactorLease),  // an unreadable lease is taken over
               lease.owner != token, lease.expires > now, processIsAlive(lease.pid) {
                return lease.pid
            }
            try renewLease(now: now, in: tables)
            return nil
        }
    }

    private func renewLease(now: Int64, in tables: StoreTransaction) throws {
        let lease = LeaseRecord(pid: getpid(), owner: token, expires: now + LeaseRecord.duration)
        try tables.meta.put(Meta.compactorLease, lease)
    }

    private func releaseLease(in tables: StoreTransaction) throws {
        let meta = tables.meta
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
    private func trimChunk(through: UInt64, now: Int64, in tables: StoreTransaction) throws -> Int {
        var counts = EventCounts()
        let trimmed = try tables.events.trimFront(through: through, limit: policy.chunkSize)
        for record in trimmed {
            // A record whose header is damaged is trimmed all the same; only its counters are lost.
            guard let header = record.header else { continue }
            counts.count(type: header.type, role: header.role)
            if let key = header.key { try tables.keys.restamp(key, sequence: record.sequence, now: now) }
        }
        try counts.apply(to: tables.meta, subtracting: true)
        if !trimmed.isEmpty { try renewLease(now: currentMicros(), in: tables) }
        return trimmed.count
    }

    /// Forgets keys whose event is trimmed and whose window has passed, a chunk per transaction;
    /// returns how many (the report's `keysForgotten`: every key a run forgets is forgotten here).
    private func sweepKeys(now: Int64) throws(LedgerError) -> Int {
        let cutoff = now - Int64(policy.keyRetentionSeconds * 1_000_000)
        var position: [UInt8] = []
        var forgotten = 0
        while true {
            let (deleted, next) = try write("forget keys", durability: .singleSync) { tables -> (Int, [UInt8]?) in
                let first = try tables.firstSequence()
                var doomed: [[UInt8]] = []
                var next: [UInt8]?
                var examined = 0
                try tables.keys.forEach(from: position) { key, record in
                    if examined == max(1, policy.chunkSize) * 4 { next = key; return .stop }
                    examined += 1
                    if let record, record.sequence < first, record.time < cutoff {
                        doomed.append(key)
                    }
                    return .next
                }
                for key in doomed { try tables.keys.delete(raw: key) }
                return (doomed.count, next)
            }
            forgotten += deleted
            guard let next else { return forgotten }
            position = next
        }
    }

    /// Deletes snapshots beyond the newest `keepSnapshots` and any left incomplete.
    private func pruneSnapshots() throws(LedgerError) -> Int {
        let present = try read("list snapshots") { tables in try tables.snapshots.prefixes() }
        let complete = present.filter { $0.info != nil }
        let keep = Set(complete.suffix(max(1, policy.keepSnapshots)).map(\.sequence))
        var deleted = 0
        for snapshot in present where !keep.contains(snapshot.sequence) {
            while try write("delete snapshot", durability: .singleSync, { tables in try tables.snapshots.deleteRows(snapshot.sequence, limit: max(1, policy.chunkSize)) }) > 0 {}
            if snapshot.info != nil { deleted += 1 }
        }
        return deleted
    }
}

extension CompactionRecord {
    init(_ report: CompactionReport, at: Int64) {
        self.at = at
        snapshot = report.snapshotSequence ?? 0
        trimmedThrough = report.trimmed?.upperBound ?? 0
        eventsTrimmed = UInt64(report.eventsTrimmed)
        micros = UInt64(max(0, report.seconds * 1_000_000))
    }
}
