/// What ``LedgerMaintenance/verify()`` found.
public struct VerificationReport: Sendable, Hashable {
    /// One problem, precise enough to act on.
    public enum Finding: Sendable, Hashable, CustomStringConvertible {
        /// A record fails its checksum or cannot be decoded.
        case corruptRecord(sequence: UInt64, reason: String)
        /// Sequences missing between the first retained event and the head.
        case missingSequences(from: UInt64, through: UInt64)
        /// The last record's sequence differs from the recorded head.
        case headMismatch(recorded: UInt64, lastRecord: UInt64)
        /// A projection differs from a rebuild.
        case projection(ProjectionMismatch)
        /// The projections could not be rebuilt.
        case rebuildFailed(reason: String)
        /// A consumer's cursor is past the head.
        case consumerAhead(name: String, cursor: UInt64, head: UInt64)
        /// A snapshot cannot be read back.
        case snapshot(sequence: UInt64, reason: String)
        /// A page of the store's B-trees is damaged or missing (found by walking the file
        /// with `pread`; nothing else is read through LMDB once one is found).
        case damagedPage(String)
        /// The reader table in `lock.mdb` could not be read.
        case unreadableReaderTable(reason: String)
        /// An app projection's stored state is damaged (a record, row, index entry or document
        /// that does not decode or agree with the rest), or differs from a rebuild by the
        /// registered ``LedgerProjection`` (docs/format.md, "App projections").
        case appProjection(name: String, problem: String)

        /// The finding, precisely enough to act on.
        public var description: String {
            switch self {
            case .corruptRecord(let s, let r): "record \(s): \(r)"
            case .missingSequences(let a, let b): a == b ? "sequence \(a) is missing" : "sequences \(a)–\(b) are missing"
            case .headMismatch(let h, let l): "the head is recorded as \(h) but the last record is \(l)"
            case .projection(let m): m.description
            case .rebuildFailed(let r): "projections cannot be rebuilt: \(r)"
            case .consumerAhead(let n, let c, let h): "consumer '\(n)' is at \(c), past the head \(h)"
            case .snapshot(let s, let r): "snapshot \(s): \(r)"
            case .damagedPage(let text): text
            case .unreadableReaderTable(let reason): "the reader table in lock.mdb cannot be read: \(reason)"
            case .appProjection(let name, let problem): "app projection '\(name)': \(problem)"
            }
        }
    }

    /// Something worth knowing that is not damage.
    public enum Warning: Sendable, Hashable, CustomStringConvertible {
        /// A consumer's cursor is below the first retained event: it will get a gap error.
        case consumerBehindLog(name: String, cursor: UInt64, firstRetained: UInt64)
        /// Reader slots held by processes that no longer exist.
        case staleReaders(pids: [Int32])
        /// Rows of a snapshot whose deletion was interrupted (the next compaction removes them).
        case incompleteSnapshot(sequence: UInt64)
        /// An app projection this handle registers could not be compared with a rebuild: the
        /// events it was built from were trimmed and no snapshot holds its state late enough
        /// (its stored state is used as it is; only its structure was checked).
        case appProjectionNotRebuilt(name: String, reason: String)
        /// App projection `name` is `failed`: an event in the log that its `apply` refused (the
        /// reason names it); its reads are refused until a version that applies it rebuilds it.
        case appProjectionFailed(name: String, reason: String)
        /// Version `version` of app projection `name` skipped `count` events already in the log
        /// that its `apply` refused (docs/semantics.md, "App projections"); `last` names the last.
        case appProjectionSkippedEvents(name: String, version: Int, count: Int, last: String)

        /// The warning in a sentence.
        public var description: String {
            switch self {
            case .consumerBehindLog(let n, let c, let f): "consumer '\(n)' is at \(c) but the log starts at \(f): it will need to rebase"
            case .staleReaders(let pids): "reader slots held by dead processes: \(pids.map(String.init).joined(separator: ", "))"
            case .incompleteSnapshot(let s): "snapshot \(s) was partly deleted; the next compaction removes the rest"
            case .appProjectionNotRebuilt(let n, let r): "app projection '\(n)' was not compared with a rebuild: \(r)"
            case .appProjectionFailed(let n, let r): "app projection '\(n)' has failed and cannot be read: \(r)"
            case .appProjectionSkippedEvents(let n, let v, let c, let l): "app projection '\(n)' version \(v) skipped \(c) event\(c == 1 ? "" : "s") its apply refused (last: \(l))"
            }
        }
    }

    /// Records read and checked.
    public var eventsChecked: Int
    /// The first sequence in the log.
    public var firstSequence: UInt64
    /// The last sequence assigned.
    public var headSequence: UInt64
    /// Snapshots read back.
    public var snapshotsChecked: Int
    /// Damage found; empty when healthy.
    public var findings: [Finding]
    /// Things worth knowing that are not damage.
    public var warnings: [Warning]

    /// No finding.
    public var isHealthy: Bool { findings.isEmpty }
}

extension LedgerMaintenance {
    /// Checks everything that can be checked: every page of every B-tree (read with `pread`,
    /// never through LMDB's map, so a damaged page is a finding and not a crash), every record's
    /// checksum and decodability, that sequences are dense up to the head, the projections
    /// against a rebuild, the app projections' stored state (its structure always; a rebuild of
    /// each one this handle registers, ``LedgerOptions/projections``), consumer cursors, every
    /// snapshot, and the reader table.
    ///
    /// Every check after the page walk reads one snapshot (one read transaction), so it is
    /// exact while other processes append. That transaction pins the pages of its snapshot for
    /// the length of the check: the file may grow meanwhile under heavy churn.
    ///
    /// ```swift
    /// let report = try ledger.maintenance.verify()
    /// if !report.isHealthy { report.findings.forEach { print($0) } }
    /// ```
    public func verify() throws(LedgerError) -> VerificationReport {
        let damaged = try store.damagedPages()
        guard damaged.isEmpty else {
            // Reading damaged pages through LMDB's map can abort the process: stop here.
            return VerificationReport(eventsChecked: 0, firstSequence: 0, headSequence: 0, snapshotsChecked: 0,
                                      findings: damaged.map { .damagedPage($0) }, warnings: [])
        }
        var report = try read("verify") { tables in try verify(in: tables) }
        // Reader table (outside LMDB's transactions; a failure to read it is itself reported).
        switch store.readers() {
        case .slots(let slots):
            let dead = slots.map(\.pid).filter { !processIsAlive($0) }
            if !dead.isEmpty { report.warnings.append(.staleReaders(pids: Array(Set(dead)).sorted())) }
        case .unreadable(let message, _):
            report.findings.append(.unreadableReaderTable(reason: message))
        }
        return report
    }

    /// The damaged pages of the store in `path`, found by walking its file with `pread`s
    /// without opening it: for a store that cannot be opened (``LedgerError/corruptStore(path:reason:)``).
    /// Empty if no page is damaged or the file has no readable meta page.
    ///
    /// ```swift
    /// for problem in LedgerMaintenance.damagedPages(at: "/tmp/inbox") { print(problem) }
    /// ```
    public static func damagedPages(at path: String) -> [String] {
        LedgerStore.damagedPages(at: path)
    }

    private func verify(in tables: StoreTransaction) throws -> VerificationReport {
        var findings: [VerificationReport.Finding] = []
        var warnings: [VerificationReport.Warning] = []
        let (first, head) = (try tables.firstSequence(), try tables.head())

        // Records: checksums, decodability, density.
        var checked = 0
        var expected = first
        var last: UInt64 = first > 0 ? first - 1 : 0
        try tables.events.forEachRow { e in
            guard let seq = e.sequence else {
                findings.append(.corruptRecord(sequence: 0, reason: "a key of \(e.key.count) bytes is not a sequence"))
                return .next
            }
            if seq > head {
                findings.append(.headMismatch(recorded: head, lastRecord: seq))
                return .next
            }
            if seq > expected { findings.append(.missingSequences(from: expected, through: seq - 1)) }
            if case .failure(let error) = EventRecord.decode(e.record, sequence: seq) {
                findings.append(.corruptRecord(sequence: seq, reason: error.description))
            }
            expected = seq + 1
            last = seq
            checked += 1
            return .next
        }
        if last != head && !(checked == 0 && first == head + 1) {
            findings.append(.headMismatch(recorded: head, lastRecord: last))
        }

        // Projections against a rebuild (skipped if records are damaged: it would fail on them).
        if !findings.contains(where: { if case .corruptRecord = $0 { true } else { false } }) {
            do {
                if let mismatch = try verifyProjections(in: tables) { findings.append(.projection(mismatch)) }
            } catch let error as LedgerError {
                findings.append(.rebuildFailed(reason: error.description))
            }
        }

        // App projections: the table's structure (needs no registration: the CLI checks it
        // too), then a rebuild of each one this handle registers (skipped if records are damaged).
        let apps = try checkAppProjections(in: tables, head: head)
        findings += apps.findings
        if apps.damaged.isEmpty {  // (a damaged record is one of the findings above)
            for meta in try AppProjectionTable.metas(in: tables.projections, path: path) {
                if meta.status == .failed { warnings.append(.appProjectionFailed(name: meta.name, reason: meta.failure ?? "no reason recorded")) }
                if let count = meta.skipped, count > 0 {
                    warnings.append(.appProjectionSkippedEvents(name: meta.name, version: meta.version, count: count, last: meta.lastSkipped ?? "not recorded"))
                }
            }
        }
        if !findings.contains(where: { if case .corruptRecord = $0 { true } else { false } }) {
            let rebuilt = try rebuildAppProjections(in: tables, skipping: apps.damaged)
            findings += rebuilt.findings
            warnings += rebuilt.warnings
        }

        // Consumers and snapshots.
        for consumer in try tables.consumers.infos(head: head) {
            if consumer.cursor > head { findings.append(.consumerAhead(name: consumer.name, cursor: consumer.cursor, head: head)) }
            if consumer.cursor + 1 < first { warnings.append(.consumerBehindLog(name: consumer.name, cursor: consumer.cursor, firstRetained: first)) }
        }
        let snapshots = try tables.snapshots.prefixes()
        for snapshot in snapshots {
            guard snapshot.info != nil else {
                warnings.append(.incompleteSnapshot(sequence: snapshot.sequence))
                continue
            }
            do {
                try tables.snapshots.load(snapshot.sequence, into: MemoryStore())
            } catch {
                findings.append(.snapshot(sequence: snapshot.sequence, reason: (error as? LedgerError)?.description ?? String(describing: error)))
            }
        }
        return VerificationReport(eventsChecked: checked, firstSequence: first, headSequence: head,
                                  snapshotsChecked: snapshots.count, findings: findings, warnings: warnings)
    }
}
